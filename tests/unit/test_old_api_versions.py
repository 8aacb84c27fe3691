"""The old versions lag monitors and old clients send (issue 31 item 6): ListOffsets v0,
OffsetCommit v0-1, OffsetFetch v0, served as Kafka 3.9 served them (KIP-896 removed them in
4.0). The requests are encoded and the answers decoded by kafka-python's protocol classes
(generated from Kafka's JSON schemas, not from broker/kafka/legacy's), and a sarama-shaped
ListOffsets v0 is packed by hand, so the schemas are checked against independent encoders;
the broker side is the whole codec, the authorizer and a real coordinator on a fake clock.
ListOffsets v0's segment walk runs on a real partition log (broker/replica/legacy_offsets.py)."""

from __future__ import annotations

import asyncio
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.broker_version_data import BrokerVersionData
from kafka.protocol.consumer import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

from broker.api import LegacyOffsetsPartition, Request
from broker.group.errors import GroupError
from broker.kafka.codec import decode_request, encode_response
from broker.kafka.versions import SUPPORTED, ApiKey
from broker.log.config import LogConfig
from broker.replica.legacy_offsets import legacy_offsets
from broker.replica.partition import Partition
from kraft.errors import Errors
from metadata.authorizer.model import CLUSTER_NAME, AclOperation
from tests.unit.test_kafka_authorization import ADMIN, ALICE, CLUSTER, GROUP, PEER, TOPIC, acl
from tests.unit.test_kafka_fakes import batch_header
from tests.unit.test_kafka_group_authorization import GroupFront, join
from tests.unit.test_partition_log import NOW, open_log, values

A = AclOperation
_LO_PARTITION = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
_OC_TOPIC = OffsetCommitRequest.OffsetCommitRequestTopic
_OC_PARTITION = _OC_TOPIC.OffsetCommitRequestPartition
_OF_TOPIC = OffsetFetchRequest.OffsetFetchRequestTopic


def wire(front: GroupFront, request: Any, version: int, response_class: Any,
         principal: str = ALICE) -> Any:
    """kafka-python's request bytes through the broker, its response class on the answer."""
    request.with_header(correlation_id=7, client_id="old-client")
    frame = bytes(request.encode(version=version, header=True))
    return response_class.decode(raw(front, frame, principal), version=version, header=True)


def raw(front: GroupFront, frame: bytes, principal: str = ALICE) -> bytes:
    """A request frame (no size prefix) in, the response frame (no size prefix) out."""
    decoded = decode_request(frame)
    context = Request(client_id=decoded.client_id, listener="PLAINTEXT", peer=PEER,
                      api_version=decoded.api_version, principal=principal)
    reply = asyncio.run(front.apis.handle(decoded, context))
    return encode_response(decoded.correlation_id, reply.response)[4:]


def produce_to(front: GroupFront, records: int) -> None:
    front.plane.partitions[("orders", 0)].append(batch_header(records))


# ---- ApiVersions: the floors move, the maxima (what clients pick) do not ----


def test_the_old_versions_are_advertised_and_new_clients_still_pick_the_newest() -> None:
    assert SUPPORTED[ApiKey.LIST_OFFSETS] == (0, 7)
    assert SUPPORTED[ApiKey.OFFSET_COMMIT] == (0, 9)
    assert SUPPORTED[ApiKey.OFFSET_FETCH] == (0, 9)
    for key in (ApiKey.FIND_COORDINATOR, ApiKey.JOIN_GROUP, ApiKey.SYNC_GROUP,
                ApiKey.HEARTBEAT, ApiKey.LEAVE_GROUP, ApiKey.METADATA):
        assert SUPPORTED[key][0] == 0
    # kafka-python infers the broker's release from the ranges and then picks, per API, the
    # newest version both know: the same as with the old floors (1, 2, 1).
    ours = BrokerVersionData(api_versions=dict(SUPPORTED))
    before = dict(SUPPORTED)
    before.update({ApiKey.LIST_OFFSETS: (1, 7), ApiKey.OFFSET_COMMIT: (2, 9),
                   ApiKey.OFFSET_FETCH: (1, 9)})
    assert ours.broker_version == BrokerVersionData(api_versions=before).broker_version
    assert ours.api_version(ListOffsetsRequest) == 7
    assert ours.api_version(OffsetCommitRequest) == 9
    assert ours.api_version(OffsetFetchRequest) == 9


# ---- ListOffsets v0 ----


def list_offsets_v0(front: GroupFront, asked: list[tuple[str, int, int, int]],
                    replica_id: int = -1, principal: str = ALICE) -> list[tuple[Any, ...]]:
    topics: dict[str, list[Any]] = {}
    for topic, partition, timestamp, max_num in asked:
        topics.setdefault(topic, []).append(_LO_PARTITION(
            partition_index=partition, timestamp=timestamp, max_num_offsets=max_num))
    response = wire(front, ListOffsetsRequest(replica_id=replica_id, topics=list(topics.items())),
                    0, ListOffsetsResponse, principal)
    return [(t.name, p.partition_index, p.error_code, list(p.old_style_offsets))
            for t in response.topics for p in t.partitions]


