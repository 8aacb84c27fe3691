"""Incremental fetch sessions (KIP-227): the session cache's rules as Kafka's FetchSession.scala
has them (epochs, errors 70/71/106, forgotten partitions, eviction by privilege, size and
age), the client's FetchSessionHandler, and the whole path over a real Kafka listener: a
follower's fetcher through KafkaClient to a leader's KafkaApis and ReplicaManager, where an
idle incremental fetch lists, reads and answers nothing and parks until a session partition
gets records."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from broker.api import DivergingEpoch, FetchParams, FetchPartition, FetchPartitionResult, Request
from broker.kafka.apis import KafkaApis
from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.client import KafkaClient
from broker.kafka.codec import build, request_module
from broker.kafka.fetch_api import handle_fetch
from broker.kafka.server import KafkaServer
from broker.kafka.topic_ids import to_wire
from broker.kafka.versions import ApiKey
from broker.replica.fetch_sessions import (
    EVICTION_MS,
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FetchSessionCache,
    FetchSessionHandler,
    FullFetch,
    IncrementalFetch,
    SessionError,
    Sessionless,
    SessionRequest,
    SessionResponse,
    next_epoch,
)
from broker.replica.incremental_fetch import FetchSessions
from broker.replica.manager import ReplicaConfig
from kraft.errors import Errors
from metadata.authorizer.standard import StandardAuthorizer
from tests.unit.replica_harness import (
    LAG_MS,
    TOPIC,
    TOPIC_ID,
    Cluster,
    Node,
    batch,
    broker_epoch,
    settle,
)

T = TypeVar("T")
V16, V12 = 16, 12
NOW = 1_000_000


def cached(partition: int, offset: int = 0, topic_id: str | None = TOPIC_ID) -> CachedPartition:
    return CachedPartition(TOPIC, topic_id, partition, offset, 1 << 20)


def open_session(cache: FetchSessionCache, partitions: int = 2, follower: bool = True,
                 now: int = NOW) -> int:
    wanted = [cached(p) for p in range(partitions)]
    context = cache.new_context(V16, INVALID_SESSION_ID, INITIAL_EPOCH, follower, wanted, [],
                                now)
    assert context == FullFetch(follower, True)
    return cache.maybe_create_session(now, follower, True, wanted)


# -- the cache ------------------------------------------------------------------------------


def test_a_session_moves_through_its_epochs_and_refuses_what_kafka_refuses() -> None:
    cache = FetchSessionCache()
    session_id = open_session(cache)
    assert session_id != INVALID_SESSION_ID and cache.get(session_id).epoch == 1  # type: ignore[union-attr]

    first = cache.new_context(V16, session_id, 1, True, [cached(1, offset=5)], [], NOW)
    assert isinstance(first, IncrementalFetch)
    assert first.expected_epoch == 2 and first.listed == {(TOPIC_ID, 1)}
    assert first.session.partitions[(TOPIC_ID, 1)].fetch_offset == 5

    assert cache.new_context(V16, session_id, 1, True, [], [], NOW) == \
        SessionError(Errors.INVALID_FETCH_SESSION_EPOCH)  # a replayed epoch
    assert cache.new_context(V16, session_id + 1, 2, True, [], [], NOW) == \
        SessionError(Errors.FETCH_SESSION_ID_NOT_FOUND)
    assert cache.new_context(V12, session_id, 2, True, [], [], NOW) == \
        SessionError(Errors.FETCH_SESSION_TOPIC_ID_ERROR)  # ids in the session, names now

    forgetting = cache.new_context(V16, session_id, 2, True, [], [(TOPIC_ID, 0)], NOW)
    assert isinstance(forgetting, IncrementalFetch)
    assert list(forgetting.session.partitions) == [(TOPIC_ID, 1)]

    # Epoch -1 closes it: that fetch is answered without a session.
    assert cache.new_context(V16, session_id, FINAL_EPOCH, True, [], [], NOW) == Sessionless()
    assert cache.get(session_id) is None and cache.total_partitions == 0


def test_forgetting_every_partition_ends_the_session_and_a_full_fetch_replaces_one() -> None:
    cache = FetchSessionCache()
    gone = open_session(cache)
    assert cache.new_context(V16, gone, 1, True, [], [(TOPIC_ID, 0), (TOPIC_ID, 1)], NOW) \
        == Sessionless()
    assert cache.get(gone) is None
    old = open_session(cache)
    assert isinstance(cache.new_context(V16, old, INITIAL_EPOCH, True, [cached(0)], [], NOW),
                      FullFetch)
    assert cache.get(old) is None  # the full fetch naming it closed it
    # Fetch v4-6 have no session fields: never a session.
    assert cache.new_context(6, 0, -1, True, [cached(0)], [], NOW) == Sessionless()
    assert next_epoch(2**31 - 1) == 1 and next_epoch(FINAL_EPOCH) == FINAL_EPOCH


def test_a_followers_new_session_replaces_its_old_one() -> None:
    cache = FetchSessionCache()
    parts = [cached(0), cached(1)]
    # A full fetch whose answer the follower dropped (it re-planned its long poll): its
    # session is one the follower never learns of, and its next full fetch names none.
    lost = cache.maybe_create_session(NOW, True, True, parts, follower=2)
    kept = cache.maybe_create_session(NOW, True, True, [cached(0)], follower=2)
    other = cache.maybe_create_session(NOW, True, True, parts, follower=3)
    assert set(cache.sessions) == {kept, other} and lost not in cache.sessions
    assert cache.total_partitions == 3
    # Consumers are not told apart (Kafka's rule): each full fetch may open one more.
    c1 = cache.maybe_create_session(NOW, False, True, parts)
    c2 = cache.maybe_create_session(NOW, False, True, parts)
    assert {c1, c2} <= set(cache.sessions)


def test_eviction_follows_kafkas_rules_of_privilege_size_and_age() -> None:
    cache = FetchSessionCache(max_entries=2)

    def create(follower: bool, size: int, now: int = NOW) -> int:
        return cache.maybe_create_session(now, follower, True, [cached(p) for p in range(size)])

    small, big = create(False, 1), create(False, 3)
    # Full, and both younger than 120 s: another consumer finds no room ...
    assert create(False, 9) == INVALID_SESSION_ID
    # ... followers' sessions (privileged) evict the consumers', the smallest first.
    f1 = create(True, 1)
    assert set(cache.sessions) == {big, f1} and small not in cache.sessions
    f2 = create(True, 9)
    assert set(cache.sessions) == {f1, f2}
    # Young privileged sessions are evicted by no one.
    assert create(True, 99) == INVALID_SESSION_ID and create(False, 99) == INVALID_SESSION_ID

    # Older than 120 s (and used meanwhile): a consumer still never evicts a follower's
    # session, a follower's evicts a smaller one, not one of the same size (ties keep it).
    later = NOW + EVICTION_MS + 1
    for session_id in (f1, f2):
        cache.touch(cache.sessions[session_id], later)
    assert create(False, 99, later) == INVALID_SESSION_ID
    assert create(True, 1, later) == INVALID_SESSION_ID
    f3 = create(True, 2, later)
    assert set(cache.sessions) == {f2, f3}

    # Unused for more than 120 s: the least recently used goes first, for anyone.
    idle = later + EVICTION_MS + 1
    cache.touch(cache.sessions[f3], idle)
    consumer = create(False, 1, idle)
    assert set(cache.sessions) == {f3, consumer}
    assert cache.evictions == 4 and cache.total_partitions == 3

    no_room = FetchSessionCache(max_entries=0)
    assert no_room.maybe_create_session(NOW, True, True, [cached(0)]) == INVALID_SESSION_ID


def test_an_answer_lists_a_partition_only_with_something_new() -> None:
    c = cached(0)
    fresh = FetchPartitionResult(high_watermark=5, last_stable_offset=5, log_start_offset=0)
    assert c.must_respond(fresh)  # the first answer tells the HW
    assert not c.must_respond(fresh)
    assert c.must_respond(FetchPartitionResult(high_watermark=5, last_stable_offset=5,
                                               log_start_offset=0, records=b"x"))
    assert c.must_respond(FetchPartitionResult(high_watermark=5, last_stable_offset=5,
                                               log_start_offset=2))  # log start moved
    assert c.must_respond(FetchPartitionResult(
        high_watermark=5, last_stable_offset=5, log_start_offset=2,
        diverging_epoch=DivergingEpoch(1, 3)))
    assert c.must_respond(FetchPartitionResult(Errors.NOT_LEADER_OR_FOLLOWER))
    # After an error the partition is answered again even when the numbers are the same.
    assert c.must_respond(FetchPartitionResult(high_watermark=5, last_stable_offset=5,
                                               log_start_offset=2))
    assert not c.must_respond(FetchPartitionResult(high_watermark=5, last_stable_offset=5,
                                                   log_start_offset=2))


# -- the fetching side's handler ------------------------------------------------------------


def fp(partition: int, offset: int = 0) -> FetchPartition:
    return FetchPartition(TOPIC, partition, offset, 1 << 20, topic_id=TOPIC_ID)


def answer(request: SessionRequest, session_id: int, *keys: int, error: int = Errors.NONE
           ) -> SessionResponse:
    listed = keys if keys else [p.partition for p in request.partitions]
    return SessionResponse(error, session_id,
                           {(TOPIC, k): FetchPartitionResult() for k in listed})


def test_the_handler_lists_only_what_changed_and_starts_over_after_any_doubt() -> None:
    handler = FetchSessionHandler()
    a, b, c = fp(0), fp(1), fp(2)
    full = handler.build({(TOPIC, 0): a, (TOPIC, 1): b, (TOPIC, 2): c})
    assert full.full and full.session_id == 0 and len(full.partitions) == 3
    assert handler.handle_response(full, answer(full, 77))
    assert (handler.session_id, handler.epoch) == (77, 1)

    moved = fp(1, offset=9)  # partition 1 advanced, 2 is no longer wanted
    step = handler.build({(TOPIC, 0): a, (TOPIC, 1): moved})
    assert (step.session_id, step.epoch) == (77, 1)
    assert step.partitions == [moved] and step.forgotten == [c]
    assert handler.handle_response(step, answer(step, 77, 1))
    idle = handler.build({(TOPIC, 0): a, (TOPIC, 1): fp(1, offset=9)})  # equal, not the same
    assert idle.partitions == [] and idle.forgotten == [] and idle.epoch == 2
    assert handler.handle_response(idle, answer(idle, 77, 0))

    # An answer naming a partition outside the session: a new session next time.
    odd = handler.build({(TOPIC, 0): a})
    assert not handler.handle_response(odd, answer(odd, 77, 5))
    assert (handler.session_id, handler.epoch) == (77, INITIAL_EPOCH)
    again = handler.build({(TOPIC, 0): a})
    assert again.full and again.session_id == 77 and again.partitions == [a]
    # The broker kept no session: full fetches from then on.
    assert handler.handle_response(again, answer(again, INVALID_SESSION_ID))
    assert handler.build({(TOPIC, 0): a}).full

    for error, restart_id in ((Errors.FETCH_SESSION_ID_NOT_FOUND, 0),
                              (Errors.INVALID_FETCH_SESSION_EPOCH, 5)):
        handler = FetchSessionHandler()
        first = handler.build({(TOPIC, 0): a})
        handler.handle_response(first, answer(first, 5))
        step = handler.build({(TOPIC, 0): a})
        assert not handler.handle_response(step, SessionResponse(error, 0, {}))
        assert (handler.session_id, handler.epoch) == (restart_id, INITIAL_EPOCH)
    handler.handle_error()  # a lost answer: close the session with the next (full) fetch
    assert handler.build({(TOPIC, 0): a}).full


# -- the whole path, over a real Kafka listener ---------------------------------------------


@dataclass
class Wire:
    """Broker 1 leads TOPIC's partitions (replicas 1, 2) and serves Kafka's protocol with
    sessions on 127.0.0.1; broker 2's fetcher reaches it through a real KafkaClient."""

    cluster: Cluster
    sessions: FetchSessions
    client: KafkaClient
    port: int
    reads: list[int]  # partitions the leader's ReplicaManager read, per read
    sent: list[tuple[int, int, int]]  # per fetch: partitions listed, forgotten, answered

    @property
    def leader(self) -> Node:
        return self.cluster.nodes[1]

    @property
    def follower(self) -> Node:
        return self.cluster.nodes[2]

    async def round(self) -> None:
        """One fetcher round of broker 2 against broker 1, every partition ready."""
        fetcher = self.follower.fetcher(1)
        for state in fetcher.partitions.values():
            state.retry_at = 0.0
        fetcher._restart = False  # as Node.pump: no partition added since the last round
        fetcher._wakeup.clear()
        await fetcher._fetch_once(self.client, dict(fetcher.partitions))


