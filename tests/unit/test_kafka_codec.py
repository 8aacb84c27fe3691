"""The Kafka front's codec (broker/kafka/codec.py, scan.py): headers by version, unknown tagged
fields skipped, and a decoder that fails only with FrameError, whatever the bytes (fuzzed:
random bodies after every served header, and mutations of valid frames, SASL's included)."""

from __future__ import annotations

import datetime
import struct
import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.api_versions_api import handle_api_versions, unsupported_version_response
from broker.kafka.codec import (
    FrameError,
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.versions import SUPPORTED, ApiKey
from tests.unit.test_kafka_fakes import batch_header


def valid_frames() -> list[bytes]:
    """One valid request frame (no size prefix) per served API and a spread of versions."""
    frames = []
    for version in (0, 3, 4):
        module = request_module(ApiKey.API_VERSIONS, version)
        frames.append(build(module, "ApiVersionsRequest", client_software_name="a",
                            client_software_version="1"))
    for version in (0, 4, 9, 12):
        module = request_module(ApiKey.METADATA, version)
        frames.append(build(module, "MetadataRequest", allow_auto_topic_creation=True,
                            include_cluster_authorized_operations=False,
                            include_topic_authorized_operations=False,
                            topics=(build(module, "MetadataRequestTopic", name="t",
                                          topic_id=None),)))
    for version in (3, 9, 10):
        module = request_module(ApiKey.PRODUCE, version)
        part = build(module, "PartitionProduceData", index=0, records=batch_header(2))
        frames.append(build(module, "ProduceRequest", transactional_id=None, acks=-1,
                            timeout=datetime.timedelta(seconds=30),
                            topic_data=(build(module, "TopicProduceData", name="t",
                                              partition_data=(part,)),)))
    for version in (4, 12, 13, 16):
        module = request_module(ApiKey.FETCH, version)
        part = build(module, "FetchPartition", partition=0, fetch_offset=5,
                     partition_max_bytes=100, current_leader_epoch=1, last_fetched_epoch=1)
        frames.append(build(
            module, "FetchRequest", replica_id=-1, max_wait=datetime.timedelta(milliseconds=500),
            min_bytes=1, topics=(build(module, "FetchTopic", topic="t",
                                       topic_id=uuid.UUID(int=0x1234), partitions=(part,)),),
            replica_state=build(module, "ReplicaState", replica_id=2, replica_epoch=3)
            if version >= 15 else None,
            forgotten_topics_data=(),
        ))
    for version in (1, 7):
        module = request_module(ApiKey.LIST_OFFSETS, version)
        part = build(module, "ListOffsetsPartition", partition_index=0, timestamp=-1)
        frames.append(build(module, "ListOffsetsRequest", replica_id=-1, isolation_level=0,
                            topics=(build(module, "ListOffsetsTopic", name="t",
                                          partitions=(part,)),)))
    for version in (0, 4):
        module = request_module(ApiKey.INIT_PRODUCER_ID, version)
        frames.append(build(module, "InitProducerIdRequest", transactional_id=None,
                            transaction_timeout=datetime.timedelta(seconds=1)))
    for version in (2, 4):
        module = request_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
        part = build(module, "OffsetForLeaderPartition", partition=0, leader_epoch=1)
        frames.append(build(module, "OffsetForLeaderEpochRequest", replica_id=1,
                            topics=(build(module, "OffsetForLeaderTopic", topic="t",
                                          partitions=(part,)),)))
    # SASL (broker/kafka/sasl): the handshake, and the tokens it carries.
    for version in (0, 1):
        frames.append(build(request_module(ApiKey.SASL_HANDSHAKE, version),
                            "SaslHandshakeRequest", mechanism="SCRAM-SHA-512"))
    for version in (0, 1, 2):
        frames.append(build(request_module(ApiKey.SASL_AUTHENTICATE, version),
                            "SaslAuthenticateRequest", auth_bytes=b"n,,n=user,r=fuzz"))
    return [encode_request(9, "fuzz", body)[4:] for body in frames]


VALID = valid_frames()


def test_every_valid_frame_decodes_to_what_was_encoded() -> None:
    for frame in VALID:
        request = decode_request(frame)
        assert request.correlation_id == 9 and request.client_id == "fuzz"
        assert encode_request(9, "fuzz", request.body)[4:] == frame


def test_api_versions_response_header_is_v0_at_every_version() -> None:
    for version in range(5):
        fields: Any = {"client_software_name": "a", "client_software_version": "1"}
        request = decode_request(encode_request(
            3, None, build(request_module(ApiKey.API_VERSIONS, version), "ApiVersionsRequest",
                           **fields))[4:])
        response = handle_api_versions(version, request.body).response
        frame = encode_response(3, response)
        # Header v0: the correlation id, then the body's error code, no tagged-field byte.
        assert struct.unpack_from(">iih", frame) == (len(frame) - 4, 3, 0)
    frame = encode_response(4, unsupported_version_response())
    assert frame[4:] == struct.pack(">ihihhh", 4, 35, 1, 18, 0, 4)


def _flexible_metadata() -> bytes:
    return VALID[6]  # Metadata v12


def test_an_unknown_tagged_field_in_the_header_is_skipped() -> None:
    frame = _flexible_metadata()
    header_end = 2 + 2 + 4 + 2 + len("fuzz")
    assert frame[header_end] == 0  # no tagged fields
    tagged = bytes([1, 99, 3]) + b"abc"  # one field: tag 99, 3 bytes
    patched = frame[:header_end] + tagged + frame[header_end + 1:]
    assert decode_request(patched).body == decode_request(frame).body


def test_an_unknown_tagged_field_in_a_nested_struct_is_skipped() -> None:
    frame = _flexible_metadata()
    # The body ends: topic name "t", the topic's tag section (0), two booleans, the body's tag
    # section (0). Give the topic struct unknown tags 7 and 9.
    topic_tags = len(frame) - 4
    assert frame[topic_tags] == 0
    patched = frame[:topic_tags] + bytes([2, 7, 1]) + b"x" + bytes([9, 0]) + frame[topic_tags + 1:]
    assert decode_request(patched).body == decode_request(frame).body


def test_a_known_tagged_field_must_fill_its_size() -> None:
    module = request_module(ApiKey.FETCH, 16)
    frame = VALID[next(i for i, f in enumerate(VALID) if f[:4] == b"\x00\x01\x00\x10")]
    request = decode_request(frame)
    assert request.body.replica_state == build(module, "ReplicaState", replica_id=2,
                                               replica_epoch=3)
    # ReplicaState (tag 1) is 12 bytes + its own empty tag section: announce 14 instead.
    at = frame.rindex(bytes([1, 1, 13]))  # the body's tag section: one field, tag 1, 13 bytes
    with pytest.raises(FrameError, match="tagged field 1"):
        decode_request(frame[:at] + bytes([1, 1, 14]) + frame[at + 3:] + b"\0")


def test_a_huge_array_count_is_refused_before_kio_allocates() -> None:
    # kio's native decoder would allocate 2**31 slots and abort the process.
    frame = next(f for f in VALID if f[:4] == b"\x00\x01\x00\x04")  # Fetch v4: int32 counts
    at = frame.index(b"\x00\x00\x00\x01\x00\x01t")  # topics: count 1, then the name "t"
    with pytest.raises(FrameError, match="array"):
        decode_request(frame[:at] + b"\x7f\xff\xff\xff" + frame[at + 4:])


def test_a_response_is_checked_too() -> None:
    frame = encode_response(3, unsupported_version_response())
    assert decode_response(ApiKey.API_VERSIONS, 0, frame[4:])[0] == 3
    with pytest.raises(FrameError):
        decode_response(ApiKey.API_VERSIONS, 0, frame[4:10] + b"\x7f\xff\xff\xff")


SERVED = [(key, version) for key, (low, high) in SUPPORTED.items()
          for version in range(low, high + 1)]


@settings(max_examples=2000, deadline=None)
@given(api=st.sampled_from(SERVED), client_id=st.one_of(st.none(), st.text(max_size=5)),
       flexible_header_tags=st.booleans(), body=st.binary(max_size=200))
def test_fuzz_random_bodies_after_valid_headers(
    api: tuple[int, int], client_id: str | None, flexible_header_tags: bool, body: bytes
) -> None:
    key, version = api
    header = struct.pack(">hhi", key, version, 1)
    if client_id is None:
        header += struct.pack(">h", -1)
    else:
        raw = client_id.encode()
        header += struct.pack(">h", len(raw)) + raw
    if flexible_header_tags:
        header += b"\0"
    try:
        decode_request(header + body)
    except FrameError:
        pass


@settings(max_examples=3000, deadline=None)
@given(frame=st.sampled_from(VALID), data=st.data())
def test_fuzz_mutated_valid_frames(frame: bytes, data: st.DataObject) -> None:
    mutated = bytearray(frame)
    for _ in range(data.draw(st.integers(1, 6))):
        kind = data.draw(st.sampled_from(["flip", "insert", "delete", "truncate", "max"]))
        at = data.draw(st.integers(4, max(4, len(mutated) - 1)))  # keep key and version
        if kind == "flip" and at < len(mutated):
            mutated[at] = data.draw(st.integers(0, 255))
        elif kind == "insert":
            mutated[at:at] = data.draw(st.binary(min_size=1, max_size=8))
        elif kind == "delete":
            del mutated[at:at + data.draw(st.integers(1, 8))]
        elif kind == "truncate":
            del mutated[at:]
        elif kind == "max" and at + 4 <= len(mutated):
            mutated[at:at + 4] = data.draw(st.sampled_from(
                [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\x0f"]
            ))
    try:
        decode_request(bytes(mutated))
    except FrameError:
        pass
