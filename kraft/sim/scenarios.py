"""Scenarios at least as hard as Kafka's RaftEventSimulationTest (spec §6.1), each a function of
a seed. The seed also picks the cluster size, the observers and how lossy the network is."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from kraft.sim.cluster import SimCluster
from kraft.sim.invariants import SimViolation
from kraft.sim.network import NetworkProfile

ELECTION_BOUND_MS = 20_000  # generous: lossy networks and split votes take a few rounds
CONVERGE_BOUND_MS = 30_000


@dataclass(frozen=True)
class ScenarioStats:
    events: int
    virtual_ms: int
    committed: int
    acknowledged: int


def _cluster(
    seed: int, voters: int | None = None, lossy: bool = True, drift: bool = False
) -> SimCluster:
    """The seed picks the size, observers and network; with `drift`, node clocks run at
    rates up to 2 % or 10 % apart (drawn apart, so the other choices stay as they were)."""
    rng = random.Random(seed * 7919 + 17)
    n = voters if voters is not None else rng.choice([3, 3, 5])
    profile = NetworkProfile(
        min_delay_ms=1,
        max_delay_ms=rng.choice([2, 5, 10, 25]),
        drop_rate=rng.choice([0.0, 0.0, 0.01, 0.05]) if lossy else 0.0,
        duplicate_rate=rng.choice([0.0, 0.01, 0.05]) if lossy else 0.0,
    )
    return SimCluster(
        seed, voters=n, observers=rng.randint(0, 2), network=profile,
        clock_drift=random.Random(seed ^ 0xD21F7).choice([0.02, 0.1]) if drift else 0.0,
    )


def _elect(c: SimCluster) -> int:
    c.run_until(lambda: c.leader() is not None, ELECTION_BOUND_MS, "a leader")
    leader = c.leader()
    assert leader is not None
    return leader.node_id


def _write_for(c: SimCluster, duration_ms: int, interval_ms: int = 20) -> None:
    c.write_steadily(interval_ms, c.now + duration_ms)
    c.run_for(duration_ms)


def _converge(c: SimCluster) -> None:
    """Heal everything, restart everyone, and wait until every node holds the whole log."""
    c.network.heal()
    c.heal_refusals()
    for node in c.nodes.values():
        node.store.heal()
    c.start_all()
    _elect(c)
    target = c.committed_offset()

    def appended() -> bool:
        return c.append_to_leader()

    c.run_until(appended, ELECTION_BOUND_MS, "an append at the leader")

    def converged() -> bool:
        leader = c.leader()
        if leader is None or leader.core is None:
            return False
        hw = leader.core.high_watermark
        if hw <= target:
            return False
        return all(
            n.core is not None and n.core.high_watermark == hw and n.log.end_offset >= hw
            for n in c.nodes.values()
        )

    c.run_until(converged, CONVERGE_BOUND_MS, "every node caught up to the leader")
    c.checker.check()
    if c.acknowledged:
        raise AssertionError("acknowledged appends left unverified")


def initial_election(seed: int) -> SimCluster:
    c = _cluster(seed)
    c.start_all()
    _elect(c)
    _write_for(c, 1_000)
    _converge(c)
    return c


def leader_crash(seed: int) -> SimCluster:
    c = _cluster(seed)
    c.start_all()
    old = _elect(c)
    _write_for(c, 500)
    c.crash(old)
    c.run_until(lambda: c.leader() is not None, ELECTION_BOUND_MS, "a new leader after a crash")
    _write_for(c, 500)
    c.start(old)
    _converge(c)
    return c


def leader_graceful(seed: int) -> SimCluster:
    c = _cluster(seed)
    c.start_all()
    old = _elect(c)
    _write_for(c, 500)
    c.shutdown(old)
    c.run_until(
        lambda: (leader := c.leader()) is not None and leader.node_id != old,
        ELECTION_BOUND_MS,
        "a successor after a graceful shutdown",
    )
    _write_for(c, 500)
    _converge(c)
    return c


def all_killed(seed: int) -> SimCluster:
    c = _cluster(seed)
    c.start_all()
    _elect(c)
    _write_for(c, 500)
    for node_id in c.nodes:
        c.crash(node_id)
    rng = random.Random(seed)
    voters = sorted(c.voter_ids)
    for node_id in rng.sample(voters, len(voters) // 2 + 1):
        c.start(node_id)
    _elect(c)
    _write_for(c, 500)
    _converge(c)
    return c


def leader_partitioned(seed: int) -> SimCluster:
    c = _cluster(seed)
    c.start_all()
    old = _elect(c)
    _write_for(c, 500)
    c.network.isolate(old, set(c.nodes))
    c.run_until(
        lambda: (leader := c.leader()) is not None and leader.node_id != old,
        ELECTION_BOUND_MS,
        "a new leader on the majority side",
    )
    _write_for(c, 500)
    _converge(c)
    return c


def split_majority(seed: int) -> SimCluster:
    """5 voters split 2|3: the side of 3 keeps committing; all converge after healing."""
    c = _cluster(seed, voters=5)
    c.start_all()
    _elect(c)
    _write_for(c, 300)
    rng = random.Random(seed)
    voters = sorted(c.voter_ids)
    majority = set(rng.sample(voters, 3))
    minority = set(c.nodes) - majority
    c.network.partition(majority, minority)
    before = c.committed_offset()
    c.run_until(
        lambda: (leader := c.leader()) is not None and leader.node_id in majority,
        ELECTION_BOUND_MS,
        "a leader on the majority side",
    )
    _write_for(c, 1_000)
    c.run_until(lambda: c.committed_offset() > before + 5, ELECTION_BOUND_MS,
                "progress on the majority side")
    _converge(c)
    return c


def back_to_back(seed: int) -> SimCluster:
    c = _cluster(seed, voters=5)
    c.start_all()
    first = _elect(c)
    _write_for(c, 300)
    c.crash(first)
    c.run_until(
        lambda: (leader := c.leader()) is not None and leader.node_id != first,
        ELECTION_BOUND_MS,
        "a second leader",
    )
    second = c.leader()
    assert second is not None
    gone = (first, second.node_id)
    c.crash(second.node_id)
    c.run_until(
        lambda: (leader := c.leader()) is not None and leader.node_id not in gone,
        ELECTION_BOUND_MS,
        "a third leader",
    )
    _write_for(c, 300)
    _converge(c)
    return c


def rejoin_without_disruption(seed: int) -> SimCluster:
    """A follower cut off for many election timeouts rejoins; pre-vote keeps the leader."""
    c = _cluster(seed, lossy=False)
    c.start_all()
    leader, epoch = _settled_leader(c)
    rng = random.Random(seed)
    victim = rng.choice(sorted(c.voter_ids - {leader}))
    c.network.isolate(victim, set(c.nodes))
    _write_for(c, 10_000, interval_ms=100)
    c.network.heal()
    _write_for(c, 3_000, interval_ms=100)
    now_leader = c.leader()
    if (now_leader is None or now_leader.core is None  # a leader's core runs: never None
            or now_leader.node_id != leader or now_leader.core.epoch != epoch):
        raise AssertionError(
            f"leadership changed after node {victim} rejoined: epoch {epoch} leader {leader} -> "
            f"{now_leader.node_id if now_leader else None}"
        )
    _converge(c)
    return c


def chaos(seed: int) -> SimCluster:
    """Random crashes, restarts, partitions and heals under load, with drifting node clocks,
    then heal and converge."""
    c = _cluster(seed, drift=True)
    c.start_all()
    rng = random.Random(seed ^ 0x5EED)
    nodes = sorted(c.nodes)
    c.write_steadily(25, 12_000)
    for _ in range(12):
        c.run_for(rng.randint(200, 1_500))
        fault = rng.random()
        node_id = rng.choice(nodes)
        if fault < 0.3:
            c.crash(node_id)
        elif fault < 0.5:
            c.start(node_id)
        elif fault < 0.65:
            c.network.isolate(node_id, set(nodes))
        elif fault < 0.75:
            side = set(rng.sample(nodes, len(nodes) // 2))
            c.network.partition(side, set(nodes) - side)
        elif fault < 0.9:
            c.network.heal()
        else:
            c.shutdown(node_id)
    _converge(c)
    return c


def store_failure(seed: int) -> SimCluster:
    """Quorum-state writes fail (EIO) while elections run: once on some voters, for good on
    others. A node whose write fails stops, as the real node does, and is restarted later; no
    vote or leadership may leave before the state that records it is durable."""
    c = _cluster(seed, drift=True)
    c.start_all()
    _elect(c)
    rng = random.Random(seed ^ 0x5707E)
    voters = sorted(c.voter_ids)
    c.write_steadily(25, c.now + 10_000)
    for _ in range(10):
        c.run_for(rng.randint(200, 1_200))
        victim = c.nodes[rng.choice(voters)]
        roll = rng.random()
        if roll < 0.35:
            victim.store.fail_next()
        elif roll < 0.5:
            victim.store.fail_always()
        elif roll < 0.75:
            victim.store.heal()
            c.start(victim.node_id)
        elif (leader := c.leader()) is not None:
            c.crash(leader.node_id)  # an election, so that votes are written
    _converge(c)
    return c


def fetch_resets(seed: int) -> SimCluster:
    """Every follower's Fetch stream is reset at once, again and again (a middlebox RST, a
    conntrack flush), while the leader and the network are healthy: with nobody partitioned
    or dead, the epoch must not move."""
    c = _cluster(seed, lossy=False, drift=True)
    c.start_all()
    leader, epoch = _settled_leader(c)
    rng = random.Random(seed ^ 0xF37C)
    c.write_steadily(25, c.now + 8_000)
    for _ in range(16):
        c.run_for(rng.randint(30, 500))
        c.reset_fetch_streams(leader)
    c.run_for(2_000)
    _expect_same_leader(c, leader, epoch, "after transient resets of every Fetch stream")
    _converge(c)
    return c


def refused_connection(seed: int) -> SimCluster:
    """A follower's connections to its live leader are refused for 12 s (a firewall, a bad
    certificate). It may stand for election about once per fetch timeout, never tens of times
    a second, and the leader that the others still reach keeps its epoch."""
    c = _cluster(seed, lossy=False, drift=True)
    c.start_all()
    leader, epoch = _settled_leader(c)
    victim = c.nodes[random.Random(seed).choice(sorted(c.voter_ids - {leader}))]
    c.refuse(victim.node_id, leader)
    before = victim.prospective_entries
    duration = 12_000
    _write_for(c, duration, interval_ms=50)
    rounds = victim.prospective_entries - before
    bound = duration // c.timing.fetch_timeout_ms + 2
    if rounds > bound:
        raise SimViolation(
            f"node {victim.node_id}, refused by its live leader {leader}, stood for election "
            f"{rounds} times in {duration} ms (at most {bound}: one per fetch timeout)",
            c.now, c.event_count,
        )
    _expect_same_leader(c, leader, epoch, f"while node {victim.node_id} was refused")
    _converge(c)
    return c


def _settled_leader(c: SimCluster) -> tuple[int, int]:
    """The leader and epoch after a first election and 300 ms of writes (the first leader may
    have lost a race to a candidate of the next epoch in the meantime)."""
    _elect(c)
    _write_for(c, 300)
    c.run_until(lambda: c.leader() is not None, ELECTION_BOUND_MS, "a settled leader")
    leader = c.leader()
    assert leader is not None and leader.core is not None
    return leader.node_id, leader.core.epoch


def _expect_same_leader(c: SimCluster, leader: int, epoch: int, when: str) -> None:
    now = c.leader()
    if (now is None or now.core is None  # a leader's core runs: never None
            or now.node_id != leader or now.core.epoch != epoch):
        raise SimViolation(
            f"epoch bump {when}: leader {leader} of epoch {epoch} became "
            f"{now.node_id if now else None} of epoch "
            f"{now.core.epoch if now and now.core else None} with nobody partitioned or dead",
            c.now, c.event_count,
        )


SCENARIOS: dict[str, Callable[[int], SimCluster]] = {
    "initial_election": initial_election,
    "leader_crash": leader_crash,
    "leader_graceful": leader_graceful,
    "all_killed": all_killed,
    "leader_partitioned": leader_partitioned,
    "split_majority": split_majority,
    "back_to_back": back_to_back,
    "rejoin_without_disruption": rejoin_without_disruption,
    "chaos": chaos,
    "store_failure": store_failure,
    "fetch_resets": fetch_resets,
    "refused_connection": refused_connection,
}