def over_the_wire(tmp_path: Path, scenario: Callable[[Wire], Awaitable[None]],
                  partitions: int = 8, slots: int = 1000) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path, brokers=(1, 2), config=ReplicaConfig(
            replica_fetch_wait_max_ms=0, replica_fetch_backoff_ms=1))
        cluster.create_topic(replicas=(1, 2), partitions=partitions)
        cluster.start()
        leader = cluster.nodes[1].manager
        sessions = FetchSessions(leader, FetchSessionCache(slots), clock_ms=cluster.clock)
        server = KafkaServer(KafkaApis(leader, lambda: cluster.metadata.image, "c1",
                                       fetch_sessions=sessions), "127.0.0.1", 0)
        port = await server.start()
        client = KafkaClient("127.0.0.1", port, client_id="broker-2-fetcher")
        await client.connect()
        wire = Wire(cluster, sessions, client, port, [], [])
        read, fetch_session = leader.fetch, client.fetch_session

        async def counting_read(params: FetchParams) -> Any:
            wire.reads.append(len(params.partitions))
            return await read(params)

        async def counting_fetch(params: FetchParams, *args: Any, **kwargs: Any) -> Any:
            response = await fetch_session(params, *args, **kwargs)
            forgotten = args[2] if len(args) > 2 else kwargs.get("forgotten", ())
            wire.sent.append((len(params.partitions), len(forgotten), len(response.results)))
            return response

        leader.fetch = counting_read  # type: ignore[method-assign]
        client.fetch_session = counting_fetch  # type: ignore[method-assign]
        try:
            await scenario(wire)
        finally:
            await client.close()
            await server.close()
            await cluster.close()

    asyncio.run(main())


