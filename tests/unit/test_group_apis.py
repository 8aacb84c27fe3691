"""The group APIs on the wire (broker/kafka/coordinator_api.py, group_*_api.py): every
advertised version of FindCoordinator, JoinGroup, SyncGroup, Heartbeat, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups, LeaveGroup and DeleteGroups goes through the whole
codec (kio request encoded, decoded as the server does, handled by a real coordinator on a
fake clock, the response encoded and decoded again), a consumer's life in one group per step."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from broker.api import Request
from broker.group.config import GroupConfig
from broker.group.consumer_protocol.manager import ConsumerGroupManager
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
from broker.kafka.versions import SUPPORTED, ApiKey
from metadata.image import PartitionRegistration
from metadata.records import Endpoint
from tests.unit.group_harness import Clock, FakeLog
from tests.unit.test_kafka_fakes import InMemoryDataPlane, make_image

NAMES = {
    ApiKey.FIND_COORDINATOR: "FindCoordinatorRequest", ApiKey.JOIN_GROUP: "JoinGroupRequest",
    ApiKey.SYNC_GROUP: "SyncGroupRequest", ApiKey.HEARTBEAT: "HeartbeatRequest",
    ApiKey.LEAVE_GROUP: "LeaveGroupRequest", ApiKey.OFFSET_COMMIT: "OffsetCommitRequest",
    ApiKey.OFFSET_FETCH: "OffsetFetchRequest", ApiKey.LIST_GROUPS: "ListGroupsRequest",
    ApiKey.DESCRIBE_GROUPS: "DescribeGroupsRequest", ApiKey.DELETE_GROUPS: "DeleteGroupsRequest",
}
SESSION = datetime.timedelta(milliseconds=10000)


def image(with_offsets_topic: bool = True) -> Any:
    topics: dict[str, dict[int, PartitionRegistration]] = {
        "t": {0: PartitionRegistration((1,), (1,), leader=1)}}
    if with_offsets_topic:
        topics["__consumer_offsets"] = {0: PartitionRegistration((1,), (1,), leader=1)}
    return make_image({1: [Endpoint("PLAINTEXT", "h1", 9091)]}, topics)


class Groups:
    """What the handlers use of GroupStorage: the coordinator, and the topic's creation."""

    def __init__(self) -> None:
        self.clock = Clock()
        self.coordinator = GroupCoordinator(
            GroupConfig(offsets_topic_num_partitions=1, initial_rebalance_delay_ms=0),
            FakeLog(), self.clock)
        self.coordinator.begin_loading(0)
        self.coordinator.finish_loading(0, [])
        self.config = self.coordinator.config
        self.consumer = ConsumerGroupManager(self.coordinator, lambda name: None, list)
        self.txn_offsets = NoTransactions()
        self.topic_requests = 0

    def ensure_topic(self) -> None:
        self.topic_requests += 1


class NoTransactions:
    """GroupStorage.txn_offsets without transactions (OffsetFetch's require_stable asks)."""

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        return set()


class Front:
    def __init__(self, with_offsets_topic: bool = True) -> None:
        self.apis = KafkaApis(InMemoryDataPlane(), lambda: image(with_offsets_topic), "c")
        self.groups = Groups()
        self.apis.groups = self.groups  # type: ignore[assignment]

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        module = request_module(api_key, version)
        frame = encode_request(7, "client-1", build(module, NAMES[ApiKey(api_key)], **fields))
        request = decode_request(frame[4:])
        context = Request(client_id="client-1", listener="PLAINTEXT", peer="10.0.0.9:5555",
                          api_version=version)
        task = asyncio.ensure_future(self.apis.handle(request, context))
        for _ in range(5):
            await asyncio.sleep(0)
        self.groups.coordinator.tick()  # the (zero) initial delay ends
        reply = await task
        correlation_id, response = decode_response(api_key, version,
                                                   encode_response(7, reply.response)[4:])
        assert correlation_id == 7
        return response


def version_of(api_key: int, step: int) -> int:
    low, high = SUPPORTED[api_key]
    return max(low, min(step, high))


