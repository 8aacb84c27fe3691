"""The Kafka front's handlers (broker/kafka/*_api.py) through the whole codec: a kio request
is encoded, decoded as the server does, handled against an in-memory data plane, and the
response encoded and decoded again, for the versions each rule depends on."""

from __future__ import annotations

import asyncio
import datetime
import uuid
from typing import Any

import pytest

from broker.api import DivergingEpoch, FetchParams, FetchPartitionResult, Request
from broker.kafka.apis import KafkaApis
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.reply import Reply
from broker.kafka.topic_ids import from_wire, to_wire
from broker.kafka.versions import SUPPORTED, ApiKey
from kraft.errors import Errors
from metadata.image import MetadataImage, PartitionRegistration
from metadata.records import Endpoint
from tests.unit.test_kafka_fakes import (
    InMemoryDataPlane,
    batch_header,
    make_image,
    topic_id_for,
)

CLUSTER = "cluster-x"


def image() -> MetadataImage:
    """Brokers 1-3 on PLAINTEXT (3 fenced), broker 4 on SSL only; topic t: partition 0 led
    by 1, partition 1 leaderless, partition 2 led by 4 (no PLAINTEXT endpoint)."""
    return make_image(
        {
            1: [Endpoint("PLAINTEXT", "h1", 9091), Endpoint("SSL", "h1", 9191)],
            2: [Endpoint("PLAINTEXT", "h2", 9092)],
            3: [Endpoint("PLAINTEXT", "h3", 9093)],
            4: [Endpoint("SSL", "h4", 9194)],
        },
        {
            "t": {
                0: PartitionRegistration((1, 2, 3), (1, 2), leader=1, leader_epoch=7),
                1: PartitionRegistration((3, 2), (3,), leader=-1, leader_epoch=2),
                2: PartitionRegistration((4, 1), (4, 1), leader=4, leader_epoch=1),
            },
            "__consumer_offsets": {0: PartitionRegistration((1,), (1,), leader=1)},
        },
        fenced=(3,),
    )


class Front:
    def __init__(self, plane: InMemoryDataPlane | None = None) -> None:
        self.plane = plane or InMemoryDataPlane()
        self.plane.add("t", 3, leader_epoch=7)
        self.apis = KafkaApis(self.plane, image, CLUSTER)

    def reply(self, api_key: int, version: int, **fields: Any) -> Reply:
        module = request_module(api_key, version)
        name = {
            ApiKey.PRODUCE: "ProduceRequest", ApiKey.FETCH: "FetchRequest",
            ApiKey.LIST_OFFSETS: "ListOffsetsRequest", ApiKey.METADATA: "MetadataRequest",
            ApiKey.API_VERSIONS: "ApiVersionsRequest",
            ApiKey.INIT_PRODUCER_ID: "InitProducerIdRequest",
            ApiKey.OFFSET_FOR_LEADER_EPOCH: "OffsetForLeaderEpochRequest",
        }[ApiKey(api_key)]
        frame = encode_request(5, "test-client", build(module, name, **fields))
        request = decode_request(frame[4:])
        context = Request(client_id=request.client_id, listener="PLAINTEXT", peer="p",
                          api_version=version)
        return asyncio.run(self.apis.handle(request, context))

    def call(self, api_key: int, version: int, **fields: Any) -> Any:
        reply = self.reply(api_key, version, **fields)
        assert reply.response is not None and not reply.close
        frame = encode_response(5, reply.response)
        correlation_id, response = decode_response(api_key, version, frame[4:])
        assert correlation_id == 5
        return response


def metadata(front: Front, version: int, topics: Any = None) -> Any:
    module = request_module(ApiKey.METADATA, version)
    asked = None if topics is None else tuple(
        build(module, "MetadataRequestTopic", name=t, topic_id=None) for t in topics
    )
    return front.call(ApiKey.METADATA, version, topics=asked, allow_auto_topic_creation=False,
                      include_cluster_authorized_operations=False,
                      include_topic_authorized_operations=False)


# ---- ApiVersions ----