def test_an_idle_follower_lists_reads_and_is_answered_nothing(tmp_path: Path) -> None:
    async def scenario(w: Wire) -> None:
        await w.round()
        assert w.sent == [(8, 0, 8)] and w.reads == [8]  # full: a session is made
        session = next(iter(w.sessions.cache.sessions.values()))
        assert session.privileged and len(session.partitions) == 8
        await w.leader.produce(batch(2), acks=1, partition=3)

        await w.round()  # first incremental: the leader looks at each partition once
        assert w.sent[-1] == (0, 0, 1) and w.reads[-1] == 8
        assert w.follower.log(3).end_offset == 2
        await w.round()  # the follower's new log end: only partition 3 listed and read,
        assert w.sent[-1] == (1, 0, 1) and w.reads[-1] == 1  # answered with the HW it moved
        assert w.leader.partition(3).high_watermark == 2
        assert w.follower.partition(3).high_watermark == 2
        reads = len(w.reads)
        for _ in range(3):
            await w.round()
            assert w.sent[-1] == (0, 0, 0)  # idle: nothing listed, nothing answered
        assert len(w.reads) == reads  # ... and nothing read
        assert session.epoch == 6
        await w.leader.produce(batch(1), acks=1, partition=6)
        await w.round()  # a write marks its partition: that one is read and answered
        assert w.sent[-1] == (0, 0, 1) and w.reads[-1] == 1
        assert w.follower.log(6).end_offset == 1
        await w.round()
        assert w.sent[-1] == (1, 0, 1)  # its new log end, answered with the HW it moved

        w.follower.manager.fetchers.remove((TOPIC, 5))
        await w.round()
        assert w.sent[-1] == (0, 1, 0) and (TOPIC_ID, 5) not in session.partitions
        reads = len(w.reads)
        await w.leader.produce(batch(1), acks=1, partition=5)
        await w.round()  # forgotten: neither read nor answered
        assert w.sent[-1] == (0, 0, 0) and len(w.reads) == reads

    over_the_wire(tmp_path, scenario)


