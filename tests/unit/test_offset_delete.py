"""OffsetDelete (API 47, KIP-496) on the wire: kio frames encoded and decoded as the listener
does, a real coordinator on a fake clock behind them. Kafka's rules: an Empty group loses any
asked offset (and goes once none is left), a live consumer group only the offsets of topics
no member subscribes to (GROUP_SUBSCRIBED_TO_TOPIC), DELETE on the group and READ on each
topic, unknown partitions refused before the coordinator, and the API advertised."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

from broker.api import Request
from broker.group.errors import GroupError
from broker.group.records import GroupKey, OffsetKey, decode_key
from broker.kafka.apis import KafkaApis
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation, ResourceType
from metadata.authorizer.standard import StandardAuthorizer
from metadata.image import PartitionRegistration
from metadata.records import Endpoint
from tests.unit.test_group_apis import SESSION, Groups
from tests.unit.test_kafka_authorization import ADMIN, ALICE, acl
from tests.unit.test_kafka_fakes import InMemoryDataPlane, make_image

NAMES = {
    ApiKey.OFFSET_DELETE: "OffsetDeleteRequest", ApiKey.OFFSET_COMMIT: "OffsetCommitRequest",
    ApiKey.OFFSET_FETCH: "OffsetFetchRequest", ApiKey.JOIN_GROUP: "JoinGroupRequest",
    ApiKey.SYNC_GROUP: "SyncGroupRequest", ApiKey.DESCRIBE_GROUPS: "DescribeGroupsRequest",
    ApiKey.API_VERSIONS: "ApiVersionsRequest",
}
SUBSCRIBED_TO_TOPIC = 86
UNKNOWN_PARTITION = 3


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocol subscription v0: version, topics, no user data."""
    data = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        data += struct.pack(">h", len(topic)) + topic.encode()
    return data + struct.pack(">i", -1)


