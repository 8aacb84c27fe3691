"""A replica fetcher's round looks only at what moved (broker/replica/fetcher.py): with
thousands of partitions followed and a few written to, each leader append wakes a round, and a
round walking every partition was a third of a busy broker's event loop (issue 28's paced
producer at 3,000 partitions). A sweep every SWEEP_S still catches what nothing marks."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker.kafka.apis import KafkaApis
from broker.kafka.client import KafkaClient
from broker.kafka.server import KafkaServer
from broker.log.partition_log import PartitionLog
from broker.replica import fetcher as fetcher_module
from broker.replica.fetch_sessions import (
    INVALID_SESSION_ID,
    FetchSessionCache,
    FetchSessionHandler,
    SessionResponse,
)
from broker.replica.incremental_fetch import FetchSessions
from broker.replica.manager import ReplicaConfig
from kraft.errors import Errors
from tests.unit.replica_harness import Cluster, batch, run
from tests.unit.test_fetch_sessions import TOPIC, answer, fp

# Under the replica manager's APPLY_CHUNK: applied at once, so no held fetcher's long poll is
# cut (and its session started over) when the apply ends, while the counting runs.
PARTITIONS = 60
LIVE = ReplicaConfig(replica_fetch_wait_max_ms=500, replica_fetch_backoff_ms=10)


async def until(condition: Callable[[], bool], what: str, timeout_s: float = 10) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, f"timed out: {what}"
        await asyncio.sleep(0.01)  # poll interval of a bounded wait


@pytest.fixture
def start_offset_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[int, int]]:
    """Counts the fetcher's reads of each log's start offset (by id of the log), the one
    field a round used to read on every partition it follows (the LogManager's periodic
    checkpoints read them all too: not counted)."""
    reads: dict[int, int] = {}
    original = PartitionLog.start_offset

    def counted(self: PartitionLog) -> int:
        if sys._getframe(1).f_globals.get("__name__") == fetcher_module.__name__:
            reads[id(self)] = reads.get(id(self), 0) + 1
        return original.fget(self)  # type: ignore[attr-defined,no-any-return]

    monkeypatch.setattr(PartitionLog, "start_offset", property(counted))
    yield reads


def test_a_round_after_an_append_looks_at_the_moved_partition_only(
        tmp_path: Path, start_offset_reads: dict[int, int],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Broker 2's fetcher runs by itself against broker 1 serving Kafka's protocol with fetch
    sessions: each acks=all append wakes a round, which must not walk all 60 partitions."""
    # No sweep while it appends (raising=False: the same test runs against a fetcher without).
    monkeypatch.setattr(fetcher_module, "SWEEP_S", 3600.0, raising=False)

    async def main() -> None:
        cluster = Cluster(tmp_path, brokers=(1, 2), config=LIVE)
        cluster.create_topic(replicas=(1, 2), partitions=PARTITIONS)
        leader, follower = cluster.nodes[1], cluster.nodes[2]
        sessions = FetchSessions(leader.manager, FetchSessionCache(10), clock_ms=cluster.clock)
        server = KafkaServer(KafkaApis(leader.manager, lambda: cluster.metadata.image, "c1",
                                       fetch_sessions=sessions), "127.0.0.1", 0)
        port = await server.start()

        async def connect(host: str, port_: int) -> KafkaClient:
            client = KafkaClient("127.0.0.1", port, client_id="broker-2-fetcher")
            await client.connect()
            return client

        follower.manager.fetchers.connect = connect
        cluster.start()
        try:
            fetcher = follower.fetcher(1)
            assert len(fetcher.partitions) == PARTITIONS
            # The full fetch answered (every partition in it) and the session made: the
            # parked fetch is an incremental one.
            await until(lambda: fetcher.session.session_id != INVALID_SESSION_ID
                        and fetcher.session.epoch >= 1
                        and leader.manager.waiters.delayed["Fetch"] == 1,
                        "the session made, the follower's incremental long poll parked")
            rounds = fetcher.fetches
            follower_logs = {id(follower.log(p)) for p in range(PARTITIONS)}
            start_offset_reads.clear()
            for n in range(20):
                result = (await asyncio.wait_for(
                    leader.produce(batch(1), partition=n % 3), 10))[0]
                assert result.error == Errors.NONE
            assert [follower.log(p).end_offset for p in range(3)] == [7, 7, 6]
            assert fetcher.fetches - rounds >= 20  # a round per acks=all append at least
            looked = sum(n for log_id, n in start_offset_reads.items()
                         if log_id in follower_logs)
            # A few per append (its answer, its next request); walking every followed
            # partition read 60 per round, over 1,200 in all.
            assert looked <= 5 * 20, looked
        finally:
            await server.close()
            await cluster.close()

    asyncio.run(main())