def test_a_follower_whose_session_the_leader_lost_starts_a_new_one(tmp_path: Path) -> None:
    async def scenario(w: Wire) -> None:
        await w.round()
        (old,) = w.sessions.cache.sessions
        w.sessions.cache.remove(old)  # as a restarted leader has none
        await w.round()
        assert w.sent[-1] == (0, 0, 0)  # FETCH_SESSION_ID_NOT_FOUND
        await w.leader.produce(batch(1), acks=1, partition=0)
        await w.round()
        assert w.sent[-1] == (8, 0, 8)  # full again
        (new,) = w.sessions.cache.sessions
        assert new != old and w.follower.log(0).end_offset == 1

    over_the_wire(tmp_path, scenario)


def test_a_parked_incremental_fetch_wakes_for_a_write_to_any_session_partition(
        tmp_path: Path) -> None:
    async def scenario(w: Wire) -> None:
        wanted = [FetchPartition(TOPIC, p, 0, 1 << 20, current_leader_epoch=0,
                                 log_start_offset=0, topic_id=TOPIC_ID) for p in range(8)]

        def params(partitions: list[FetchPartition], wait_ms: int) -> FetchParams:
            return FetchParams(partitions, max_wait_ms=wait_ms, replica_id=2,
                               replica_epoch=broker_epoch(2))

        full = await w.client.fetch_session(params(wanted, 0), 0, INITIAL_EPOCH)
        assert full.error == Errors.NONE and len(full.results) == 8
        names = {TOPIC_ID: TOPIC}  # the session's topics, which incremental fetches do not list
        first = await w.client.fetch_session(params([], 0), full.session_id, 1, (), names)
        assert first.results == {}
        idle = await w.client.fetch_session(params([], 50), full.session_id, 2, (), names)
        assert idle.error == Errors.NONE and idle.results == {}  # waited out, nothing new

        parked = asyncio.ensure_future(
            w.client.fetch_session(params([], 30_000), full.session_id, 3, (), names))
        await settle()
        assert not parked.done()
        await w.leader.produce(batch(1), acks=1, partition=6)
        woken = await asyncio.wait_for(parked, 5)  # long before the 30 s
        assert list(woken.results) == [(TOPIC, 6)] and woken.results[(TOPIC, 6)].records

    over_the_wire(tmp_path, scenario)


