"""KIP-848's consumer group protocol through the whole codec: ConsumerGroupHeartbeat and
ConsumerGroupDescribe requests encoded by kio, decoded as the server does, handled by a real
coordinator on a fake clock over an in-memory `__consumer_offsets`, answers encoded and decoded
again. The state machine: joins, the group epoch, the target assignment, partitions revoked
before they move, fencing, leaving, the timers, static members, commits by member epoch, the
classic protocol beside it, and the records replayed after a failover."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import pytest

from broker.api import Request
from broker.group.config import GroupConfig
from broker.group.consumer_protocol.assignors import MemberSubscription, uniform
from broker.group.consumer_protocol.manager import ConsumerGroupManager
from broker.group.consumer_protocol.records import TopicMetadata
from broker.group.coordinator import GroupCoordinator
from broker.kafka.apis import KafkaApis
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.topic_ids import to_wire
from broker.kafka.versions import SUPPORTED, ApiKey
from metadata.image import PartitionRegistration
from metadata.records import Endpoint
from tests.unit.group_harness import Clock, FakeLog
from tests.unit.test_kafka_fakes import InMemoryDataPlane, make_image, topic_id_for

HB, DESCRIBE = ApiKey.CONSUMER_GROUP_HEARTBEAT, ApiKey.CONSUMER_GROUP_DESCRIBE
ORDERS = to_wire(topic_id_for("orders"))
REBALANCE = datetime.timedelta(milliseconds=30000)
IMAGE = make_image({1: [Endpoint("PLAINTEXT", "h1", 9091)]}, {
    "orders": {i: PartitionRegistration((1,), (1,), leader=1) for i in range(6)},
    "audit": {i: PartitionRegistration((1,), (1,), leader=1) for i in range(2)},
    "__consumer_offsets": {0: PartitionRegistration((1,), (1,), leader=1)}})


def lookup(name: str) -> TopicMetadata | None:
    topic = IMAGE.topic(name)
    if topic is None:
        return None
    return TopicMetadata(to_wire(topic.topic_id), name, len(topic.partitions))


class Groups:
    """What the handlers use of GroupStorage, on a fake clock and log."""

    def __init__(self, log: FakeLog | None = None, clock: Clock | None = None,
                 records: list[tuple[bytes, bytes | None]] | None = None) -> None:
        self.clock = clock or Clock()
        self.log = log or FakeLog()
        self.config = GroupConfig(offsets_topic_num_partitions=1, initial_rebalance_delay_ms=0)
        self.coordinator = GroupCoordinator(self.config, self.log, self.clock)
        self.consumer = ConsumerGroupManager(self.coordinator, lookup,
                                             lambda: list(IMAGE.topics.by_name))
        self.coordinator.begin_loading(0)
        self.coordinator.finish_loading(0, records or [])
        self.consumer.start_sessions(self.coordinator.groups.values())

    def ensure_topic(self) -> None:
        pass

    def fire_timers(self) -> None:
        self.coordinator.tick()
        self.consumer.tick()


class Front:
    def __init__(self, groups: Groups | None = None) -> None:
        self.apis = KafkaApis(InMemoryDataPlane(), lambda: IMAGE, "c")
        self.groups = groups or Groups()
        self.apis.groups = self.groups  # type: ignore[assignment]

    async def call(self, api_key: int, version: int, name: str, **fields: Any) -> Any:
        frame = encode_request(7, "client-1", build(request_module(api_key, version), name,
                                                    **fields))
        context = Request(client_id="client-1", listener="PLAINTEXT", peer="10.0.0.9:5555",
                          api_version=version)
        reply = await self.apis.handle(decode_request(frame[4:]), context)
        _, response = decode_response(api_key, version, encode_response(7, reply.response)[4:])
        return response

    async def heartbeat(self, member: str, epoch: int, owned: set[int] | None = None, *,
                        topics: tuple[str, ...] | None = None, version: int = 1,
                        **fields: Any) -> Any:
        module = request_module(HB, version)
        join = epoch == 0
        partitions = None if owned is None else tuple(
            build(module, "TopicPartitions", topic_id=ORDERS, partitions=tuple(sorted(owned)))
            for _ in [0] if owned)
        if join:
            partitions = ()
        return await self.call(
            HB, version, "ConsumerGroupHeartbeatRequest", group_id="g", member_id=member,
            member_epoch=epoch,
            rebalance_timeout=REBALANCE if join else datetime.timedelta(milliseconds=-1),
            subscribed_topic_names=topics if topics is not None else
            (("orders",) if join else None),
            topic_partitions=partitions, **fields)

    async def describe(self, *group_ids: str) -> Any:
        return await self.call(DESCRIBE, 1, "ConsumerGroupDescribeRequest",
                               group_ids=group_ids, include_authorized_operations=False)


def partitions(response: Any) -> set[int] | None:
    if response.assignment is None:
        return None
    return {p for tp in response.assignment.topic_partitions for p in tp.partitions}


def run(body: Any) -> None:
    asyncio.run(body())


def test_advertised_and_classified() -> None:
    from broker.kafka.authorization import API_AUTHORIZATION

    assert SUPPORTED[HB] == (0, 1) and SUPPORTED[DESCRIBE] == (0, 1)
    assert HB in API_AUTHORIZATION and DESCRIBE in API_AUTHORIZATION


def test_a_partition_moves_only_after_its_owner_revoked_it() -> None:
    async def body() -> None:
        front = Front()
        a = await front.heartbeat("a", 0)
        assert (a.error_code, a.member_epoch, partitions(a)) == (0, 1, set(range(6)))
        assert a.heartbeat_interval == datetime.timedelta(milliseconds=5000)
        b = await front.heartbeat("b", 0)  # group epoch 2: a target of three each
        assert (b.error_code, b.member_epoch, partitions(b)) == (0, 2, set())
        a = await front.heartbeat("a", 1, set(range(6)))
        revoked_by_a = set(range(6)) - partitions(a)
        assert a.member_epoch == 1 and len(revoked_by_a) == 3, "a keeps its epoch, revokes 3"
        b = await front.heartbeat("b", 2, set())
        assert partitions(b) is None, "b gets nothing while a still holds them"
        described = (await front.describe("g")).groups[0]
        assert (described.group_state, described.group_epoch,
                described.assignment_epoch) == ("Reconciling", 2, 2)
        a = await front.heartbeat("a", 1, set(range(6)) - revoked_by_a)  # revoked
        assert (a.member_epoch, partitions(a)) == (2, None)
        b = await front.heartbeat("b", 2, set())
        assert (b.member_epoch, partitions(b)) == (2, revoked_by_a)
        await front.heartbeat("b", 2, revoked_by_a)
        described = (await front.describe("g")).groups[0]
        assert described.group_state == "Stable"
        members = {m.member_id: m for m in described.members}
        assert {p for tp in members["b"].assignment.topic_partitions
                for p in tp.partitions} == revoked_by_a
        assert members["b"].assignment.topic_partitions[0].topic_name == "orders"
        assert members["a"].member_type == 1

    run(body)


def test_epochs_fence_and_unknown_members() -> None:
    async def body() -> None:
        front = Front()
        await front.heartbeat("a", 0)
        assert (await front.heartbeat("a", 7, set())).error_code == 110  # FENCED_MEMBER_EPOCH
        assert (await front.heartbeat("x", 1, set())).error_code == 25  # UNKNOWN_MEMBER_ID
        # A lost answer: the previous epoch with owned partitions within the assignment.
        await front.heartbeat("b", 0)
        a = await front.heartbeat("a", 1, set(range(6)))
        assert a.member_epoch == 1
        invalid = await front.call(HB, 1, "ConsumerGroupHeartbeatRequest", group_id="g",
                                   member_id="c", member_epoch=0,
                                   subscribed_topic_names=("orders",), topic_partitions=())
        assert invalid.error_code == 42, "a join without a rebalance timeout"
        assert (await front.heartbeat("c", 0, server_assignor="sticky")).error_code == 112
        missing = await front.call(HB, 1, "ConsumerGroupHeartbeatRequest", group_id="nope",
                                   member_id="a", member_epoch=3, topic_partitions=None)
        assert missing.error_code == 69

    run(body)


def test_leaving_and_the_session_timeout_hand_partitions_over() -> None:
    async def body() -> None:
        groups = Groups()
        front = Front(groups)
        await front.heartbeat("a", 0)
        await front.heartbeat("b", 0)
        a = await front.heartbeat("a", 1, set(range(6)))
        a = await front.heartbeat("a", 1, partitions(a))
        b = await front.heartbeat("b", 2, set())
        assert len(partitions(b) or ()) == 3
        left = await front.heartbeat("b", -1, partitions(b))
        assert (left.error_code, left.member_epoch) == (0, -1)
        a = await front.heartbeat("a", 2, partitions(a))
        assert (a.member_epoch, partitions(a)) == (3, set(range(6)))  # epoch 3: b left
        await front.heartbeat("c", 0)
        groups.clock.now += 45_001  # neither heartbeats again
        groups.fire_timers()
        for _ in range(5):
            await asyncio.sleep(0)
        described = (await front.describe("g")).groups[0]
        assert (described.group_state, described.members) == ("Empty", ())

    run(body)


def test_a_member_that_does_not_revoke_is_fenced_after_its_rebalance_timeout() -> None:
    async def body() -> None:
        groups = Groups()
        front = Front(groups)
        await front.heartbeat("a", 0)
        await front.heartbeat("b", 0)
        await front.heartbeat("a", 1, set(range(6)))  # asked to revoke three
        for _ in range(4):  # b keeps its session; a heartbeats but never revokes
            groups.clock.now += 9_000
            await front.heartbeat("a", 1, set(range(6)))
            await front.heartbeat("b", 2, set())
        groups.fire_timers()
        for _ in range(5):
            await asyncio.sleep(0)
        assert (await front.heartbeat("a", 1, set(range(6)))).error_code == 25
        b = await front.heartbeat("b", 2, set())
        assert partitions(b) == set(range(6))

    run(body)


def test_the_group_survives_a_coordinator_failover() -> None:
    async def body() -> None:
        log = FakeLog()
        front = Front(Groups(log))
        await front.heartbeat("a", 0, instance_id="i-a")
        await front.heartbeat("b", 0, server_assignor="range")
        a = await front.heartbeat("a", 1, set(range(6)))
        await front.heartbeat("a", 1, partitions(a))
        b = await front.heartbeat("b", 2, set())
        before = (await front.describe("g")).groups[0]
        # A new coordinator replays the partition: same epochs, members and partitions.
        again = Front(Groups(records=log.records[0]))
        after = (await again.describe("g")).groups[0]
        assert (after.group_state, after.group_epoch, after.assignment_epoch,
                after.assignor_name) == (before.group_state, 2, 2, "range")
        assert after.members == before.members
        resumed = await again.heartbeat("b", 2, partitions(b))
        assert (resumed.error_code, resumed.member_epoch) == (0, 2)
        assert partitions(await again.heartbeat("a", 2, set(range(3)))) is None

    run(body)


def test_commits_are_checked_by_member_epoch() -> None:
    async def body() -> None:
        front = Front()
        await front.heartbeat("a", 0)

        async def commit(version: int, epoch: int, member: str = "a") -> int:
            module = request_module(ApiKey.OFFSET_COMMIT, version)
            response = await front.call(
                ApiKey.OFFSET_COMMIT, version, "OffsetCommitRequest", group_id="g",
                generation_id_or_member_epoch=epoch, member_id=member,
                topics=(build(module, "OffsetCommitRequestTopic", name="orders", partitions=(
                    build(module, "OffsetCommitRequestPartition", partition_index=0,
                          committed_offset=5, committed_metadata=""),)),))
            return int(response.topics[0].partitions[0].error_code)

        assert await commit(9, 1) == 0
        assert await commit(9, 0) == 113  # STALE_MEMBER_EPOCH
        assert await commit(8, 1) == 35  # UNSUPPORTED_VERSION: members commit with v9+
        assert await commit(9, -1, "") == 25  # an admin commit while it has members
        module = request_module(ApiKey.OFFSET_FETCH, 9)
        fetched = await front.call(ApiKey.OFFSET_FETCH, 9, "OffsetFetchRequest", groups=(
            build(module, "OffsetFetchRequestGroup", group_id="g", member_id="a",
                  member_epoch=0, topics=None),), require_stable=False)
        assert fetched.groups[0].error_code == 113

    run(body)


def test_classic_and_consumer_groups_keep_to_their_protocol() -> None:
    async def body() -> None:
        front = Front()
        await front.heartbeat("a", 0)
        module = request_module(ApiKey.JOIN_GROUP, 9)
        join = await front.call(
            ApiKey.JOIN_GROUP, 9, "JoinGroupRequest", group_id="g", member_id="",
            session_timeout=datetime.timedelta(seconds=10), rebalance_timeout=REBALANCE,
            protocol_type="consumer", reason=None, group_instance_id=None,
            protocols=(build(module, "JoinGroupRequestProtocol", name="range",
                             metadata=b"x"),))
        assert join.error_code == 23  # INCONSISTENT_GROUP_PROTOCOL
        left = await front.heartbeat("a", -1)
        assert left.error_code == 0
        # The Empty consumer group goes classic on a JoinGroup, as Kafka's conversion.
        join = await front.call(
            ApiKey.JOIN_GROUP, 9, "JoinGroupRequest", group_id="g", member_id="",
            session_timeout=datetime.timedelta(seconds=10), rebalance_timeout=REBALANCE,
            protocol_type="consumer", reason=None, group_instance_id=None,
            protocols=(build(module, "JoinGroupRequestProtocol", name="range",
                             metadata=b"x"),))
        assert join.error_code == 79  # MEMBER_ID_REQUIRED: a classic join goes on
        described = (await front.describe("g")).groups[0]
        assert described.error_code == 69 and "not a consumer group" in described.error_message

    run(body)


def test_a_static_member_comes_back_to_its_partitions() -> None:
    async def body() -> None:
        front = Front()
        first = await front.heartbeat("a", 0, instance_id="i-1")
        assert partitions(first) == set(range(6))
        taken = await front.heartbeat("a2", 0, instance_id="i-1")
        assert taken.error_code == 111  # UNRELEASED_INSTANCE_ID: a is still active
        away = await front.heartbeat("a", -2, set(range(6)), instance_id="i-1")
        assert (away.error_code, away.member_epoch) == (0, -2)
        back = await front.heartbeat("a2", 0, instance_id="i-1")
        assert (back.error_code, partitions(back)) == (0, set(range(6)))

    run(body)


def test_uniform_is_balanced_and_sticky() -> None:
    topic = uuid.uuid4()
    topics = {topic: TopicMetadata(topic, "t", 60)}
    members = [MemberSubscription(f"m{i}", None, frozenset({topic})) for i in range(5)]
    first = uniform(members, topics, {})
    assert sorted(len(a[topic]) for a in first.values()) == [12] * 5
    second = uniform([*members, MemberSubscription("m5", None, frozenset({topic}))], topics,
                     first)
    assert sorted(len(a[topic]) for a in second.values()) == [10] * 6
    moved = sum(len(first[m][topic] - second[m][topic]) for m in first)
    assert moved == 10, "only what the new member takes moves"


@pytest.mark.parametrize("version", [0, 1])
def test_a_v0_member_gets_its_id_from_the_coordinator(version: int) -> None:
    async def body() -> None:
        front = Front()
        joined = await front.heartbeat("", 0, version=version)
        if version == 0:
            assert joined.error_code == 0 and joined.member_id
        else:
            assert joined.error_code == 42

    run(body)


def test_listed_as_consumer_groups_and_deleted_with_their_records() -> None:
    async def body() -> None:
        log = FakeLog()
        front = Front(Groups(log))
        await front.heartbeat("a", 0)
        listed = await front.call(ApiKey.LIST_GROUPS, 5, "ListGroupsRequest",
                                  states_filter=(), types_filter=("consumer",))
        assert [(g.group_id, g.protocol_type, g.group_state, g.group_type)
                for g in listed.groups] == [("g", "consumer", "Stable", "consumer")]
        deleted = await front.call(ApiKey.DELETE_GROUPS, 2, "DeleteGroupsRequest",
                                   groups_names=("g",))
        assert deleted.results[0].error_code == 68  # NON_EMPTY_GROUP: it has a member
        await front.heartbeat("a", -1)
        deleted = await front.call(ApiKey.DELETE_GROUPS, 2, "DeleteGroupsRequest",
                                   groups_names=("g",))
        assert deleted.results[0].error_code == 0
        reloaded = Front(Groups(records=log.records[0]))
        assert (await reloaded.describe("g")).groups[0].error_code == 69, \
            "the tombstones removed the group for the next coordinator too"

    run(body)
