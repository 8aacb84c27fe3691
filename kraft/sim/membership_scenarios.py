"""Membership scenarios (issue 18, KIP-853) on dynamic clusters, each a function of a seed like
those in kraft/sim/scenarios.py: the voter set grows, shrinks, replaces a voter that lost its
disk, removes its leader, and changes under crashes and partitions, while records are
written; the voter-set invariants (kraft/sim/voter_invariants.py) hold after every event and
the committed records stay durable on a majority of the set that committed them.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from kraft.core.voters import ReplicaKey
from kraft.sim.cluster import SimCluster
from kraft.sim.invariants import SimViolation
from kraft.sim.membership import Operator, VoterChange
from kraft.sim.network import NetworkProfile
from kraft.sim.scenarios import CONVERGE_BOUND_MS, ELECTION_BOUND_MS, _converge, _elect

CHANGE_BOUND_MS = 60_000  # a change under a lossy network retries for a while
WRITE_INTERVAL_MS = 25


def _dynamic(
    seed: int, voters: int, joiners: int, lossy: bool = True, drift: bool = False
) -> SimCluster:
    """The seed picks the brokers (plain observers) and the network."""
    rng = random.Random(seed * 7919 + 23)
    profile = NetworkProfile(
        min_delay_ms=1,
        max_delay_ms=rng.choice([2, 5, 10, 25]),
        drop_rate=rng.choice([0.0, 0.0, 0.01, 0.05]) if lossy else 0.0,
        duplicate_rate=rng.choice([0.0, 0.01, 0.05]) if lossy else 0.0,
    )
    return SimCluster(
        seed, voters=voters, joiners=joiners, observers=rng.randint(0, 1), network=profile,
        clock_drift=random.Random(seed ^ 0xD21F7).choice([0.02, 0.1]) if drift else 0.0,
        dynamic=True,
    )


@dataclass
class Load:
    """Appends to whoever leads every `interval_ms` until stopped."""

    cluster: SimCluster
    interval_ms: int = WRITE_INTERVAL_MS
    running: bool = True

    def __post_init__(self) -> None:
        self.cluster.at(self.interval_ms, self._tick)

    def _tick(self) -> None:
        if self.running:
            self.cluster.append_to_leader()
            self.cluster.at(self.interval_ms, self._tick)

    def stop(self) -> None:
        self.running = False


def _await(c: SimCluster, change: VoterChange, bound_ms: int = CHANGE_BOUND_MS) -> None:
    if not change.done:
        c.run_until(lambda: change.done, bound_ms,
                    f"{change} (attempts {change.attempts}, refusals {change.refusals})")


def _change(c: SimCluster, op: Operator, add: bool, target: int | ReplicaKey) -> VoterChange:
    if add:
        assert isinstance(target, int)
        change = op.add(target)
    else:
        assert isinstance(target, ReplicaKey)
        change = op.remove(target)
    _await(c, change)
    return change


def _key(c: SimCluster, node_id: int) -> ReplicaKey:
    key = c.checker.voters.latest_committed().key_of(node_id)
    assert key is not None, f"node {node_id} is not a voter"
    return key


def _expect_voters(c: SimCluster, expected: set[ReplicaKey]) -> None:
    """After convergence: the committed set, and every live node's latest set, are these."""
    committed = {n.key for n in c.checker.voters.latest_committed()}
    if committed != expected:
        raise SimViolation(f"the committed voters are {sorted(committed)}, not "
                           f"{sorted(expected)}", c.now, c.event_count)
    for node in c.nodes.values():
        if node.core is not None and {n.key for n in node.core.voters} != expected:
            raise SimViolation(
                f"node {node.node_id} uses {node.core.voters.describe()} after convergence",
                c.now, c.event_count,
            )


def _finish(c: SimCluster, load: Load, expected: set[ReplicaKey] | None = None) -> SimCluster:
    load.stop()
    _converge(c)
    if expected is not None:
        _expect_voters(c, expected)
    return c


# -- the scenarios ------------------------------------------------------------------------------