def test_an_idle_follower_stays_caught_up_while_its_partitions_are_not_read(
        tmp_path: Path) -> None:
    async def scenario(w: Wire) -> None:
        await w.round()
        await w.round()  # the first incremental reads everything once
        w.cluster.clock.advance(LAG_MS + 5_000)
        reads = len(w.reads)
        await w.round()  # idle: reads nothing, yet counts as a fetch at the log end
        assert len(w.reads) == reads
        await w.leader.produce(batch(1), acks=1, partition=2)
        w.leader.manager.shrink_isrs()  # before the follower fetches the new record
        await settle()
        assert w.cluster.controller.calls == [], "an idle follower left the ISR"

    over_the_wire(tmp_path, scenario)


def test_a_follower_lists_a_partition_whose_log_start_moved_locally(tmp_path: Path) -> None:
    async def scenario(w: Wire) -> None:
        await w.leader.produce(batch(3), acks=1, partition=4)
        for _ in range(3):
            await w.round()
        assert w.follower.log(4).end_offset == 3 and w.sent[-1] == (0, 0, 0)
        w.follower.log(4).advance_start_offset(2)  # as its own retention would
        await w.round()
        assert w.sent[-1][0] == 1
        assert w.leader.partition(4).followers[2].log_start == 2

    over_the_wire(tmp_path, scenario)


def test_a_follower_that_leaves_closes_its_session(tmp_path: Path) -> None:
    async def scenario(w: Wire) -> None:
        await w.round()
        assert len(w.sessions.cache.sessions) == 1
        fetcher = w.follower.fetcher(1)
        fetcher._client = w.client  # as its own task would have connected
        await fetcher.close()  # the broker shuts down
        assert not w.sessions.cache.sessions

    over_the_wire(tmp_path, scenario)


def test_without_sessions_every_fetch_is_full(tmp_path: Path) -> None:
    async def scenario(w: Wire) -> None:
        for _ in range(3):
            await w.round()
        assert w.sent == [(8, 0, 8)] * 3 and not w.sessions.cache.sessions

    over_the_wire(tmp_path, scenario, slots=0)