@pytest.mark.parametrize("version", range(5))
def test_api_versions_lists_every_served_range(version: int) -> None:
    fields = {"client_software_name": "c", "client_software_version": "1"} if version >= 3 else {}
    response = Front().call(ApiKey.API_VERSIONS, version, **fields)
    assert response.error_code == 0
    assert {k.api_key: (k.min_version, k.max_version) for k in response.api_keys} == dict(SUPPORTED)


def test_api_versions_refuses_a_bad_software_name() -> None:
    response = Front().call(ApiKey.API_VERSIONS, 3, client_software_name="-bad",
                            client_software_version="1")
    assert response.error_code == Errors.INVALID_REQUEST


# ---- Metadata ----


@pytest.mark.parametrize("version", [1, 6, 7, 10, 12])
def test_metadata_brokers_are_the_live_ones_on_the_request_listener(version: int) -> None:
    response = metadata(Front(), version)
    assert [(b.node_id, b.host, b.port) for b in response.brokers] == [
        (1, "h1", 9091), (2, "h2", 9092)
    ]
    assert response.controller_id == 1
    if version >= 2:
        assert response.cluster_id == CLUSTER


def test_metadata_names_the_answering_broker_as_controller_when_it_is_live() -> None:
    # The one broker the client reaches for sure (others may be restarting): admin clients
    # send controller-bound requests to the controller_id.
    front = Front()
    front.apis = KafkaApis(front.plane, image, CLUSTER, broker_id=2)
    assert metadata(front, 12).controller_id == 2
    front.apis = KafkaApis(front.plane, image, CLUSTER, broker_id=7)  # not live: the first
    assert metadata(front, 12).controller_id == 1


def test_metadata_partitions_leaders_epochs_and_offline_replicas() -> None:
    response = metadata(Front(), 12, ["t"])
    (topic,) = response.topics
    assert topic.error_code == 0 and topic.name == "t" and not topic.is_internal
    assert from_wire(topic.topic_id) == topic_id_for("t")
    p0, p1, p2 = sorted(topic.partitions, key=lambda p: p.partition_index)
    assert (p0.error_code, p0.leader_id, p0.leader_epoch) == (0, 1, 7)
    assert (p0.replica_nodes, p0.isr_nodes, p0.offline_replicas) == ((1, 2, 3), (1, 2), (3,))
    assert (p1.error_code, p1.leader_id, p1.leader_epoch) == (Errors.LEADER_NOT_AVAILABLE, -1, 2)
    assert (p2.error_code, p2.leader_id) == (Errors.LISTENER_NOT_FOUND, -1)


def test_metadata_before_v6_says_leader_not_available_for_a_missing_listener() -> None:
    response = metadata(Front(), 5, ["t"])
    p2 = next(p for p in response.topics[0].partitions if p.partition_index == 2)
    assert (p2.error_code, p2.leader_id) == (Errors.LEADER_NOT_AVAILABLE, -1)


def test_metadata_v0_reports_dead_replicas_as_an_error_and_hides_them() -> None:
    response = metadata(Front(), 0, ["t"])
    p0 = next(p for p in response.topics[0].partitions if p.partition_index == 0)
    assert p0.error_code == Errors.REPLICA_NOT_AVAILABLE
    assert p0.replica_nodes == (1, 2) and p0.leader_id == 1


def test_metadata_null_topics_lists_all_and_marks_internal_ones() -> None:
    response = metadata(Front(), 12)
    assert {t.name: t.is_internal for t in response.topics} == {
        "t": False, "__consumer_offsets": True
    }
    assert metadata(Front(), 12, []).topics == ()
    assert len(metadata(Front(), 0, []).topics) == 2  # v0: an empty list meant all


def test_metadata_unknown_topic_is_not_created() -> None:
    (topic,) = metadata(Front(), 12, ["nope"]).topics
    assert topic.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION and topic.partitions == ()


def test_metadata_by_topic_id() -> None:
    module = request_module(ApiKey.METADATA, 12)
    asked = (build(module, "MetadataRequestTopic", name=None, topic_id=to_wire(topic_id_for("t"))),
             build(module, "MetadataRequestTopic", name=None, topic_id=uuid.uuid4()))
    response = Front().call(ApiKey.METADATA, 12, topics=asked, allow_auto_topic_creation=False,
                            include_topic_authorized_operations=False)
    known, unknown = response.topics
    assert known.name == "t" and len(known.partitions) == 3
    assert unknown.error_code == Errors.UNKNOWN_TOPIC_ID


