"""The batch codec: round trips, and every malformed input is a CorruptRecordError."""

from __future__ import annotations

import contextlib
import struct

import google_crc32c
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log import (
    LEADER_CHANGE,
    CorruptRecordError,
    decode_batches,
    decode_control_record,
    encode_batch,
    encode_control_record,
    is_torn_tail,
    scan_batches,
)
from kraft.log.codec import HEADER_SIZE, scan_prefix


def raw_batch(
    base: int = 0,
    epoch: int = 1,
    count: int = 1,
    payload: bytes = b"\x00\x00\x00\x01x",
    magic: int = 1,
    attrs: int = 0,
) -> bytes:
    """A frame with a valid CRC over whatever fields we give it (to reach later checks)."""
    body = struct.pack(">BBqiiqq", magic, attrs, base, epoch, count, 5, 5) + payload
    return struct.pack(">II", len(body), google_crc32c.value(body)) + body


def test_round_trip() -> None:
    records = [b"", b"a", b"hello" * 100, bytes(range(256))]
    data = encode_batch(7, 3, records, timestamp_ms=1234, control=True)
    [batch] = decode_batches(data)
    assert batch.base_offset == 7
    assert batch.epoch == 3
    assert batch.records == tuple(records)
    assert batch.first_timestamp_ms == batch.max_timestamp_ms == 1234
    assert batch.control is True
    assert batch.size_in_bytes == len(data)
    assert batch.crc == struct.unpack_from(">I", data, 4)[0]
    assert batch.crc == google_crc32c.value(data[8:])
    assert batch.last_offset == 10
    assert batch.next_offset == 11


def test_layout_is_the_documented_one() -> None:
    data = encode_batch(5, 2, [b"ab"], timestamp_ms=-1)
    length, _, magic, attrs, base, epoch, count, first, last = struct.unpack_from(
        ">IIBBqiiqq", data
    )
    assert (length, magic, attrs, base, epoch, count, first, last) == (
        len(data) - 8, 1, 0, 5, 2, 1, -1, -1,
    )
    assert data[HEADER_SIZE:] == b"\x00\x00\x00\x02ab"


def test_several_batches_and_scan_positions() -> None:
    first = encode_batch(0, 1, [b"a", b"b"], 1)
    second = encode_batch(2, 1, [b"c"], 2, control=True)
    third = encode_batch(3, 4, [b"d"] * 5, 3)
    data = first + second + third
    batches = decode_batches(data)
    assert [b.base_offset for b in batches] == [0, 2, 3]
    headers = scan_batches(data, base_position=100)
    assert [(h.base_offset, h.epoch, h.record_count, h.position, h.size, h.control) for h in
            headers] == [
        (0, 1, 2, 100, len(first), False),
        (2, 1, 1, 100 + len(first), len(second), True),
        (3, 4, 5, 100 + len(first) + len(second), len(third), False),
    ]
    assert [h.next_offset for h in headers] == [2, 3, 8]
    assert [h.crc for h in headers] == [b.crc for b in batches]
    assert decode_batches(b"") == [] and scan_batches(b"") == []


def test_accepts_other_buffer_types() -> None:
    data = encode_batch(0, 1, [b"x"], 0)
    assert decode_batches(bytearray(data)) == decode_batches(memoryview(data))
    assert scan_batches(memoryview(data))[0].size == len(data)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"base_offset": -1},
        {"epoch": -1},
        {"epoch": 2**31},
        {"base_offset": 2**63 - 1},
        {"timestamp_ms": 2**63},
    ],
)
def test_encode_rejects_out_of_range(kwargs: dict[str, int]) -> None:
    args = {"base_offset": 0, "epoch": 0, "records": [b"x"], "timestamp_ms": 0, **kwargs}
    with pytest.raises(ValueError):
        encode_batch(**args)  # type: ignore[arg-type]


def test_encode_rejects_empty_batch() -> None:
    with pytest.raises(ValueError):
        encode_batch(0, 0, [], 0)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"\x00" * 10, "shorter than a batch header"),
        (raw_batch()[:-1], "runs past the end"),
        (struct.pack(">II", 3, 0) + b"\x00" * 40, "too small"),
        (raw_batch(magic=2), "unknown magic"),
        (raw_batch()[:-1] + b"y", "CRC32C mismatch"),
        (raw_batch(attrs=0x80), "unknown attribute"),
        (raw_batch(base=-5), "negative base offset"),
        (raw_batch(epoch=-1), "negative"),
        (raw_batch(count=0), "record count 0"),
        (raw_batch(count=3), "record count 3"),
        (raw_batch(count=2**31 - 1), "does not fit"),
        (raw_batch(base=2**63 - 1, count=1), "overflow"),
    ],
)
def test_malformed_frames(data: bytes, reason: str) -> None:
    for decode in (decode_batches, scan_batches):
        with pytest.raises(CorruptRecordError, match=reason) as info:
            decode(data, "seg.log", 64)
        assert info.value.position == 64
        assert info.value.path == "seg.log"
        assert "seg.log at byte 64" in str(info.value)