class Front:
    def __init__(self, authorizer: StandardAuthorizer | None = None) -> None:
        one = PartitionRegistration((1,), (1,), leader=1)
        image = make_image({1: [Endpoint("PLAINTEXT", "h1", 9091)]},
                           {"t": {0: one, 1: one}, "u": {0: one}, "__consumer_offsets": {0: one}})
        self.apis = KafkaApis(InMemoryDataPlane(), lambda: image, "c", authorizer=authorizer)
        self.groups = Groups()
        self.apis.groups = self.groups  # type: ignore[assignment]

    async def call(self, api_key: int, version: int, principal: str = ADMIN,
                   **fields: Any) -> Any:
        module = request_module(api_key, version)
        frame = encode_request(7, "client-1", build(module, NAMES[ApiKey(api_key)], **fields))
        request = decode_request(frame[4:])
        context = Request(client_id="client-1", listener="PLAINTEXT", peer="10.0.0.9:5555",
                          api_version=version, principal=principal)
        task = asyncio.ensure_future(self.apis.handle(request, context))
        for _ in range(5):
            await asyncio.sleep(0)
        self.groups.coordinator.tick()  # the (zero) initial delay ends
        reply = await task
        _, response = decode_response(api_key, version, encode_response(7, reply.response)[4:])
        return response

    async def commit(self, offsets: dict[tuple[str, int], int], *, generation: int = -1,
                     member: str = "") -> None:
        module = request_module(ApiKey.OFFSET_COMMIT, 8)
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in offsets.items():
            by_topic.setdefault(topic, []).append(build(
                module, "OffsetCommitRequestPartition", partition_index=partition,
                committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""))
        answer = await self.call(
            ApiKey.OFFSET_COMMIT, 8, group_id="g", generation_id_or_member_epoch=generation,
            member_id=member, group_instance_id=None, topics=tuple(
                build(module, "OffsetCommitRequestTopic", name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()))
        assert {p.error_code for t in answer.topics for p in t.partitions} == {0}

    async def committed(self) -> dict[tuple[str, int], int]:
        answer = await self.call(ApiKey.OFFSET_FETCH, 7, group_id="g", topics=None,
                                 require_stable=False)
        return {(t.name, p.partition_index): p.committed_offset
                for t in answer.topics for p in t.partitions}

    async def delete(self, asked: dict[str, tuple[int, ...]], principal: str = ADMIN,
                     group: str = "g") -> tuple[int, dict[tuple[str, int], int]]:
        module = request_module(ApiKey.OFFSET_DELETE, 0)
        answer = await self.call(ApiKey.OFFSET_DELETE, 0, principal, group_id=group, topics=tuple(
            build(module, "OffsetDeleteRequestTopic", name=name, partitions=tuple(
                build(module, "OffsetDeleteRequestPartition", partition_index=p)
                for p in parts)) for name, parts in asked.items()))
        return answer.error_code, {(t.name, p.partition_index): p.error_code
                                   for t in answer.topics for p in t.partitions}

    async def join_and_sync(self, protocol_type: str, metadata: bytes) -> str:
        module = request_module(ApiKey.JOIN_GROUP, 3)
        joined = await self.call(
            ApiKey.JOIN_GROUP, 3, group_id="g", member_id="", session_timeout=SESSION,
            rebalance_timeout=SESSION, protocol_type=protocol_type, protocols=(
                build(module, "JoinGroupRequestProtocol", name="range", metadata=metadata),))
        assert joined.error_code == 0
        sync_module = request_module(ApiKey.SYNC_GROUP, 3)
        synced = await self.call(
            ApiKey.SYNC_GROUP, 3, group_id="g", generation_id=joined.generation_id,
            member_id=joined.member_id, group_instance_id=None, assignments=(
                build(sync_module, "SyncGroupRequestAssignment", member_id=joined.member_id,
                      assignment=b""),))
        assert synced.error_code == 0
        return str(joined.member_id)

    def tombstones(self) -> list[Any]:
        return [decode_key(key) for key, value in self.groups.coordinator.log.records[0]
                if value is None]


def test_an_empty_group_loses_the_asked_offsets_and_goes_with_its_last() -> None:
    async def body() -> None:
        front = Front()
        await front.commit({("t", 0): 5, ("t", 1): 6, ("u", 0): 7})
        error, results = await front.delete({"t": (0, 9), "u": (0,), "nope": (0,)})
        assert error == 0
        assert results == {("t", 0): 0, ("t", 9): UNKNOWN_PARTITION, ("u", 0): 0,
                           ("nope", 0): UNKNOWN_PARTITION}
        assert await front.committed() == {("t", 1): 6}
        assert front.tombstones() == [OffsetKey("g", "t", 0), OffsetKey("g", "u", 0)]
        # A partition without a committed offset is no error, and writes nothing.
        assert await front.delete({"u": (0,)}) == (0, {("u", 0): 0})
        assert len(front.tombstones()) == 2
        # The last offset of an Empty group: the group goes too (Kafka's cleanupGroupMetadata).
        assert await front.delete({"t": (1,)}) == (0, {("t", 1): 0})
        assert front.tombstones()[-2:] == [OffsetKey("g", "t", 1), GroupKey("g")]
        assert "g" not in front.groups.coordinator.groups
        assert await front.delete({"t": (1,)}) == (GroupError.GROUP_ID_NOT_FOUND, {})
        assert await front.delete({"t": (1,)}, group="") == (GroupError.INVALID_GROUP_ID, {})
    asyncio.run(body())


def test_a_live_consumer_group_keeps_the_offsets_of_its_subscribed_topics() -> None:
    async def body() -> None:
        front = Front()
        member = await front.join_and_sync("consumer", subscription("t"))
        await front.commit({("t", 0): 5, ("u", 0): 7}, generation=1, member=member)
        error, results = await front.delete({"t": (0,), "u": (0,)})
        assert (error, results) == (0, {("t", 0): SUBSCRIBED_TO_TOPIC, ("u", 0): 0})
        assert await front.committed() == {("t", 0): 5}
    asyncio.run(body())


def test_a_live_group_of_another_protocol_type_is_not_empty() -> None:
    async def body() -> None:
        front = Front()
        member = await front.join_and_sync("connect", b"worker")
        await front.commit({("u", 0): 7}, generation=1, member=member)
        assert await front.delete({"u": (0,)}) == (GroupError.NON_EMPTY_GROUP, {})
        assert await front.committed() == {("u", 0): 7}
    asyncio.run(body())


def test_delete_on_the_group_and_read_on_each_topic_are_needed() -> None:
    async def body() -> None:
        authorizer = StandardAuthorizer([ADMIN])
        authorizer.load([acl(ResourceType.GROUP, "g", AclOperation.READ),
                         acl(ResourceType.TOPIC, "t", AclOperation.READ)])
        front = Front(authorizer)
        await front.commit({("t", 0): 5, ("u", 0): 7})
        assert await front.delete({"t": (0,)}, ALICE) == (Errors.GROUP_AUTHORIZATION_FAILED, {})
        authorizer.load([acl(ResourceType.GROUP, "g", AclOperation.DELETE),
                         acl(ResourceType.TOPIC, "t", AclOperation.READ)])
        error, results = await front.delete({"t": (0,), "u": (0,)}, ALICE)
        assert (error, results) == (0, {("t", 0): 0,
                                        ("u", 0): Errors.TOPIC_AUTHORIZATION_FAILED})
        assert await front.committed() == {("u", 0): 7}
    asyncio.run(body())


def test_api_versions_advertises_offset_delete_v0() -> None:
    async def body() -> None:
        answer = await Front().call(ApiKey.API_VERSIONS, 3, client_software_name="t",
                                    client_software_version="1")
        assert {(k.api_key, k.min_version, k.max_version) for k in answer.api_keys} >= {
            (47, 0, 0)}
    asyncio.run(body())