# ---- Produce ----


def produce(front: Front, version: int, acks: int, batches: dict[int, bytes | None],
            topic: str = "t") -> Reply:
    module = request_module(ApiKey.PRODUCE, version)
    partitions = tuple(build(module, "PartitionProduceData", index=i, records=r)
                       for i, r in batches.items())
    return front.reply(
        ApiKey.PRODUCE, version, transactional_id=None, acks=acks,
        timeout=datetime.timedelta(milliseconds=1500),
        topic_data=(build(module, "TopicProduceData", name=topic, partition_data=partitions),),
    )


def produce_errors(front: Front, version: int, acks: int, batches: dict[int, bytes | None],
                   topic: str = "t") -> dict[int, tuple[int, int]]:
    reply = produce(front, version, acks, batches, topic)
    frame = encode_response(1, reply.response)
    _, response = decode_response(ApiKey.PRODUCE, version, frame[4:])
    return {p.index: (p.error_code, p.base_offset)
            for t in response.responses for p in t.partition_responses}


@pytest.mark.parametrize("version", [3, 7, 9, 10])
def test_produce_appends_and_answers_per_partition(version: int) -> None:
    front = Front()
    answer = produce_errors(front, version, -1, {0: batch_header(3), 1: batch_header(1)})
    assert answer == {0: (0, 0), 1: (0, 0)}
    assert produce_errors(front, version, 1, {0: batch_header(2)}) == {0: (0, 3)}
    acks, timeout_ms, _ = front.plane.calls[0][1]
    assert (acks, timeout_ms) == (-1, 1500)


def test_produce_checks_the_batch_before_the_data_plane() -> None:
    front = Front()
    zstd = batch_header(codec=4)
    answer = produce_errors(front, 3, -1, {
        0: zstd,  # zstd before v7
        1: batch_header(magic=1),
        2: batch_header(extra=10),  # a second batch after the first
    })
    assert answer == {0: (Errors.UNSUPPORTED_COMPRESSION_TYPE, -1),
                      1: (Errors.INVALID_RECORD, -1), 2: (Errors.INVALID_RECORD, -1)}
    assert produce_errors(front, 3, -1, {0: batch_header()[:40]})[0][0] == Errors.CORRUPT_MESSAGE
    assert produce_errors(front, 3, -1, {0: None})[0][0] == Errors.INVALID_RECORD
    truncated = batch_header()[:8] + (200).to_bytes(4, "big") + batch_header()[12:]
    assert produce_errors(front, 3, -1, {0: truncated})[0][0] == Errors.CORRUPT_MESSAGE
    assert not front.plane.calls
    assert produce_errors(front, 7, -1, {0: zstd}) == {0: (0, 0)}  # zstd is fine from v7


def test_clients_cannot_produce_to_internal_topics() -> None:
    """Kafka's ReplicaManager: only the broker itself appends to __consumer_offsets."""
    front = Front()
    answer = produce_errors(front, 9, -1, {0: batch_header()}, topic="__consumer_offsets")
    assert answer == {0: (Errors.INVALID_TOPIC_EXCEPTION, -1)}
    assert not front.plane.calls


def test_produce_with_invalid_acks_fails_every_partition() -> None:
    front = Front()
    answer = produce_errors(front, 9, 2, {0: batch_header(), 1: batch_header()})
    assert answer == {0: (Errors.INVALID_REQUIRED_ACKS, -1), 1: (Errors.INVALID_REQUIRED_ACKS, -1)}
    assert not front.plane.calls


def test_produce_acks_zero_answers_nothing_and_closes_on_failure() -> None:
    front = Front()
    assert produce(front, 9, 0, {0: batch_header()}) == Reply(None, close=False)
    assert produce(front, 9, 0, {0: batch_header(codec=4)}) == Reply(None, close=False)
    front.plane.produce_errors[("t", 1)] = Errors.NOT_LEADER_OR_FOLLOWER
    assert produce(front, 9, 0, {1: batch_header()}) == Reply(None, close=True)
    assert produce(front, 3, 0, {1: batch_header(codec=4)}) == Reply(None, close=True)


