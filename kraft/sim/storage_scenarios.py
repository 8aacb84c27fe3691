"""Storage-fault scenarios for issue 14 (items 4 and 5), each a function of a seed like those in
kraft/sim/scenarios.py, and caught by the checker when its fix is reverted
(tests/sim/test_sim_storage_faults.py):

* `install_crash`: a leader cut off with a long uncommitted tail rejoins, is sent to the new
  leader's snapshot, installs it and crashes right after `snapshot_loaded`, before its emptied
  log reaches the disk. On restart its log must continue the snapshot (the checker's
  start-up invariant), not keep the divergent tail.
* `power_loss`: under load, nodes lose power while a flush job is writing; the job's bytes
  reach the disk torn, zeroed or garbled past the durable image. Every node must start again
  (`MemoryLog.reopen` applies the real recovery rule against the recovery point) and nothing
  acknowledged may be lost.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from kraft.sim.cluster import SimCluster, SimNode
from kraft.sim.invariants import SimViolation
from kraft.sim.scenarios import (
    CONVERGE_BOUND_MS,
    ELECTION_BOUND_MS,
    _cluster,
    _converge,
    _elect,
    _write_for,
)


def install_crash(seed: int) -> SimCluster:
    """A leader cut off with a long uncommitted tail is sent, on its return, to a snapshot of
    the new leader that ends inside that tail; it crashes right after `snapshot_loaded`."""
    c = _cluster(seed, lossy=False)
    c.start_all()
    _elect(c)
    # Long enough, on some seeds, for the old leader's own snapshots to move its log start.
    _write_for(c, random.Random(seed ^ 0x1C7A).choice([300, 1_200]))
    # The leader now, not the first one elected: that one may have lost a race to a
    # candidate of the next epoch in the meantime (seed 6635226).
    c.run_until(lambda: c.leader() is not None, ELECTION_BOUND_MS, "a settled leader")
    settled = c.leader()
    assert settled is not None  # run_until just saw it
    old = settled.node_id
    c.network.isolate(old, set(c.nodes))
    # The cut-off leader takes appends it can never commit until the others elect a leader.
    _append_until(c, lambda: (leader := c.leader()) is not None and leader.node_id != old,
                  ELECTION_BOUND_MS, "a new leader on the majority side")

    def past_the_fork() -> bool:
        # The new leader's log starts at a snapshot of its own epoch: the old leader, whose
        # last epoch is older, is sent to its latest snapshot, which lies below the end of
        # the old leader's divergent tail (the majority writes far less than that tail).
        leading = c.leader()
        earliest = leading.snapshots.earliest_id() if leading is not None else None
        return (
            earliest is not None and leading is not None and leading.core is not None
            and earliest.epoch == leading.core.epoch
        )

    _append_until(c, past_the_fork, CONVERGE_BOUND_MS, "the new leader's log start moving")
    c.crash_after_snapshot_load.add(old)
    c.network.heal()
    installs = c.crashes_after_snapshot_load
    c.run_until(lambda: c.crashes_after_snapshot_load > installs, CONVERGE_BOUND_MS,
                "the old leader installing the new leader's snapshot")
    c.run_for(random.Random(seed).randint(0, 300))
    c.start(old)  # its log must continue the snapshot: the checker's start-up invariant
    _write_for(c, 300)
    _converge(c)
    return c


def _append_until(c: SimCluster, condition: Callable[[], bool], bound_ms: int, what: str) -> None:
    deadline = c.now + bound_ms
    while not condition():
        if c.now >= deadline:
            raise SimViolation(f"liveness: {what} not reached within {bound_ms} ms", c.now,
                               c.event_count)
        c.append_to_leader()
        c.run_for(20)


def power_loss(seed: int) -> SimCluster:
    """Under load, eight times a random node loses power while a flush job is writing, and
    starts again a moment later; the recovery point of some nodes lags (raised every third
    job)."""
    c = _cluster(seed)
    rng = random.Random(seed ^ 0x9A3E)
    c.timing.max_fsync_ms = 12  # jobs carry several batches: more to tear
    for node in c.nodes.values():
        node.log.recovery_point_every = rng.choice([1, 1, 3])  # a lagging one is safe too
    c.start_all()
    _elect(c)
    nodes = sorted(c.nodes)
    c.write_steadily(5, c.now + 8_000)
    for _ in range(8):
        c.run_for(rng.randint(100, 700))
        victim = c.nodes[rng.choice(nodes)]
        if not victim.alive:
            c.start(victim.node_id)
            continue
        if _run_until_writing(c, victim, 2_000):
            c.crash(victim.node_id, power_loss=True)
            c.run_for(rng.randint(0, 400))
            c.start(victim.node_id)
    _converge(c)
    return c


def _run_until_writing(c: SimCluster, node: SimNode, limit_ms: int) -> bool:
    """Step until `node` has a flush job writing; False if none within `limit_ms`."""
    deadline = c.now + limit_ms
    while node.alive and node.log.in_flight_bytes == 0:
        if not c.events or c.events[0][0] > deadline:
            return False
        c.step()
    return node.alive


STORAGE_SCENARIOS: dict[str, Callable[[int], SimCluster]] = {
    "install_crash": install_crash,
    "power_loss": power_loss,
}