def test_a_consumer_session_answers_what_the_high_watermark_lets_it_read(
        tmp_path: Path) -> None:
    async def scenario(w: Wire) -> None:
        names = {TOPIC_ID: TOPIC}
        wanted = [FetchPartition(TOPIC, p, 0, 1 << 20, topic_id=TOPIC_ID) for p in range(8)]

        def params(partitions: list[FetchPartition], wait_ms: int) -> FetchParams:
            return FetchParams(partitions, max_wait_ms=wait_ms)

        consumer = KafkaClient("127.0.0.1", w.port, client_id="consumer")
        await consumer.connect()  # its own connection: answers come in request order
        try:
            full = await consumer.fetch_session(params(wanted, 0), 0, INITIAL_EPOCH)
            session = w.sessions.cache.get(full.session_id)
            assert session is not None and not session.privileged
            await w.leader.produce(batch(1), acks=1, partition=2)
            hidden = await consumer.fetch_session(params([], 0), full.session_id, 1, (), names)
            assert hidden.results == {}  # above the HW: not a consumer's yet

            parked = asyncio.ensure_future(
                consumer.fetch_session(params([], 30_000), full.session_id, 2, (), names))
            await settle()
            assert not parked.done()
            await w.round()
            await w.round()  # the follower has it: the HW moves and wakes the consumer
            woken = await asyncio.wait_for(parked, 5)
            assert list(woken.results) == [(TOPIC, 2)]
            assert woken.results[(TOPIC, 2)].high_watermark == 1
            assert woken.results[(TOPIC, 2)].records
        finally:
            await consumer.close()

    over_the_wire(tmp_path, scenario)


def test_a_replica_fetch_refused_cluster_action_never_touches_a_session(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path, brokers=(1, 2))
        cluster.create_topic(replicas=(1, 2), partitions=2)
        cluster.start()
        leader = cluster.nodes[1].manager
        sessions = FetchSessions(leader, FetchSessionCache())
        image = cluster.metadata.image
        module = request_module(ApiKey.FETCH, V16)
        intruder = RequestAuthorization(StandardAuthorizer(["User:broker"]), Request(
            principal="User:intruder", peer="127.0.0.1:5555"))

        async def fetch(session_id: int, epoch: int, auth: RequestAuthorization = ALLOW_ALL,
                        partitions: int = 2) -> Any:
            request = build(
                module, "FetchRequest", replica_id=-1, max_wait=datetime.timedelta(0),
                replica_state=build(module, "ReplicaState", replica_id=2,
                                    replica_epoch=broker_epoch(2)),
                min_bytes=1, max_bytes=1 << 20, isolation_level=0, session_id=session_id,
                session_epoch=epoch, forgotten_topics_data=(), rack_id="",
                topics=(build(module, "FetchTopic", topic_id=to_wire(TOPIC_ID), partitions=tuple(
                    build(module, "FetchPartition", partition=p, current_leader_epoch=0,
                          fetch_offset=0, last_fetched_epoch=-1, log_start_offset=0,
                          partition_max_bytes=1000) for p in range(partitions))),)
                if partitions else ())
            reply = await handle_fetch(leader, image, "PLAINTEXT", V16, request, auth, sessions)
            return reply.response

        try:
            opened = await fetch(0, INITIAL_EPOCH)
            session_id = int(opened.session_id)
            assert session_id != 0
            # Posing as follower 2: neither replace, close nor advance its session.
            for epoch in (INITIAL_EPOCH, FINAL_EPOCH):
                refused = await fetch(session_id, epoch, intruder)
                assert int(refused.session_id) == 0
                assert {int(p.error_code) for t in refused.responses for p in t.partitions} \
                    == {Errors.TOPIC_AUTHORIZATION_FAILED}
            refused = await fetch(session_id, 1, intruder, partitions=0)
            assert int(refused.error_code) == Errors.FETCH_SESSION_ID_NOT_FOUND
            session = sessions.cache.get(session_id)
            assert session is not None and session.epoch == 1
            assert int((await fetch(session_id, 1, partitions=0)).error_code) == Errors.NONE
        finally:
            await cluster.close()

    asyncio.run(main())