def test_list_offsets_v0_answers_old_style_offsets() -> None:
    front = GroupFront(acl(TOPIC, "orders", A.DESCRIBE))
    produce_to(front, 5)
    assert list_offsets_v0(front, [("orders", 0, -1, 1), ("orders", 1, -1, 1)]) == [
        ("orders", 0, 0, [5]), ("orders", 1, 0, [0])]
    assert list_offsets_v0(front, [("orders", 0, -1, 5), ("orders", 0, -2, 5),
                                   ("orders", 0, -1, 0)]) == [
        ("orders", 0, 0, [5, 0]), ("orders", 0, 0, [0]), ("orders", 0, 0, [])]
    # Each partition is asked of the data plane as sent (no duplicate check in v0).
    (call,) = [c for kind, c in front.plane.calls if kind == "legacy_offsets"][-1:]
    assert call == (-1, (LegacyOffsetsPartition("orders", 0, -1, 5),
                         LegacyOffsetsPartition("orders", 0, -2, 5),
                         LegacyOffsetsPartition("orders", 0, -1, 0)))
    assert list_offsets_v0(front, [("orders", 9, -1, 1)]) == [
        ("orders", 9, Errors.UNKNOWN_TOPIC_OR_PARTITION, [])]


def test_list_offsets_v0_is_authorized_as_the_newer_versions() -> None:
    front = GroupFront(acl(TOPIC, "orders", A.DESCRIBE))
    denied = Errors.TOPIC_AUTHORIZATION_FAILED
    assert list_offsets_v0(front, [("orders", 0, -1, 1), ("payments", 0, -1, 1)]) == [
        ("orders", 0, 0, [0]), ("payments", 0, denied, [])]
    # A replica's view (past the high watermark) needs CLUSTER_ACTION.
    assert list_offsets_v0(front, [("orders", 0, -1, 1)], replica_id=2) == [
        ("orders", 0, denied, [])]
    front = GroupFront(acl(CLUSTER, CLUSTER_NAME, A.CLUSTER_ACTION))
    assert list_offsets_v0(front, [("orders", 0, -1, 1)], replica_id=2) == [
        ("orders", 0, 0, [0])]


def test_a_sarama_offset_request_v0_packed_by_hand() -> None:
    """What Burrow's kafka_cluster module sends (sarama's OffsetRequest, version 0, one block
    per partition with OffsetNewest and maxOffsets 1) and how sarama reads the answer."""
    front = GroupFront(acl(TOPIC, "orders", A.DESCRIBE))
    produce_to(front, 3)
    client = b"burrow-lagchecker"
    frame = struct.pack(">hhih", 2, 0, 41, len(client)) + client + struct.pack(
        ">ii", -1, 1) + struct.pack(">h", 6) + b"orders" + struct.pack(
        ">i", 2) + struct.pack(">iqi", 0, -1, 1) + struct.pack(">iqi", 1, -1, 1)
    answer = raw(front, frame)
    correlation_id, topics, name_len = struct.unpack_from(">iih", answer, 0)
    assert (correlation_id, topics, answer[10:10 + name_len]) == (41, 1, b"orders")
    pos = 10 + name_len
    (partitions,) = struct.unpack_from(">i", answer, pos)
    pos += 4
    blocks = []
    for _ in range(partitions):
        partition, error, count = struct.unpack_from(">ihi", answer, pos)
        pos += 10
        offsets = struct.unpack_from(f">{count}q", answer, pos)
        pos += 8 * count
        blocks.append((partition, error, offsets))
    assert pos == len(answer)
    assert blocks == [(0, 0, (3,)), (1, 0, (0,))]


def test_list_offsets_v0_walks_the_segments_as_kafka(tmp_path: Path) -> None:
    batch = values(2)
    log = open_log(tmp_path, LogConfig(segment_bytes=len(batch) * 2))
    for _ in range(5):
        log.append_as_leader(values(2), leader_epoch=0, now_ms=NOW)
    views = log.segment_views()
    assert [v.base_offset for v in views] == [0, 4, 8]
    for view, seconds in zip(views, (100, 200, 300), strict=True):
        os.utime(view.path, (seconds, seconds))
    partition = Partition(log, broker_id=1, high_watermark=8)
    partition.leader = 1

    def ask(timestamp: int, max_num: int, replica_id: int = -1) -> Any:
        request = LegacyOffsetsPartition("orders", 0, timestamp, max_num)
        result = legacy_offsets(partition, replica_id, request, now_ms=400_000)
        return result.error or list(result.offsets)

    # Points: (0, 100 s) (4, 200 s) (8, 300 s) (10 = log end, now). A consumer sees the high
    # watermark (8) instead of anything past it; a replica sees the log end.
    assert ask(-1, 1) == [8]
    assert ask(-1, 1, replica_id=2) == [10]
    assert ask(-1, 10, replica_id=2) == [10, 8, 4, 0]
    assert ask(-1, 10) == [8, 8, 4, 0]
    assert ask(-2, 10) == [0]
    assert ask(250_000, 10) == [4, 0]  # the newest segment last written before 250 s
    assert ask(200_000, 1) == [4]
    assert ask(50_000, 10) == []
    assert ask(-1, -1) == Errors.INVALID_REQUEST
    partition.leader = 2
    assert ask(-1, 1) == Errors.NOT_LEADER_OR_FOLLOWER
    assert ask(-1, 1, replica_id=-2) == [8]  # the debugging id may ask a follower


