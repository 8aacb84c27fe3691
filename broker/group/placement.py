"""Which `__consumer_offsets` partition holds a group: abs(String.hashCode(id)) % partitions,
exactly as Kafka computes it (Utils.abs maps Integer.MIN_VALUE to 0), so tools that place
groups themselves agree with this broker."""

from __future__ import annotations

OFFSETS_TOPIC = "__consumer_offsets"


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: 31*h + c over UTF-16 code units, 32-bit signed."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def kafka_abs(value: int) -> int:
    return 0 if value == -(2**31) else abs(value)


def partition_for(group_id: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(group_id)) % partitions