@pytest.mark.parametrize("step", range(10))
def test_a_consumers_life_at_every_version(step: int) -> None:
    async def body() -> None:
        front = Front()
        v = {key: version_of(key, step) for key in NAMES}
        # OffsetCommit v0 carries no member (a ZooKeeper-era client is never one): from v1.
        v[ApiKey.OFFSET_COMMIT] = max(1, v[ApiKey.OFFSET_COMMIT])

        found = await front.call(ApiKey.FIND_COORDINATOR, v[ApiKey.FIND_COORDINATOR], key="g",
                                 key_type=0, coordinator_keys=("g",))
        entry = found.coordinators[0] if v[ApiKey.FIND_COORDINATOR] >= 4 else found
        assert (entry.error_code, entry.node_id, entry.host, entry.port) == (0, 1, "h1", 9091)

        jv = v[ApiKey.JOIN_GROUP]
        join_module = request_module(ApiKey.JOIN_GROUP, jv)
        join_fields = dict(group_id="g", session_timeout=SESSION, rebalance_timeout=SESSION,
                           group_instance_id=None, protocol_type="consumer", reason=None,
                           protocols=(build(join_module, "JoinGroupRequestProtocol",
                                            name="range", metadata=b"sub"),))
        joined = await front.call(ApiKey.JOIN_GROUP, jv, member_id="", **join_fields)
        if jv >= 4:
            assert joined.error_code == 79 and joined.member_id.startswith("client-1-")
            joined = await front.call(ApiKey.JOIN_GROUP, jv, member_id=joined.member_id,
                                      **join_fields)
        member = joined.member_id
        assert (joined.error_code, joined.generation_id, joined.leader) == (0, 1, member)
        assert joined.protocol_name == "range"
        assert [(m.member_id, m.metadata) for m in joined.members] == [(member, b"sub")]

        sv = v[ApiKey.SYNC_GROUP]
        synced = await front.call(
            ApiKey.SYNC_GROUP, sv, group_id="g", generation_id=1, member_id=member,
            group_instance_id=None, protocol_type="consumer", protocol_name="range",
            assignments=(build(request_module(ApiKey.SYNC_GROUP, sv),
                               "SyncGroupRequestAssignment", member_id=member,
                               assignment=b"t0"),))
        assert (synced.error_code, synced.assignment) == (0, b"t0")

        beat = await front.call(ApiKey.HEARTBEAT, v[ApiKey.HEARTBEAT], group_id="g",
                                generation_id=1, member_id=member, group_instance_id=None)
        assert beat.error_code == 0

        cv = v[ApiKey.OFFSET_COMMIT]
        commit_module = request_module(ApiKey.OFFSET_COMMIT, cv)
        committed = await front.call(
            ApiKey.OFFSET_COMMIT, cv, group_id="g", generation_id_or_member_epoch=1,
            member_id=member, group_instance_id=None,
            retention_time=datetime.timedelta(milliseconds=-1),
            topics=(build(commit_module, "OffsetCommitRequestTopic", name="t", partitions=(
                build(commit_module, "OffsetCommitRequestPartition", partition_index=0,
                      committed_offset=42, committed_leader_epoch=3, committed_metadata="m",
                      commit_timestamp=-1),
                build(commit_module, "OffsetCommitRequestPartition", partition_index=9,
                      committed_offset=1, committed_leader_epoch=-1, committed_metadata="",
                      commit_timestamp=-1))),))
        assert [(p.partition_index, p.error_code) for p in committed.topics[0].partitions] == \
            [(0, 0), (9, 3)]  # partition 9 does not exist

        fv = v[ApiKey.OFFSET_FETCH]
        fetch_module = request_module(ApiKey.OFFSET_FETCH, fv)
        if fv >= 8:
            fetched = await front.call(ApiKey.OFFSET_FETCH, fv, require_stable=True, groups=(
                build(fetch_module, "OffsetFetchRequestGroup", group_id="g", member_id=None,
                      member_epoch=-1, topics=(build(fetch_module, "OffsetFetchRequestTopics",
                                                     name="t", partition_indexes=(0,)),)),))
            (group,) = fetched.groups
            assert group.error_code == 0
            (partition,) = group.topics[0].partitions
        else:
            fetched = await front.call(
                ApiKey.OFFSET_FETCH, fv, group_id="g", require_stable=False,
                topics=(build(fetch_module, "OffsetFetchRequestTopic", name="t",
                              partition_indexes=(0,)),))
            (partition,) = fetched.topics[0].partitions
        assert (partition.error_code, partition.committed_offset, partition.metadata) == \
            (0, 42, "m")
        if fv >= 5:  # the leader epoch travels from OffsetCommit v6 and OffsetFetch v5
            assert partition.committed_leader_epoch == (3 if cv >= 6 else -1)

        described = await front.call(ApiKey.DESCRIBE_GROUPS, v[ApiKey.DESCRIBE_GROUPS],
                                     groups=("g", "nope"), include_authorized_operations=False)
        g, nope = described.groups
        assert (g.error_code, g.group_state, g.protocol_type, g.protocol_data) == \
            (0, "Stable", "consumer", "range")
        assert [(m.member_id, m.client_id, m.client_host, m.member_assignment)
                for m in g.members] == [(member, "client-1", "/10.0.0.9", b"t0")]
        assert (nope.error_code, nope.group_state) == (0, "Dead")

        listed = await front.call(ApiKey.LIST_GROUPS, v[ApiKey.LIST_GROUPS],
                                  states_filter=(), types_filter=())
        assert [(x.group_id, x.protocol_type) for x in listed.groups] == [("g", "consumer")]

        lv = v[ApiKey.LEAVE_GROUP]
        leave_module = request_module(ApiKey.LEAVE_GROUP, lv)
        members = () if lv < 3 else (build(leave_module, "MemberIdentity", member_id=member,
                                           group_instance_id=None, reason=None),)
        left = await front.call(ApiKey.LEAVE_GROUP, lv, group_id="g", member_id=member,
                                members=members)
        assert left.error_code == 0
        if lv >= 3:
            assert [m.error_code for m in left.members] == [0]

        deleted = await front.call(ApiKey.DELETE_GROUPS, v[ApiKey.DELETE_GROUPS],
                                   groups_names=("g", "nope"))
        assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", 0), ("nope", 69)]
    asyncio.run(body())


