"""`__consumer_offsets` records in Kafka's formats (broker/group/records.py): the bytes are
written out by hand here, field by field as Kafka's message schemas define them, so a change
to the encoder that drifts from Kafka fails; and the placement hash against Java's values."""

from __future__ import annotations

import struct

import pytest

from broker.group.placement import java_string_hash, partition_for
from broker.group.records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    RecordFormatError,
    decode_group_value,
    decode_key,
    decode_offset_value,
    encode_group_key,
    encode_group_value,
    encode_offset_key,
    encode_offset_value,
)


def s16(text: str | None) -> bytes:
    if text is None:
        return struct.pack(">h", -1)
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def b32(data: bytes) -> bytes:
    return struct.pack(">i", len(data)) + data


def compact(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return bytes([len(data) + 1]) + data


@pytest.mark.parametrize(("group", "hash_", "partition"), [
    ("test", 3556498, 48), ("g1", 3242, 42), ("my-group", -1906497762, 12), ("", 0, 0),
    ("é€😀", None, None),
])
def test_placement_is_javas_string_hash(group: str, hash_: int | None,
                                        partition: int | None) -> None:
    if hash_ is None:  # outside the BMP: UTF-16 surrogates, as Java hashes them
        expected = 0
        for unit in struct.unpack(">4H", group.encode("utf-16-be")):
            expected = (31 * expected + unit) & 0xFFFFFFFF
        hash_ = expected - (1 << 32) if expected >= 1 << 31 else expected
        partition = abs(hash_) % 50
    assert java_string_hash(group) == hash_
    assert partition_for(group, 50) == partition


def test_integer_min_value_hashes_to_partition_zero() -> None:
    # Kafka's Utils.abs(Integer.MIN_VALUE) is 0; "polygenelubricants" hashes to MIN_VALUE.
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0


def test_offset_commit_key_and_value_bytes() -> None:
    key = OffsetKey("grp", "orders", 7)
    assert encode_offset_key(key) == struct.pack(">h", 1) + s16("grp") + s16("orders") + \
        struct.pack(">i", 7)
    value = OffsetValue(42, 3, "meta", 1700000000000)
    assert encode_offset_value(value) == struct.pack(">hqi", 3, 42, 3) + s16("meta") + \
        struct.pack(">q", 1700000000000)
    assert decode_key(encode_offset_key(key)) == key
    assert decode_offset_value(encode_offset_value(value)) == value


def test_an_explicit_expiry_is_written_as_value_v1() -> None:
    value = OffsetValue(5, -1, "", 100, 200)
    data = encode_offset_value(value)
    assert data == struct.pack(">hq", 1, 5) + s16("") + struct.pack(">qq", 100, 200)
    assert decode_offset_value(data) == value


def test_older_and_flexible_offset_values_decode() -> None:
    v0 = struct.pack(">hq", 0, 9) + s16("m") + struct.pack(">q", 77)
    assert decode_offset_value(v0) == OffsetValue(9, -1, "m", 77)
    v4 = struct.pack(">hqi", 4, 9, 2) + compact("m") + struct.pack(">q", 77) + b"\x00"
    assert decode_offset_value(v4) == OffsetValue(9, 2, "m", 77)
    key_v0 = struct.pack(">h", 0) + s16("g") + s16("t") + struct.pack(">i", 1)
    assert decode_key(key_v0) == OffsetKey("g", "t", 1)


def test_group_metadata_value_bytes() -> None:
    member = MemberValue("m-1", "inst", "client", "/10.0.0.1", 300000, 45000, b"sub", b"asg")
    value = GroupValue("consumer", 5, "range", "m-1", 1234, (member,))
    expected = (struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 5) + s16("range")
                + s16("m-1") + struct.pack(">q", 1234) + struct.pack(">i", 1)
                + s16("m-1") + s16("inst") + s16("client") + s16("/10.0.0.1")
                + struct.pack(">ii", 300000, 45000) + b32(b"sub") + b32(b"asg"))
    assert encode_group_value(value) == expected
    assert decode_group_value(expected) == value
    assert encode_group_key(GroupKey("grp")) == struct.pack(">h", 2) + s16("grp")
    assert decode_key(encode_group_key(GroupKey("grp"))) == GroupKey("grp")


def test_an_empty_group_value_has_null_protocol_and_leader() -> None:
    value = GroupValue("consumer", 2, None, None, 99, ())
    data = encode_group_value(value)
    assert data == struct.pack(">h", 3) + s16("consumer") + struct.pack(">i", 2) + \
        s16(None) + s16(None) + struct.pack(">qi", 99, 0)
    assert decode_group_value(data) == value


def test_group_value_v0_has_no_rebalance_timeout_instance_or_timestamp() -> None:
    v0 = (struct.pack(">h", 0) + s16("consumer") + struct.pack(">i", 1) + s16("range")
          + s16("m") + struct.pack(">i", 1) + s16("m") + s16("c") + s16("/h")
          + struct.pack(">i", 10000) + b32(b"s") + b32(b"a"))
    decoded = decode_group_value(v0)
    assert decoded.current_state_timestamp == -1
    assert decoded.members == (MemberValue("m", None, "c", "/h", 10000, 10000, b"s", b"a"),)


def test_kip_848_keys_are_skipped_and_garbage_is_refused() -> None:
    assert decode_key(struct.pack(">h", 3) + s16("g")) is None
    with pytest.raises(RecordFormatError):
        decode_offset_value(struct.pack(">h", 9))
    with pytest.raises(RecordFormatError):
        decode_group_value(struct.pack(">h", 3) + s16("consumer"))  # truncated
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", 1) + struct.pack(">h", 50) + b"short")