def test_produce_v10_names_the_current_leader_on_not_leader() -> None:
    front = Front()
    front.plane.produce_errors[("t", 0)] = Errors.NOT_LEADER_OR_FOLLOWER
    reply = produce(front, 10, -1, {0: batch_header()})
    _, response = decode_response(ApiKey.PRODUCE, 10, encode_response(1, reply.response)[4:])
    (partition,) = response.responses[0].partition_responses
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (1, 7)
    assert [(n.node_id, n.host, n.port) for n in response.node_endpoints] == [(1, "h1", 9091)]


# ---- Fetch ----


def fetch(front: Front, version: int, partitions: list[tuple[int, int]], *,
          topic: Any = "t", replica: tuple[int, int] = (-1, -1), session: tuple[int, int] = (0, -1),
          isolation: int = 0) -> Any:
    module = request_module(ApiKey.FETCH, version)
    if version >= 13 and topic == "t":
        topic = to_wire(topic_id_for("t"))
    parts = tuple(build(module, "FetchPartition", partition=i, current_leader_epoch=7,
                        fetch_offset=offset, last_fetched_epoch=6, log_start_offset=0,
                        partition_max_bytes=1000) for i, offset in partitions)
    return front.call(
        ApiKey.FETCH, version, replica_id=replica[0],
        replica_state=build(module, "ReplicaState", replica_id=replica[0],
                            replica_epoch=replica[1]) if version >= 15 else None,
        max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
        isolation_level=isolation, session_id=session[0], session_epoch=session[1],
        topics=(build(module, "FetchTopic", topic=topic, topic_id=topic, partitions=parts),),
        forgotten_topics_data=(), rack_id="",
    )


@pytest.mark.parametrize("version", [4, 11, 12, 13, 16])
def test_fetch_reads_what_was_produced(version: int) -> None:
    front = Front()
    produce(front, 9, -1, {0: batch_header(2)})
    response = fetch(front, version, [(0, 0), (1, 0)])
    if version >= 7:
        assert response.error_code == 0
        assert response.session_id == 0  # never a session: full fetches every time
    p0, p1 = response.responses[0].partitions
    assert (p0.partition_index, p0.error_code, p0.high_watermark) == (0, 0, 2)
    assert len(p0.records) == 61 and p1.records in (b"", None)
    asked = front.plane.calls[-1][1]
    assert isinstance(asked, FetchParams)
    assert asked.partitions[0].topic == "t"
    if version >= 13:
        assert asked.partitions[0].topic_id == topic_id_for("t")
    if version >= 12:
        assert asked.partitions[0].last_fetched_epoch == 6


def test_fetch_by_an_unknown_topic_id_answers_unknown_topic_id() -> None:
    front = Front()
    missing = uuid.uuid4()
    response = fetch(front, 13, [(0, 0)], topic=missing)
    (topic,) = response.responses
    assert topic.topic_id == missing
    assert topic.partitions[0].error_code == Errors.UNKNOWN_TOPIC_ID
    assert not front.plane.calls


def test_fetch_passes_the_follower_identity_by_version() -> None:
    front = Front()
    fetch(front, 12, [(0, 0)], replica=(2, 99))
    fetch(front, 15, [(0, 0)], replica=(3, 42))
    old, new = (c[1] for c in front.plane.calls)
    assert isinstance(old, FetchParams) and isinstance(new, FetchParams)
    assert (old.replica_id, old.replica_epoch) == (2, -1)
    assert (new.replica_id, new.replica_epoch) == (3, 42)


def test_fetch_read_committed_gets_an_empty_aborted_list() -> None:
    front = Front()
    committed = fetch(front, 11, [(0, 0)], isolation=1).responses[0].partitions[0]
    uncommitted = fetch(front, 11, [(0, 0)], isolation=0).responses[0].partitions[0]
    assert committed.aborted_transactions == ()
    assert uncommitted.aborted_transactions is None


