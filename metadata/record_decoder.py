"""A faster decode_record for replaying many records: PartitionRecords, nearly all of a big
image or log, differ mostly in partition id and topic id, so the protobuf-encoded rest (the
"tail") is decoded once per distinct value and reused.

A tail is cached only after decode_record read a whole record with it and re-encoding that
record's fields gives exactly the same tail (so the tail holds fields 3-10 and nothing else);
a topic id only after decode_record validated it. Anything else, and every other record type,
goes through decode_record, so the result is always what decode_record returns.
"""

from __future__ import annotations

import struct
from typing import Any

from metadata.records import (
    ZERO_UUID,
    MetadataRecordType,
    PartitionRecord,
    Record,
    decode_record,
    encode_record,
    record_version,
)

PARTITION_HEADER = struct.pack(">HH", MetadataRecordType.PARTITION_RECORD,
                               record_version(PartitionRecord(0, ZERO_UUID, (), ())))
# Distinct tails kept at most; a long replay with ever-new epochs starts afresh past it.
MAX_CACHED = 1 << 16


class RecordDecoder:
    """decode_record, with PartitionRecords read without protobuf when their tail (fields
    3-10, as snapshots.image_records encodes them) was seen before."""

    def __init__(self) -> None:
        self._tails: dict[bytes, tuple[Any, ...]] = {}
        self._topic_ids: dict[bytes, str] = {}

    def decode(self, data: bytes) -> Record:
        if data[:4] != PARTITION_HEADER:
            return decode_record(data)
        position, partition_id = 4, 0
        if data[4:5] == b"\x08":  # field 1, a varint: partition ids are small and positive
            partition_id, shift, position = 0, 0, 5
            while position < len(data) and shift < 28:
                byte = data[position]
                partition_id |= (byte & 0x7F) << shift
                position += 1
                shift += 7
                if not byte & 0x80:
                    break
            else:
                return decode_record(data)
        if data[position : position + 2] != b"\x12\x16":  # field 2, 22 bytes
            return decode_record(data)
        topic = data[position + 2 : position + 24]
        tail = data[position + 24 :]
        fields = self._tails.get(tail)
        topic_id = self._topic_ids.get(topic)
        if fields is None or topic_id is None:
            return self._learn(data, partition_id, topic, tail)
        return PartitionRecord(partition_id, topic_id, *fields)

    def _learn(self, data: bytes, partition_id: int, topic: bytes, tail: bytes) -> Record:
        record = decode_record(data)
        assert isinstance(record, PartitionRecord)
        if record.partition_id != partition_id or record.topic_id.encode() != topic:
            return record
        self._topic_ids[topic] = record.topic_id
        fields = (record.replicas, record.isr, record.removing_replicas, record.adding_replicas,
                  record.leader, record.leader_recovery_state, record.leader_epoch,
                  record.partition_epoch)
        canonical = encode_record(PartitionRecord(1, record.topic_id, *fields))
        if canonical.endswith(tail) and len(canonical) == len(PARTITION_HEADER) + 2 + 24 \
                + len(tail):
            if len(self._tails) >= MAX_CACHED:
                self._tails.clear()
            self._tails[tail] = fields
        return record
