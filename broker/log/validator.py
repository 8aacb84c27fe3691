"""What a leader does to a producer's records between the batch's header checks
(broker/records.validate_client_batch) and the append, as Kafka's LogValidator does for a
magic-2 batch:
* the target codec is the topic's `compression.type`, or the batch's own for `producer`
  (Kafka's default);
* a batch already in the target codec is stored as sent (only its base offset and leader epoch
  are stamped afterwards); another is rebuilt in the target codec as Kafka's
  buildRecordsAndAssignOffsets rebuilds it: the records keep their timestamps, keys, values
  and headers and get the offset deltas 0, 1, 2, ... in order, the base timestamp is the first
  record's, the max timestamp the largest, and the producer id, epoch, base sequence and
  transactional flag are the batch's;
* a compacted topic refuses a record without a key (INVALID_RECORD);
* a compressed batch whose records do not carry the offset deltas 0, 1, 2, ... is rebuilt even
  in its own codec (Kafka's in-place assignment is off then), and a rebuilt batch larger than
  `max.message.bytes` or `segment.bytes` is refused as Kafka refuses it after validation.

Where this differs from Kafka: Kafka decompresses every compressed batch on the leader; here the
records are decoded only when they must be (a compacted topic, a batch to rebuild), so a batch
stored in its own codec on a topic that is not compacted is not read (the inner offsets and
record framing of such a batch are not checked: librdkafka, the Java client and kafka-python
write them right).
"""

from __future__ import annotations

from broker.compression import (
    GZIP,
    LZ4,
    NONE,
    SNAPPY,
    ZSTD,
    CodecError,
    assemble_batch,
    batch_records,
)
from broker.log.config import PRODUCER, LogConfig
from broker.records import (
    CODEC_MASK,
    TRANSACTIONAL_BIT,
    AppendError,
    DecodedRecord,
    Record,
    RecordBatchHeader,
    encode_record,
    parse_header,
)
from kraft.errors import Errors
from kraft.log.base import CorruptRecordError

# compression.type's values (BrokerCompressionType) as codec ids.
TARGET_CODECS = {"uncompressed": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}


def target_codec(config: LogConfig, source: int) -> int:
    """The codec the topic stores a batch sent in `source` in (BrokerCompressionType)."""
    if config.compression_type == PRODUCER:
        return source
    return TARGET_CODECS[config.compression_type]


def validate_records(
    batch: bytes, header: RecordBatchHeader, config: LogConfig, topic: str, partition: int
) -> tuple[bytes, RecordBatchHeader]:
    """The batch to append for a producer's `batch` (whose header passed
    validate_client_batch): itself, or rebuilt in the topic's codec. AppendError when a record
    is refused or the records cannot be read."""
    source = header.compression
    target = target_codec(config, source)
    if source == target and not config.compact:
        return batch, header
    try:
        records = batch_records(header, batch)
    except (CorruptRecordError, CodecError) as exc:
        raise AppendError(Errors.CORRUPT_MESSAGE, f"cannot read the records: {exc}") from exc
    if config.compact and any(record.key is None for record in records):
        raise AppendError(Errors.INVALID_RECORD, "Compacted topic cannot accept message "
                          f"without key in topic partition {topic}-{partition}.")
    if source == target and (source == NONE or _in_order(records, header)):
        return batch, header
    rebuilt = _rebuild(header, records, target, config)
    size = len(rebuilt)
    if size > config.max_message_bytes:
        raise AppendError(Errors.MESSAGE_TOO_LARGE,
                          f"record batch of {size} bytes once recompressed to "
                          f"{config.compression_type} is larger than max.message.bytes "
                          f"({config.max_message_bytes})")
    if size > config.segment_bytes:
        raise AppendError(Errors.RECORD_BATCH_TOO_LARGE,
                          f"record batch of {size} bytes once recompressed to "
                          f"{config.compression_type} is larger than segment.bytes "
                          f"({config.segment_bytes})")
    return rebuilt, parse_header(rebuilt)


def _in_order(records: list[DecodedRecord], header: RecordBatchHeader) -> bool:
    """Whether the records carry the offsets Kafka expects inside a compressed batch."""
    base = header.base_offset
    return all(record.offset == base + delta for delta, record in enumerate(records))


def _level(config: LogConfig, codec: int) -> int | None:
    return {GZIP: config.compression_gzip_level, LZ4: config.compression_lz4_level,
            ZSTD: config.compression_zstd_level}.get(codec)


def _rebuild(header: RecordBatchHeader, records: list[DecodedRecord], codec: int,
             config: LogConfig) -> bytes:
    base_timestamp = records[0].timestamp_ms
    body = b"".join(
        encode_record(Record(r.value, r.key, r.headers, r.timestamp_ms), delta, base_timestamp)
        for delta, r in enumerate(records))
    attributes = (header.attributes & TRANSACTIONAL_BIT) | (codec & CODEC_MASK)
    return assemble_batch(header.base_offset, header.partition_leader_epoch, attributes,
                          len(records) - 1, base_timestamp,
                          max(record.timestamp_ms for record in records), header.producer_id,
                          header.producer_epoch, header.base_sequence, len(records), body,
                          _level(config, codec))
