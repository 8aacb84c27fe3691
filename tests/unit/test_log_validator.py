"""A topic's compression.type on the leader (broker/log/validator.py, Kafka's LogValidator),
through PartitionLog.append_as_leader: `producer` stores every codec byte for byte; another
value stores every batch in that codec, rebuilt with Kafka's offsets, timestamps and producer
fields; the keyless-record check of compacted topics reads every codec; a rebuilt batch is
held to max.message.bytes; the configs and their Kafka messages."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from broker.compression import (
    GZIP,
    LZ4,
    NAMES,
    NONE,
    SNAPPY,
    ZSTD,
    assemble_batch,
    batch_records,
)
from broker.log.config import LogConfig
from broker.log.partition_log import AppendError, PartitionLog
from broker.log.validator import TARGET_CODECS
from broker.records import (
    TRANSACTIONAL_BIT,
    Record,
    build_batch,
    compute_crc,
    encode_record,
    parse_header,
)
from kraft.errors import Errors
from metadata.config_keys import validate_topic_configs
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import ConfigRecord, ConfigResourceType

TOPIC_ID = "8d4c3b6a-6f64-4b43-9a59-3c5e3a4f2a11"
NOW = 1_700_000_000_000
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]
TYPES = {NONE: "uncompressed", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
RECORDS = [Record(b"value-%d" % i * 20, b"key-%d" % i, (("trace", b"t%d" % i),), NOW + 7 * i)
           for i in range(30)]


def batch_in(codec: int, records: list[Record] = RECORDS, deltas: list[int] | None = None,
             attributes: int = 0, sequence: int = 10) -> bytes:
    """A producer's batch (base offset 0, producer 42 epoch 3) in `codec`, whose records carry
    `deltas` as offset deltas (default 0, 1, 2, ...)."""
    deltas = list(range(len(records))) if deltas is None else deltas
    base_ts = NOW
    body = b"".join(encode_record(r, d, base_ts) for r, d in zip(records, deltas, strict=True))
    max_ts = max(NOW if r.timestamp_ms is None else r.timestamp_ms for r in records)
    return assemble_batch(0, -1, attributes | codec, len(records) - 1, base_ts, max_ts, 42, 3,
                          sequence, len(records), body)


def open_log(path: Path, **config: object) -> PartitionLog:
    return PartitionLog.open(str(path / "t-0"), TOPIC_ID, LogConfig(**config),  # type: ignore[arg-type]
                             now_ms=NOW)


def stored(log: PartitionLog, offset: int = 0) -> bytes:
    data = log.read(offset, 1 << 24, log.end_offset)
    return data[: parse_header(data).size]


def plain(records: list[Record]) -> list[tuple[bytes | None, bytes | None, int | None]]:
    return [(r.key, r.value, r.timestamp_ms) for r in records]


def read_back(batch: bytes) -> list[tuple[bytes | None, bytes | None, int | None]]:
    return [(r.key, r.value, r.timestamp_ms) for r in batch_records(parse_header(batch), batch)]


# -- compression.type=producer -----------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_producer_keeps_every_batch_as_sent(tmp_path: Path, codec: int) -> None:
    for compact in ((), ("compact",)):
        log = open_log(tmp_path / str(len(compact)), cleanup_policy=compact or ("delete",))
        sent = batch_in(codec)
        log.append_as_leader(sent, 5, NOW)
        kept = stored(log)
        assert kept[21:] == sent[21:] and kept[16:21] == sent[16:21]  # only offset and epoch
        log.close()


# -- compression.type=<codec> ------------------------------------------------------------------


@pytest.mark.parametrize("target", CODECS, ids=NAMES.get)
@pytest.mark.parametrize("source", CODECS, ids=NAMES.get)
def test_every_batch_is_stored_in_the_topics_codec(tmp_path: Path, source: int,
                                                   target: int) -> None:
    log = open_log(tmp_path, compression_type=TYPES[target])
    sent = batch_in(source, attributes=TRANSACTIONAL_BIT)
    log.append_as_leader(build_batch([b"first"] * 30, base_timestamp=NOW), 0, NOW)
    appended = log.append_as_leader(sent, 0, NOW)
    assert (appended.base_offset, appended.last_offset) == (30, 59)
    kept = stored(log, 30)
    header = parse_header(kept)
    assert header.compression == target
    if source == target:
        assert kept[16:] == sent[16:]  # in place: no decompression, no rewrite
    else:
        # Kafka's buildRecordsAndAssignOffsets: same records, producer fields, flags.
        assert compute_crc(kept) == header.crc
        assert (header.base_offset, header.last_offset_delta, header.records_count) == (30, 29,
                                                                                        30)
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 10)
        assert header.transactional and not header.log_append_time
        assert (header.base_timestamp, header.max_timestamp) == (NOW, NOW + 7 * 29)
    assert read_back(kept) == plain(RECORDS)
    log.close()


def test_a_rebuilt_batch_gets_the_offset_deltas_0_1_2(tmp_path: Path) -> None:
    """Records whose offset deltas are not 0, 1, 2, ... (old clients): a batch rebuilt in
    another codec gets them in order, and so does a compressed one decoded anyway (compacted
    topic) in its own codec, as Kafka turns in-place assignment off for it."""
    records = RECORDS[:3]
    odd = [0, 2, 5]
    log = open_log(tmp_path / "a", compression_type="zstd")
    log.append_as_leader(batch_in(GZIP, records, odd), 0, NOW)
    assert [r.offset for r in batch_records(parse_header(stored(log)), stored(log))] == [0, 1, 2]
    log.close()
    compacted = open_log(tmp_path / "b", cleanup_policy=("compact",))
    sent = batch_in(LZ4, records, odd)
    compacted.append_as_leader(sent, 0, NOW)
    kept = stored(compacted)
    assert kept[21:] != sent[21:] and parse_header(kept).compression == LZ4
    assert [r.offset for r in batch_records(parse_header(kept), kept)] == [0, 1, 2]
    # An uncompressed batch is stored as sent (Kafka's assignOffsetsNonCompressed).
    sent = batch_in(NONE, records, odd, sequence=13)
    compacted.append_as_leader(sent, 0, NOW)
    assert stored(compacted, 3)[21:] == sent[21:]
    compacted.close()


def test_log_append_time_applies_to_a_rebuilt_batch(tmp_path: Path) -> None:
    log = open_log(tmp_path, compression_type="lz4", message_timestamp_type="LogAppendTime")
    appended = log.append_as_leader(batch_in(NONE), 0, NOW + 500)
    header = parse_header(stored(log))
    assert header.compression == LZ4 and header.log_append_time
    assert header.max_timestamp == appended.log_append_time_ms == NOW + 500
    assert compute_crc(stored(log)) == header.crc
    log.close()


def test_the_topics_level_is_used(tmp_path: Path) -> None:
    records = [Record(b"abcdefgh" * 200, b"k%d" % i) for i in range(50)]
    sizes = []
    for level in ("1", "9"):
        log = open_log(tmp_path / level, compression_type="gzip",
                       compression_gzip_level=int(level))
        log.append_as_leader(batch_in(NONE, records), 0, NOW)
        sizes.append(len(stored(log)))
        log.close()
    assert sizes[0] > sizes[1]


def test_a_rebuilt_batch_larger_than_max_message_bytes_is_refused(tmp_path: Path) -> None:
    records = [Record(bytes(2000), b"k%d" % i) for i in range(20)]
    sent = batch_in(ZSTD, records)
    log = open_log(tmp_path, compression_type="uncompressed", max_message_bytes=10_000)
    with pytest.raises(AppendError) as refused:
        log.append_as_leader(sent, 0, NOW)
    assert refused.value.code == Errors.MESSAGE_TOO_LARGE
    assert "recompressed to uncompressed" in refused.value.message
    assert log.end_offset == 0
    log.close()


def test_an_idempotent_retry_of_a_rebuilt_batch_is_a_duplicate(tmp_path: Path) -> None:
    log = open_log(tmp_path, compression_type="snappy")
    first = log.append_as_leader(batch_in(NONE), 0, NOW)
    again = log.append_as_leader(batch_in(NONE), 0, NOW)
    assert again.duplicate and (again.base_offset, again.last_offset) == (0, 29)
    assert first.base_offset == 0 and log.end_offset == 30
    log.close()


# -- compacted topics: keyless records in every codec ------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_a_compacted_topic_refuses_a_keyless_record_in_every_codec(tmp_path: Path,
                                                                   codec: int) -> None:
    log = open_log(tmp_path, cleanup_policy=("compact",))
    with pytest.raises(AppendError) as refused:
        log.append_as_leader(batch_in(codec, [*RECORDS[:5], Record(b"no key")]), 0, NOW)
    assert refused.value.code == Errors.INVALID_RECORD
    assert refused.value.message == ("Compacted topic cannot accept message without key in "
                                     "topic partition t-0.")
    assert log.end_offset == 0
    log.close()


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD], ids=NAMES.get)
def test_a_body_that_does_not_decompress_is_corrupt(tmp_path: Path, codec: int) -> None:
    sent = build_batch([Record(b"v", b"k")], attributes=codec)  # a plain body flagged `codec`
    log = open_log(tmp_path, cleanup_policy=("compact",))
    with pytest.raises(AppendError) as refused:
        log.append_as_leader(sent, 0, NOW)
    assert refused.value.code == Errors.CORRUPT_MESSAGE
    assert "does not decompress" in refused.value.message
    log.close()


# -- the configs -------------------------------------------------------------------------------


def test_compression_configs_are_checked_with_kafkas_messages() -> None:
    for name, value in (("compression.type", "producer"), ("compression.type", "uncompressed"),
                        ("compression.gzip.level", "-1"), ("compression.lz4.level", "17"),
                        ("compression.zstd.level", "-131072")):
        assert validate_topic_configs({name: value}) is None
    for name, value, message in (
        ("compression.type", "none", "String must be one of: uncompressed, zstd, lz4, snappy, "
                                     "gzip, producer"),
        ("compression.type", "LZ4", "String must be one of"),
        ("compression.gzip.level", "0", "Value must be between 1 and 9 or equal to -1"),
        ("compression.lz4.level", "18", "Value must be no more than 17"),
        ("compression.zstd.level", "23", "Value must be no more than 22"),
        ("compression.zstd.level", "x", "Not a number of type INT"),
    ):
        error = validate_topic_configs({name: value})
        assert error is not None and error.code == Errors.INVALID_CONFIG
        assert f"Invalid value {value} for configuration {name}: {message}" in error.message


def test_compression_type_resolves_from_the_topic_then_the_cluster_default() -> None:
    assert LogConfig.for_topic(EMPTY_IMAGE, "t").compression_type == "producer"
    assert {v for v in TARGET_CODECS} == {"uncompressed", "gzip", "snappy", "lz4", "zstd"}
    delta = MetadataDelta(EMPTY_IMAGE)
    for kind, name, key, value in (
            (ConfigResourceType.BROKER, "", "compression.type", "zstd"),
            (ConfigResourceType.BROKER, "", "compression.zstd.level", "7"),
            (ConfigResourceType.TOPIC, "t", "compression.type", "lz4")):
        delta.replay(ConfigRecord(kind, name, key, value), 1, 1, NOW)
    image = delta.apply()
    assert LogConfig.for_topic(image, "t").compression_type == "lz4"
    other = LogConfig.for_topic(image, "u")
    assert (other.compression_type, other.compression_zstd_level) == ("zstd", 7)
    assert dataclasses.replace(other, compression_type="gzip").compression_gzip_level == -1