# ---- OffsetCommit v0-1, OffsetFetch v0 ----


def commit(front: GroupFront, version: int, offset: int, *, generation: int = -1,
           member: str = "", timestamp: int = -1, principal: str = ADMIN) -> dict[str, int]:
    partition = _OC_PARTITION(partition_index=0, committed_offset=offset,
                              commit_timestamp=timestamp, committed_metadata=f"v{version}")
    request = OffsetCommitRequest(group_id="g", generation_id_or_member_epoch=generation,
                                  member_id=member, topics=[
                                      _OC_TOPIC(name="orders", partitions=[partition]),
                                      _OC_TOPIC(name="nope", partitions=[partition])])
    response = wire(front, request, version, OffsetCommitResponse, principal)
    return {t.name: t.partitions[0].error_code for t in response.topics}


def fetch(front: GroupFront, version: int, principal: str = ADMIN) -> list[tuple[Any, ...]]:
    request = OffsetFetchRequest(group_id="g", topics=[
        _OF_TOPIC(name="orders", partition_indexes=[0, 1])])
    response = wire(front, request, version, OffsetFetchResponse, principal)
    return [(p.partition_index, p.error_code, p.committed_offset, p.metadata)
            for t in response.topics for p in t.partitions]


@pytest.mark.parametrize("version", [0, 1])
def test_offset_commit_v0_v1_and_fetch_v0_share_the_coordinators_offsets(version: int) -> None:
    front = GroupFront()
    assert commit(front, version, 17) == {"orders": 0, "nope": Errors.UNKNOWN_TOPIC_OR_PARTITION}
    for fetch_version in (0, 1, 7):
        assert fetch(front, fetch_version) == [(0, 0, 17, f"v{version}"), (1, 0, -1, "")]
    value = front.groups.coordinator.groups["g"].offsets[("orders", 0)]
    assert value.commit_timestamp == front.groups.clock.now


def test_offset_commit_v1_keeps_its_commit_timestamp_and_checks_the_generation() -> None:
    front = GroupFront()
    assert commit(front, 1, 5, timestamp=123_456)["orders"] == 0
    assert front.groups.coordinator.groups["g"].offsets[("orders", 0)].commit_timestamp == \
        123_456
    joined = join(front, ADMIN, join(front, ADMIN).member_id)  # MEMBER_ID_REQUIRED first
    member = joined.member_id
    synced = front.call(ApiKey.SYNC_GROUP, 0, ADMIN, group_id="g",
                        generation_id=joined.generation_id, member_id=member, assignments=())
    assert joined.error_code == synced.error_code == 0
    assert commit(front, 1, 6, generation=joined.generation_id, member=member)["orders"] == 0
    assert commit(front, 1, 7, generation=99, member=member)["orders"] == \
        GroupError.ILLEGAL_GENERATION
    # v0 carries no member: with members in the group it is an outsider's commit.
    assert commit(front, 0, 8)["orders"] == GroupError.UNKNOWN_MEMBER_ID
    assert fetch(front, 0)[0][2] == 6


def test_offset_commit_v0_and_fetch_v0_are_authorized_as_the_newer_versions() -> None:
    front = GroupFront(acl(TOPIC, "orders", A.READ), acl(TOPIC, "orders", A.DESCRIBE))
    denied = Errors.GROUP_AUTHORIZATION_FAILED
    assert commit(front, 0, 3, principal=ALICE) == {"orders": denied, "nope": denied}
    assert fetch(front, 0, principal=ALICE) == [(0, denied, -1, ""), (1, denied, -1, "")]
    front = GroupFront(acl(GROUP, "g", A.READ), acl(GROUP, "g", A.DESCRIBE))
    assert commit(front, 0, 3, principal=ALICE)["orders"] == Errors.TOPIC_AUTHORIZATION_FAILED
    assert fetch(front, 0, principal=ALICE)[0][1] == Errors.TOPIC_AUTHORIZATION_FAILED
