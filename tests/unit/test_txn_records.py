"""`__transaction_state` records in Kafka's formats (broker/txn/records.py): the bytes written
out by hand here, field by field as TransactionLogKey v0 and TransactionLogValue v0/v1 define
them, so an encoder drifting from Kafka fails; the replay (last record wins, tombstones
remove); and the placement by Java's String.hashCode."""

from __future__ import annotations

import struct

import pytest

from broker.group.placement import java_string_hash, partition_for
from broker.txn.model import replay
from broker.txn.records import (
    RecordFormatError,
    TxnLogValue,
    TxnState,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)

ONGOING = TxnLogValue(4000, 3, 60000, TxnState.ONGOING, (("a", (0, 2)), ("b", (1,))),
                      1_700_000_000_123, 1_700_000_000_000)


def s16(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_key_v0() -> None:
    assert encode_key("tx-é") == struct.pack(">h", 0) + s16("tx-é")
    assert decode_key(encode_key("tx-é")) == "tx-é"
    with pytest.raises(RecordFormatError):
        decode_key(struct.pack(">h", 1) + s16("x"))


def test_value_v0_field_by_field() -> None:
    expected = (struct.pack(">hqhib", 0, 4000, 3, 60000, 1) + struct.pack(">i", 2)
                + s16("a") + struct.pack(">iii", 2, 0, 2) + s16("b") + struct.pack(">ii", 1, 1)
                + struct.pack(">qq", 1_700_000_000_123, 1_700_000_000_000))
    assert encode_value(ONGOING) == expected
    assert decode_value(expected) == ONGOING


def test_empty_writes_null_partitions() -> None:
    empty = TxnLogValue(4000, 0, 60000, TxnState.EMPTY, (), 5, -1)
    data = encode_value(empty)
    assert data == struct.pack(">hqhibiqq", 0, 4000, 0, 60000, 0, -1, 5, -1)
    assert decode_value(data) == empty


def test_value_v1_flexible_with_tagged_fields() -> None:
    value = TxnLogValue(4000, 3, 60000, TxnState.PREPARE_COMMIT, (("a", (7,)),), 9, 8,
                        previous_producer_id=3999, next_producer_id=-1,
                        client_transaction_version=2)
    expected = (struct.pack(">hqhib", 1, 4000, 3, 60000, 2) + bytes([2])  # compact: n + 1
                + bytes([2]) + b"a" + bytes([2]) + struct.pack(">i", 7) + bytes([0])
                + struct.pack(">qq", 9, 8)
                + bytes([2, 0, 8]) + struct.pack(">q", 3999)  # tag 0: PreviousProducerId
                + bytes([2, 2]) + struct.pack(">h", 2))  # tag 2: ClientTransactionVersion
    assert encode_value(value, version=1) == expected
    assert decode_value(expected) == value
    # An unknown tag (9, one byte) between the known ones is skipped.
    tags_at = len(expected) - 15  # count, tag 0, tag 2
    with_unknown = (expected[:tags_at] + bytes([3, 0, 8]) + struct.pack(">q", 3999)
                    + bytes([9, 1, 0xFF, 2, 2]) + struct.pack(">h", 2))
    assert decode_value(with_unknown) == value


def test_bad_values_are_format_errors() -> None:
    good = encode_value(ONGOING)
    for bad in (good[:-1], struct.pack(">h", 9) + good[2:],
                good[:16] + bytes([42]) + good[17:]):
        with pytest.raises(RecordFormatError):
            decode_value(bad)


def test_replay_keeps_the_last_record_and_drops_tombstones() -> None:
    done = TxnLogValue(4000, 3, 60000, TxnState.COMPLETE_COMMIT, (), 10, 1)
    records = [(encode_key("a"), encode_value(ONGOING)), (encode_key("b"), encode_value(done)),
               (b"\x00\x09junk", b"x"), (encode_key("a"), encode_value(done)),
               (encode_key("b"), None)]
    txns, skipped = replay(records)
    assert skipped == 1
    assert list(txns) == ["a"]
    meta = txns["a"]
    assert (meta.producer_id, meta.producer_epoch, meta.state, meta.partitions) == \
        (4000, 3, TxnState.COMPLETE_COMMIT, set())


def test_placement_is_javas_string_hash_code() -> None:
    # Values from Java's String.hashCode (UTF-16), and a string hashing to Integer.MIN_VALUE
    # (Utils.abs maps it to 0, not to a negative partition).
    assert java_string_hash("my-txn") == -1061187895
    assert java_string_hash("tx-é") == 3572704
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("my-txn", 50) == 1061187895 % 50 == 45