def grow(seed: int) -> SimCluster:
    """One `--standalone` controller grows to three, then five (spec 9.1), under load. Two
    operators add two controllers at once each time (T4): the leader admits one change, the
    other is refused until that one commits, and its operator retries. On some seeds the
    controller just added is cut off as soon as its change is appended (T2, T3): going from
    one voter to two the quorum then stalls until it returns, and no other change may pass
    while the first is uncommitted."""
    c = _dynamic(seed, voters=1, joiners=4)
    rng = random.Random(seed ^ 0x6E0)
    c.start_all()
    _elect(c)
    load = Load(c)
    operators = [Operator(c, 0), Operator(c, 1)]
    for pair in ((2, 3), (4, 5)):
        changes = [op.add(node_id) for op, node_id in zip(operators, pair, strict=True)]
        if rng.random() < 0.5:
            c.run_until(
                lambda pending=changes: _appended(c) is not None  # type: ignore[misc]
                or all(ch.done for ch in pending),
                CHANGE_BOUND_MS, f"a change adding one of {pair} appended",
            )
            added = _appended(c)
            if added is not None:
                c.network.isolate(added, set(c.nodes))
                c.at(rng.randint(1_000, 6_000), c.network.heal)
        for change in changes:
            _await(c, change)
    return _finish(c, load, {c.nodes[i].key for i in range(1, 6)})


def _appended(c: SimCluster) -> int | None:
    """The node a leader's uncommitted change adds, if there is one."""
    leader = c.leader()
    if leader is None or leader.core is None:
        return None
    added = leader.core.voters.ids - c.checker.voters.latest_committed().ids
    return min(added) if added else None


def stalled_change(seed: int) -> SimCluster:
    """T2 and T24: the second voter is cut off as soon as its change is appended. Two voters
    need both, so the change cannot commit: its request times out and the record stays.
    Another operator's change is then refused, again and again, until the first commits once
    the voter returns (before check-quorum deposes the leader, or after a new election)."""
    c = _dynamic(seed, voters=1, joiners=2, lossy=False)
    rng = random.Random(seed ^ 0x57A1)
    c.start_all()
    _elect(c)
    load = Load(c)
    first, second = Operator(c, 0), Operator(c, 1)
    adding = first.add(2)
    c.run_until(lambda: _appended(c) == 2, CHANGE_BOUND_MS, "the change adding node 2 appended")
    c.network.isolate(2, set(c.nodes))
    c.run_until(lambda: adding.timed_out_after_append or adding.done, CHANGE_BOUND_MS,
                "the first change timing out")
    blocked = second.add(3)
    c.run_for(rng.randint(300, 1_200))
    c.network.heal()
    _await(c, adding)
    _await(c, blocked)
    return _finish(c, load, {c.nodes[i].key for i in (1, 2, 3)})


def shrink(seed: int) -> SimCluster:
    """Five `--initial-controllers` voters shrink to three under load; each removed
    controller is stopped, or keeps running as an observer."""
    c = _dynamic(seed, voters=5, joiners=0)
    rng = random.Random(seed ^ 0x5A1)
    c.start_all()
    _elect(c)
    load = Load(c)
    op = Operator(c)
    for node_id in rng.sample(range(1, 6), 2):
        _change(c, op, False, _key(c, node_id))
        if rng.random() < 0.5:
            c.shutdown(node_id)
    kept = c.voter_ids
    return _finish(c, load, {c.nodes[i].key for i in kept})


def disk_loss(seed: int) -> SimCluster:
    """A voter (the leader, on some seeds) loses its disk under load and is replaced with no
    operator pause: re-formatted with a new directory id, it joins as an observer and catches
    up; the old key is removed, then the new one added (spec 9.2). On some seeds another voter
    is cut off meanwhile (commits then need the lost replica, which must no longer count), or
    the leader crashes as the wiped node returns (its empty log must not help elect a leader
    that lacks committed records: KAFKA-14205)."""
    rng = random.Random(seed ^ 0xD15C)
    voters = rng.choice([3, 3, 5])
    c = _dynamic(seed, voters=voters, joiners=0)
    c.start_all()
    _elect(c)
    load = Load(c)
    c.run_for(rng.randint(200, 1_500))
    victim = rng.choice(sorted(c.voter_ids))
    old_key = c.nodes[victim].key
    hazard = rng.choice(["none", "cut_off", "leader_crash"])
    c.crash(victim)
    c.wipe(victim)
    c.run_for(rng.randint(0, 500))
    c.start(victim)
    if hazard == "cut_off":
        others = sorted(c.voter_ids - {victim} - {_leader_id(c)})
        if others:
            cut = rng.choice(others)
            c.network.isolate(cut, set(c.nodes))
            c.at(rng.randint(500, 4_000), c.network.heal)
    elif hazard == "leader_crash" and (leader := _leader_id(c)) not in (None, victim):
        c.crash(leader)
        c.at(rng.randint(500, 4_000), lambda: c.start(leader))
    op = Operator(c)
    _change(c, op, False, old_key)
    _change(c, op, True, victim)
    expected = {n.key for n in c.checker.voters.latest_committed()}
    assert c.nodes[victim].key in expected and old_key not in expected
    return _finish(c, load, expected)