@pytest.mark.parametrize(
    ("payload", "count", "reason"),
    [
        (b"\x00\x00\x00\x05ab\x00\x00", 1, "record runs past"),
        (b"\x00\x00\x00\x01a\x00\x00\x00", 2, "record length field past"),
        (b"\x00\x00\x00\x01ab", 1, "1 bytes after the last record"),
    ],
)
def test_record_lengths_must_fill_the_frame_exactly(
    payload: bytes, count: int, reason: str
) -> None:
    data = encode_batch(0, 1, [b"ok"], 0) + raw_batch(base=1, count=count, payload=payload)
    with pytest.raises(CorruptRecordError, match=reason) as info:
        decode_batches(data)
    assert info.value.position == len(encode_batch(0, 1, [b"ok"], 0))
    # The header scanner does not split records: the frame and CRC are fine.
    assert len(scan_batches(data)) == 2


def test_scan_prefix_stops_at_the_first_bad_frame() -> None:
    good = encode_batch(0, 1, [b"a"], 0)
    headers, stop, error = scan_prefix(good + good[:-3] + b"zzz")
    assert len(headers) == 1 and stop == len(good)
    assert isinstance(error, CorruptRecordError) and error.position == len(good)
    assert scan_prefix(good) == (scan_batches(good), len(good), None)


def test_is_torn_tail() -> None:
    good = encode_batch(0, 1, [b"a" * 50], 0)
    bad_crc = good[:-1] + b"?"
    assert is_torn_tail(good + good[:20], len(good))  # header cut short
    assert is_torn_tail(good + good[:-1], len(good))  # runs past the end
    assert is_torn_tail(good + bad_crc, len(good))  # bad, but the last frame
    assert is_torn_tail(good + bytes(500), len(good))  # zeros to the end
    assert not is_torn_tail(bad_crc + good, 0)  # bad frame with data after it
    assert not is_torn_tail(good + bytes(100) + b"\x01", len(good))


@given(st.binary(max_size=300))
@settings(max_examples=400, deadline=None)
def test_any_bytes_decode_or_raise_corrupt(data: bytes) -> None:
    for decode in (decode_batches, scan_batches):
        with contextlib.suppress(CorruptRecordError):
            decode(data)
    is_torn_tail(data, 0)


def _valid_stream(draw: st.DrawFn) -> bytes:
    batches = []
    offset = 0
    for _ in range(draw(st.integers(1, 3))):
        records = draw(st.lists(st.binary(max_size=20), min_size=1, max_size=4))
        batches.append(encode_batch(offset, draw(st.integers(0, 3)), records, 0))
        offset += len(records)
    return b"".join(batches)


@st.composite
def mutated_streams(draw: st.DrawFn) -> bytes:
    data = bytearray(_valid_stream(draw))
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["flip", "cut", "insert", "u32"]))
        at = draw(st.integers(0, len(data) - 1))
        if kind == "flip":
            data[at] ^= draw(st.integers(1, 255))
        elif kind == "cut":
            del data[at:]
            if not data:
                break
        elif kind == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=8))
        else:  # plant an extreme u32/i32 (lengths, counts)
            value = draw(st.sampled_from([0, 1, 2**31 - 1, 2**31, 2**32 - 1]))
            data[at : at + 4] = value.to_bytes(4, "big")
    return bytes(data)


@given(mutated_streams())
@settings(max_examples=400, deadline=None)
def test_mutated_streams_decode_or_raise_corrupt(data: bytes) -> None:
    for decode in (decode_batches, scan_batches):
        with contextlib.suppress(CorruptRecordError):
            decode(data)


@given(
    records=st.lists(st.binary(max_size=30), min_size=1, max_size=5),
    where=st.integers(min_value=0),
    mask=st.integers(1, 255),
)
@settings(max_examples=300, deadline=None)
def test_any_flipped_byte_is_detected(records: list[bytes], where: int, mask: int) -> None:
    data = bytearray(encode_batch(3, 2, records, 99))
    data[where % len(data)] ^= mask
    for decode in (decode_batches, scan_batches):
        with pytest.raises(CorruptRecordError):
            decode(bytes(data))


def test_every_single_byte_flip_is_detected() -> None:
    data = encode_batch(10, 4, [b"alpha", b"", b"gamma" * 9], 1)
    for where in range(len(data)):
        for mask in (0x01, 0x80, 0xFF):
            corrupt = bytearray(data)
            corrupt[where] ^= mask
            with pytest.raises(CorruptRecordError):
                scan_batches(bytes(corrupt))


def test_control_record_round_trip() -> None:
    body = {"leaderId": 1, "voters": [1, 2, 3], "grantingVoters": [1, 3]}
    data = encode_control_record(LEADER_CHANGE, body)
    assert data[:2] == b"\x00\x02"
    assert decode_control_record(data) == (LEADER_CHANGE, body)
    batch = encode_batch(0, 1, [data], 0, control=True)
    [decoded] = decode_batches(batch)
    assert decoded.control and decode_control_record(decoded.records[0]) == (2, body)


@pytest.mark.parametrize(
    "data", [b"", b"\x00", b"\x00\x02not json", b"\x00\x02[1]", b"\x00\x02\xff"]
)
def test_bad_control_records(data: bytes) -> None:
    with pytest.raises(CorruptRecordError):
        decode_control_record(data)


def test_control_type_range() -> None:
    with pytest.raises(ValueError):
        encode_control_record(70000, {})