def test_find_coordinator_before_the_topic_exists_asks_for_it() -> None:
    async def body() -> None:
        front = Front(with_offsets_topic=False)
        found = await front.call(ApiKey.FIND_COORDINATOR, 4, key_type=0,
                                 coordinator_keys=("a", "b"))
        assert [(c.key, c.error_code, c.node_id) for c in found.coordinators] == \
            [("a", 15, -1), ("b", 15, -1)]
        assert front.groups.topic_requests == 2
        txn = await front.call(ApiKey.FIND_COORDINATOR, 2, key="tx", key_type=1)
        assert txn.error_code == 15  # no transaction coordinator on this front
        share = await front.call(ApiKey.FIND_COORDINATOR, 2, key="s", key_type=2)
        assert share.error_code == 42  # INVALID_REQUEST: share groups are not served
    asyncio.run(body())


def test_leave_group_v0_reports_the_members_error_at_the_top() -> None:
    async def body() -> None:
        front = Front()
        left = await front.call(ApiKey.LEAVE_GROUP, 0, group_id="g", member_id="nobody")
        assert left.error_code == 25
    asyncio.run(body())


def test_offset_fetch_v1_puts_a_group_error_on_every_partition() -> None:
    async def body() -> None:
        front = Front()
        front.groups.coordinator.begin_loading(0)  # loading: COORDINATOR_LOAD_IN_PROGRESS
        module = request_module(ApiKey.OFFSET_FETCH, 1)
        fetched = await front.call(ApiKey.OFFSET_FETCH, 1, group_id="g", topics=(
            build(module, "OffsetFetchRequestTopic", name="t", partition_indexes=(0, 1)),))
        assert [p.error_code for p in fetched.topics[0].partitions] == [14, 14]
    asyncio.run(body())
