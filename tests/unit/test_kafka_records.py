"""Kafka record batches v2 (broker/records.py): header parsing, the leader's checks of a
client batch (reference/kafka-data-plane.md §1.1), stamping, LogAppendTime, the batch format
SegmentedLog stores, and interoperability with kafka-python's own encoder."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from broker.records import (
    CONTROL_BIT,
    HEADER_SIZE,
    KAFKA_FORMAT,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    AppendError,
    Record,
    build_batch,
    compute_crc,
    decode_records,
    increment_sequence,
    parse_header,
    scan_batches,
    set_log_append_time,
    stamp,
    validate_client_batch,
)
from kraft.errors import Errors
from kraft.log.base import CorruptRecordError

MAX = 1048588
SEGMENT = 1 << 30


def kafka_python_batch(producer_id: int = -1, epoch: int = -1, sequence: int = -1,
                       compression: int = 0) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=compression, is_transactional=False,
        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
        batch_size=1 << 20)
    builder.append(0, timestamp=1_000, key=b"k0", value=b"v0", headers=[("h", b"x")])
    builder.append(1, timestamp=1_007, key=None, value=b"v1" * 100, headers=[])
    builder.append(2, timestamp=1_003, key=b"k2", value=None, headers=[])
    return bytes(builder.build())


def refused(data: bytes, max_bytes: int = MAX, segment: int = SEGMENT) -> int:
    with pytest.raises(AppendError) as info:
        validate_client_batch(data, max_bytes, segment)
    return info.value.code


def with_field(data: bytes, fmt: str, at: int, value: int, fix_crc: bool = True) -> bytes:
    buffer = bytearray(data)
    struct.pack_into(fmt, buffer, at, value)
    if fix_crc and at >= 21:
        struct.pack_into(">I", buffer, 17, compute_crc(buffer))
    return bytes(buffer)


def test_kafka_python_batch_parses_and_validates() -> None:
    data = kafka_python_batch(producer_id=7, epoch=2, sequence=40)
    header = validate_client_batch(data, MAX, SEGMENT)
    assert header.magic == 2 and header.size == len(data)
    assert header.records_count == 3 and header.last_offset_delta == 2
    assert header.base_timestamp == 1_000 and header.max_timestamp == 1_007
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 40)
    assert header.last_sequence == 42
    records = decode_records(data)
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in records] == [
        (0, b"k0", b"v0", 1_000), (1, None, b"v1" * 100, 1_007), (2, b"k2", None, 1_003)]
    assert records[0].headers == (("h", b"x"),)


def test_kafka_python_compressed_batch_validates_with_its_codec() -> None:
    data = kafka_python_batch(compression=1)  # gzip
    header = validate_client_batch(data, MAX, SEGMENT)
    assert header.compression == 1
    with pytest.raises(ValueError):
        decode_records(data)


def test_build_batch_is_read_by_kafka_python() -> None:
    data = build_batch(
        [Record(b"v", b"k", (("h", b"x"),), 5_000), Record(None, None, (), 5_010), b"plain"],
        base_timestamp=5_000, producer_id=3, producer_epoch=1, base_sequence=9)
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    assert [(r.offset, r.key, r.value, r.timestamp) for r in batch] == [
        (0, b"k", b"v", 5_000), (1, None, None, 5_010), (2, None, b"plain", 5_000)]
    header = parse_header(data)
    assert header.max_timestamp == 5_010 and header.base_sequence == 9


def test_crc_mismatch_is_corrupt_message() -> None:
    data = bytearray(build_batch([b"a", b"b"]))
    data[-1] ^= 0xFF
    assert refused(bytes(data)) == Errors.CORRUPT_MESSAGE


def test_short_batch_is_corrupt_message() -> None:
    assert refused(build_batch([b"a"])[:HEADER_SIZE - 1]) == Errors.CORRUPT_MESSAGE
    # A length that runs past what was sent.
    assert refused(build_batch([b"abc"])[:-1]) == Errors.CORRUPT_MESSAGE


def test_two_batches_for_one_partition_are_invalid_record() -> None:
    assert refused(build_batch([b"a"]) + build_batch([b"b"])) == Errors.INVALID_RECORD


def test_old_magic_is_invalid_record() -> None:
    assert refused(with_field(build_batch([b"a"]), ">b", 16, 1)) == Errors.INVALID_RECORD


def test_too_large_is_message_too_large_and_record_batch_too_large() -> None:
    data = build_batch([b"x" * 500])
    assert refused(data, max_bytes=len(data) - 1) == Errors.MESSAGE_TOO_LARGE
    assert validate_client_batch(data, len(data), SEGMENT).size == len(data)
    assert refused(data, segment=len(data) - 1) == Errors.RECORD_BATCH_TOO_LARGE


def test_invalid_record_cases() -> None:
    base = build_batch([b"a", b"b"])
    assert refused(with_field(base, ">q", 0, 5)) == Errors.INVALID_RECORD  # base offset
    assert refused(with_field(base, ">i", 57, 3)) == Errors.INVALID_RECORD  # count vs delta
    assert refused(with_field(base, ">i", 57, 0)) == Errors.INVALID_RECORD
    control = build_batch([b"a"], attributes=CONTROL_BIT | TRANSACTIONAL_BIT)
    assert refused(control) == Errors.INVALID_RECORD
    no_sequence = build_batch([b"a"], producer_id=4, producer_epoch=0, base_sequence=-1)
    assert refused(no_sequence) == Errors.INVALID_RECORD


def test_client_log_append_time_is_invalid_timestamp() -> None:
    assert refused(build_batch([b"a"], attributes=TIMESTAMP_TYPE_BIT)) == (
        Errors.INVALID_TIMESTAMP)


def test_unknown_codec_is_unsupported_compression() -> None:
    assert refused(build_batch([b"a"], attributes=6)) == Errors.UNSUPPORTED_COMPRESSION_TYPE
    # zstd is a known codec: whether the request's version allows it is the caller's call.
    assert validate_client_batch(build_batch([b"a"], attributes=4), MAX, SEGMENT).compression == 4


def test_stamp_leaves_the_crc_valid() -> None:
    data = bytearray(kafka_python_batch())
    crc = parse_header(data).crc
    stamp(data, 1234, 7)
    header = parse_header(data)
    assert (header.base_offset, header.partition_leader_epoch, header.crc) == (1234, 7, crc)
    assert compute_crc(data) == crc
    assert [r.offset for r in decode_records(bytes(data))] == [1234, 1235, 1236]


def test_log_append_time_sets_type_and_max_timestamp_and_recomputes_crc() -> None:
    data = bytearray(build_batch([b"a", b"b"], base_timestamp=10))
    set_log_append_time(data, 99_999)
    header = parse_header(data)
    assert header.log_append_time and header.max_timestamp == 99_999
    assert compute_crc(data) == header.crc
    assert DefaultRecordBatch(bytes(data)).validate_crc()
    assert [r.timestamp_ms for r in decode_records(bytes(data))] == [99_999, 99_999]


def test_sequence_wraps_after_int32_max() -> None:
    assert increment_sequence(2**31 - 1, 1) == 0
    assert increment_sequence(2**31 - 2, 3) == 1
    header = parse_header(build_batch([b"a", b"b"], producer_id=1, producer_epoch=0,
                                      base_sequence=2**31 - 1))
    assert header.last_sequence == 0


def test_format_scans_stamped_batches() -> None:
    first = bytearray(build_batch([b"a", b"b", b"c"]))
    stamp(first, 10, 2)
    second = bytearray(build_batch([b"d"]))
    stamp(second, 13, 3)
    data = bytes(first + second)
    headers = scan_batches(data)
    assert [(h.base_offset, h.epoch, h.record_count, h.position, h.size) for h in headers] == [
        (10, 2, 3, 0, len(first)), (13, 3, 1, len(first), len(second))]
    damaged = bytearray(data)
    damaged[len(first) + 30] ^= 1
    found, stop, error = KAFKA_FORMAT.scan_prefix(bytes(damaged), "seg.log", 100)
    assert len(found) == 1 and stop == len(first)
    assert error is not None and error.position == 100 + len(first) and error.path == "seg.log"
    with pytest.raises(CorruptRecordError, match="CRC32C"):
        scan_batches(bytes(damaged))


def test_torn_tail_test() -> None:
    data = bytearray(build_batch([b"a"]))
    stamp(data, 0, 0)
    assert KAFKA_FORMAT.is_torn_tail(bytes(data[:-3]), 0)  # runs past the end
    assert KAFKA_FORMAT.is_torn_tail(bytes(data) + bytes(100), len(data))  # zeros follow
    bad = bytearray(data)
    bad[-1] ^= 1  # a bad CRC in the middle, a good batch after it: damage, not a torn tail
    assert not KAFKA_FORMAT.is_torn_tail(bytes(data + bad + data), len(data))


def test_unstamped_batches_are_not_valid_on_disk() -> None:
    # A client's epoch -1 never reaches a segment: the format refuses it.
    with pytest.raises(CorruptRecordError):
        scan_batches(build_batch([b"a"]))


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.integers(min_value=0, max_value=200))
def test_garbage_gives_typed_errors_only(garbage: bytes, cut: int) -> None:
    valid = build_batch([b"k" * 20, b"v"], producer_id=1, producer_epoch=0, base_sequence=0)
    for data in (garbage, valid[:cut] + garbage, garbage + valid):
        try:
            validate_client_batch(data, MAX, SEGMENT)
        except AppendError:
            pass
        try:
            decode_records(data)
        except (CorruptRecordError, ValueError):
            pass
        _, stop, error = KAFKA_FORMAT.scan_prefix(data)
        assert (error is None) == (stop == len(data))
        KAFKA_FORMAT.is_torn_tail(data, stop)