def remove_leader(seed: int) -> SimCluster:
    """The leader is removed (spec 9.3): it leads until the removal commits, then resigns
    and carries on as an observer; a new leader follows. On some seeds it is added back."""
    rng = random.Random(seed ^ 0x1EAD)
    c = _dynamic(seed, voters=rng.choice([3, 3, 5]), joiners=0)
    c.start_all()
    _elect(c)
    load = Load(c)
    c.run_for(rng.randint(100, 1_000))
    c.run_until(lambda: c.leader() is not None, ELECTION_BOUND_MS, "a settled leader")
    leader = _leader_id(c)
    assert leader is not None
    op = Operator(c)
    _change(c, op, False, _key(c, leader))
    c.run_until(
        lambda: (now := c.leader()) is not None and now.node_id != leader,
        ELECTION_BOUND_MS, f"a successor to the removed leader {leader}",
    )
    if rng.random() < 0.5:
        _change(c, op, True, leader)
    return _finish(c, load, {n.key for n in c.checker.voters.latest_committed()})


def membership_chaos(seed: int) -> SimCluster:
    """Voters are added and removed, sometimes by two operators at once, while nodes crash,
    restart, lose their disks and are cut off, under load with drifting clocks; then
    everything heals, the changes finish and every node converges."""
    c = _dynamic(seed, voters=3, joiners=2, drift=True)
    rng = random.Random(seed ^ 0xC4A05)
    c.start_all()
    _elect(c)
    load = Load(c)
    operators = [Operator(c, 0), Operator(c, 1)]
    nodes = sorted(c.nodes)
    for _ in range(14):
        c.run_for(rng.randint(200, 1_500))
        for op in operators[: 1 + (rng.random() < 0.3)]:
            if op.idle:
                _start_random_change(c, op, operators, rng)
        fault = rng.random()
        node_id = rng.choice(nodes)
        if fault < 0.25:
            c.crash(node_id)
        elif fault < 0.45:
            c.start(node_id)
        elif fault < 0.55:
            _lose_disk(c, node_id, operators)
        elif fault < 0.67:
            c.network.isolate(node_id, set(nodes))
        elif fault < 0.75:
            side = set(rng.sample(nodes, len(nodes) // 2))
            c.network.partition(side, set(nodes) - side)
        elif fault < 0.9:
            c.network.heal()
        else:
            c.shutdown(node_id)
    c.network.heal()
    c.start_all()
    for op in operators:
        if op.current is not None:
            _await(c, op.current)
    return _finish(c, load)


def _start_random_change(
    c: SimCluster, op: Operator, operators: list[Operator], rng: random.Random
) -> None:
    """A change that keeps the quorum able to recover: a lost disk's key is removed first;
    otherwise a controller joins (at most five voters) or a voter leaves (at least one), and
    a voter leaves only while the replicas that still have their disks stay a majority."""
    voters = c.checker.voters.latest_committed()
    busy = {o.current.key.node_id for o in operators if o.current is not None}
    lost = [n.key for n in voters if c.nodes[n.node_id].key != n.key]
    intact = len(voters) - len(lost)
    if lost:
        key = lost[0]
        if key.node_id not in busy and intact >= (len(voters) - 1) // 2 + 1:
            op.remove(key)
        return
    joinable = [i for i in sorted(c.controller_ids) if i not in voters.ids and i not in busy]
    removable = [n.key for n in voters if n.node_id not in busy]
    if joinable and (len(voters) < 3 or (len(voters) < 5 and rng.random() < 0.5)):
        op.add(rng.choice(joinable))
    elif removable and len(voters) > 1 and not busy:
        op.remove(rng.choice(removable))


def _lose_disk(c: SimCluster, node_id: int, operators: list[Operator]) -> None:
    """A disk is lost only where the quorum survives it: no other lost disk among the
    voters, at least three voters, and no change in flight about this node."""
    voters = c.checker.voters.latest_committed()
    if any(o.current is not None for o in operators):
        return  # a change in flight may leave the set smaller than the check below assumes
    if any(c.nodes[n.node_id].key != n.key for n in voters):
        return
    if node_id in voters.ids and len(voters) < 3:
        return
    c.crash(node_id)
    c.wipe(node_id)


def _leader_id(c: SimCluster) -> int | None:
    leader = c.leader()
    return leader.node_id if leader is not None else None


MEMBERSHIP_SCENARIOS: dict[str, Callable[[int], SimCluster]] = {
    "grow": grow,
    "stalled_change": stalled_change,
    "shrink": shrink,
    "disk_loss": disk_loss,
    "remove_leader": remove_leader,
    "membership_chaos": membership_chaos,
}

__all__ = ["CONVERGE_BOUND_MS", "MEMBERSHIP_SCENARIOS"]