def test_a_log_start_moved_by_local_retention_reaches_the_leader_with_a_sweep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing marks a follower's log start moved by its own retention: the sweep reports it
    (the leader's low watermark, which DeleteRecords answers with, takes it in)."""
    monkeypatch.setattr(fetcher_module, "SWEEP_S", 0.05)
    short_polls = ReplicaConfig(replica_fetch_wait_max_ms=100, replica_fetch_backoff_ms=10)

    async def scenario(c: Cluster) -> None:
        leader, follower = c.nodes[1], c.nodes[2]
        for _ in range(4):
            assert (await leader.produce(batch(1), partition=5))[0].error == Errors.NONE
        await until(lambda: follower.log(5).end_offset == 4, "the follower holds the records")
        follower.log(5).advance_start_offset(3)  # as local retention would
        state = leader.manager.partitions[(TOPIC, 5)].followers[2]
        await until(lambda: state.log_start == 3, "the leader learns the new log start")

    run(tmp_path, scenario, live=True, config=short_polls, replicas=(1, 2), partitions=8)


def test_a_sweep_rebuilds_only_the_request_whose_log_start_moved(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sweep looks at every partition followed but rebuilds a request only where something
    may have moved unmarked (rebuilding all 2,000 each second was 8 % of a follower's loop)."""
    rebuilt: list[int] = []
    original = fetcher_module._Fetching.request_for

    def counted(self: fetcher_module._Fetching, tp: tuple[str, int], *args: object) -> object:
        rebuilt.append(tp[1])
        return original(self, tp, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(fetcher_module._Fetching, "request_for", counted)

    async def scenario(c: Cluster) -> None:
        leader, follower = c.nodes[1], c.nodes[2]
        assert (await leader.produce(batch(1), partition=5))[0].error == Errors.NONE
        await until(lambda: follower.log(5).end_offset == 1, "the follower holds the record")
        fetcher = follower.fetcher(1)
        now = asyncio.get_running_loop().time()

        def sweep() -> list[int]:
            """One sweep, with nothing marked since the last round."""
            rebuilt.clear()
            fetcher._marked.clear()
            fetcher._next_sweep = 0.0
            fetcher._refresh(now)
            return sorted(rebuilt)

        sweep()
        assert sweep() == []
        follower.log(5).advance_start_offset(1)  # as local retention would
        assert sweep() == [5]
        assert fetcher._wanted[(TOPIC, 5)].log_start_offset == 1

    run(tmp_path, scenario, live=True, replicas=(1, 2), partitions=8)


def test_the_handler_compares_only_the_keys_it_is_told_may_have_changed() -> None:
    handler = FetchSessionHandler()
    a, b, c = fp(0), fp(1), fp(2)
    wanted = {(TOPIC, 0): a, (TOPIC, 1): b, (TOPIC, 2): c}
    full = handler.build(wanted, maybe_changed=())  # a new session lists all regardless
    assert full.full and full.partitions == [a, b, c]
    assert handler.handle_response(full, answer(full, 9))

    moved = wanted[(TOPIC, 1)] = fp(1, offset=4)
    del wanted[(TOPIC, 2)]
    wanted[(TOPIC, 0)] = fp(0, offset=7)  # changed too, but not named: left for later
    step = handler.build(wanted, maybe_changed=[(TOPIC, 1), (TOPIC, 2)])
    assert step.partitions == [moved] and step.forgotten == [c]
    assert handler.handle_response(step, answer(step, 9, 1))
    later = handler.build(wanted, maybe_changed=[(TOPIC, 0)])
    assert later.partitions == [wanted[(TOPIC, 0)]] and later.forgotten == []
    assert handler.handle_response(later, SessionResponse(Errors.NONE, 9, {}))
    # Equal but not the same object: not listed, and compared by identity from then on.
    wanted[(TOPIC, 1)] = fp(1, offset=4)
    assert handler.build(wanted, maybe_changed=[(TOPIC, 1)]).partitions == []