def test_fetch_with_a_session_this_broker_never_gave_is_refused() -> None:
    response = fetch(Front(), 12, [(0, 0)], session=(123, 4))
    assert response.error_code == Errors.FETCH_SESSION_ID_NOT_FOUND
    assert fetch(Front(), 12, [(0, 0)], session=(0, 0)).error_code == 0  # kafka-python asks


def test_fetch_encodes_diverging_epoch_and_current_leader_with_endpoints() -> None:
    class Diverged(InMemoryDataPlane):
        async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
            return [FetchPartitionResult(error=Errors.FENCED_LEADER_EPOCH if p.partition else 0,
                                         diverging_epoch=None if p.partition else
                                         DivergingEpoch(5, 40),
                                         current_leader=(2, 9) if p.partition else None)
                    for p in params.partitions]

    response = fetch(Front(Diverged()), 16, [(0, 50), (1, 0)], replica=(2, 1))
    p0, p1 = response.responses[0].partitions
    assert (p0.diverging_epoch.epoch, p0.diverging_epoch.end_offset) == (5, 40)
    assert p1.error_code == Errors.FENCED_LEADER_EPOCH
    assert (p1.current_leader.leader_id, p1.current_leader.leader_epoch) == (2, 9)
    assert [(n.node_id, n.port) for n in response.node_endpoints] == [(2, 9092)]


# ---- ListOffsets, OffsetForLeaderEpoch, InitProducerId ----


def list_offsets(front: Front, version: int, asked: list[tuple[int, int]]) -> list[Any]:
    module = request_module(ApiKey.LIST_OFFSETS, version)
    parts = tuple(build(module, "ListOffsetsPartition", partition_index=i,
                        current_leader_epoch=7, timestamp=ts) for i, ts in asked)
    response = front.call(ApiKey.LIST_OFFSETS, version, replica_id=-1, isolation_level=1,
                          topics=(build(module, "ListOffsetsTopic", name="t", partitions=parts),))
    return list(response.topics[0].partitions)


@pytest.mark.parametrize("version", [1, 4, 7])
def test_list_offsets_earliest_and_latest(version: int) -> None:
    front = Front()
    produce(front, 9, -1, {1: batch_header(4)})
    latest, earliest = list_offsets(front, version, [(1, -1), (0, -2)])
    assert (latest.error_code, latest.offset, earliest.offset) == (0, 4, 0)
    if version >= 4:
        assert latest.leader_epoch == 7
    _, (_, isolation, partitions) = front.plane.calls[-1]
    assert isolation == (1 if version >= 2 else 0)
    if version >= 4:
        assert partitions[0].current_leader_epoch == 7


def test_list_offsets_refuses_timestamps_too_new_and_duplicates() -> None:
    front = Front()
    (max_ts,) = list_offsets(front, 6, [(0, -3)])
    assert max_ts.error_code == Errors.UNSUPPORTED_VERSION
    (max_ts,) = list_offsets(front, 7, [(0, -3)])
    assert max_ts.error_code == 0
    first, second = list_offsets(front, 7, [(0, -1), (0, -2)])
    assert first.error_code == second.error_code == Errors.INVALID_REQUEST


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch(version: int) -> None:
    front = Front()
    produce(front, 9, -1, {0: batch_header(3)})
    module = request_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
    part = build(module, "OffsetForLeaderPartition", partition=0, current_leader_epoch=7,
                 leader_epoch=6)
    response = front.call(
        ApiKey.OFFSET_FOR_LEADER_EPOCH, version, replica_id=2,
        topics=(build(module, "OffsetForLeaderTopic", topic="t", partitions=(part,)),),
    )
    (result,) = response.topics[0].partitions
    assert (result.error_code, result.leader_epoch, result.end_offset) == (0, 7, 3)
    _, (replica_id, partitions) = front.plane.calls[-1]
    assert replica_id == (2 if version >= 3 else -1)
    assert (partitions[0].leader_epoch, partitions[0].current_leader_epoch) == (6, 7)


@pytest.mark.parametrize("version", [0, 4])
def test_init_producer_id(version: int) -> None:
    front = Front()
    response = front.call(ApiKey.INIT_PRODUCER_ID, version, transactional_id=None,
                          transaction_timeout=datetime.timedelta(seconds=60),
                          producer_id=-1, producer_epoch=-1)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (0, 1001, 0)
