"""The record codecs (broker/compression.py): every codec round-trips, the streams the
clients write are read (gzip members, raw and xerial snappy, lz4 frames with checksums or a
content size, zstd frames with and without a content size), what is written is what Kafka's
Java client reads, lz4's dependent blocks are refused as Kafka refuses them, bad bodies and
bodies inflating past the bound are CodecErrors, the levels apply, and batch_records reads a
batch in every codec."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest

from broker.compression import (
    GZIP,
    LZ4,
    NAMES,
    NONE,
    SNAPPY,
    ZSTD,
    CodecError,
    assemble_batch,
    batch_records,
    compress,
    decompress,
)
from broker.records import Record, build_batch, decode_records, parse_header

CODECS = [GZIP, SNAPPY, LZ4, ZSTD]
# JSON-like records and some noise: ~260 KB, across several lz4 (64 KiB) and xerial (32 KiB)
# blocks.
BODY = b"".join(b'{"id": %d, "user": "user-%d", "active": true}' % (i, i * 7)
                for i in range(5000)) + os.urandom(40_000)


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_each_codec_round_trips(codec: int) -> None:
    packed = compress(codec, BODY)
    assert packed != BODY and len(packed) < len(BODY)
    assert decompress(codec, packed) == BODY
    assert decompress(codec, compress(codec, b"x")) == b"x"


def test_no_codec_is_the_bytes_themselves() -> None:
    assert compress(NONE, BODY) is BODY and decompress(NONE, BODY) is BODY


# -- what the clients write is read ------------------------------------------------------------


def test_gzip_members_are_read_in_order_and_trailing_bytes_ignored() -> None:
    two = gzip.compress(BODY[:1000]) + gzip.compress(BODY[1000:])
    assert decompress(GZIP, two) == BODY
    assert decompress(GZIP, gzip.compress(BODY) + b"\x00\x00garbage") == BODY  # as Java


def test_raw_snappy_as_librdkafka_writes_it_and_xerial_as_java_writes_it() -> None:
    assert decompress(SNAPPY, bytes(cramjam.snappy.compress_raw(BODY))) == BODY
    xerial = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    for start in (0, 20_000):
        block = bytes(cramjam.snappy.compress_raw(BODY[start : start + 20_000]))
        xerial += struct.pack(">i", len(block)) + block
    assert decompress(SNAPPY, xerial) == BODY[:40_000]


def test_lz4_frames_with_checksums_or_a_content_size_are_read() -> None:
    compressor = cramjam.lz4.Compressor(level=0, content_checksum=True, block_linked=False)
    compressor.compress(BODY)
    with_checksums = bytes(compressor.finish())
    assert with_checksums[4] & 0x14 == 0x14  # block and content checksum flags
    assert decompress(LZ4, with_checksums) == BODY
    frame = compress(LZ4, BODY)
    # The content size flag and 8 bytes of size after BD (the header checksum is not read).
    sized = frame[:4] + bytes([frame[4] | 0x08, frame[5]]) + struct.pack("<q", len(BODY))
    assert decompress(LZ4, sized + frame[6:]) == BODY


def test_zstd_frames_with_and_without_a_content_size_are_read() -> None:
    streamed = cramjam.zstd.Compressor(3)
    streamed.compress(BODY)
    assert decompress(ZSTD, bytes(streamed.finish())) == BODY
    assert decompress(ZSTD, bytes(cramjam.zstd.compress(BODY))) == BODY
    # Zeros inflate far past the first guess at the buffer (16 x the body): it grows.
    zeros = bytes(5 << 20)
    assert decompress(ZSTD, bytes(cramjam.zstd.compress(zeros))) == zeros


# -- what is written is what Kafka reads -------------------------------------------------------


def test_lz4_is_written_as_kafka_reads_it() -> None:
    frame = compress(LZ4, BODY)
    assert frame[:4] == bytes.fromhex("04224d18")
    flg, bd = frame[4], frame[5]
    assert flg >> 6 == 1 and flg & 0x20  # version 1, independent blocks (Kafka refuses others)
    assert not flg & 0x04 and bd == 0x40  # no content checksum, 64 KiB blocks
    assert bytes(cramjam.lz4.decompress(frame)) == BODY  # a full reader: header checksum


def test_snappy_is_written_in_xerial_blocks_of_32_kib() -> None:
    packed = compress(SNAPPY, BODY)
    assert packed[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    (first,) = struct.unpack_from(">i", packed, 16)
    assert cramjam.snappy.decompress_raw_len(packed[20 : 20 + first]) == 32 << 10


def test_gzip_and_zstd_are_written_as_standard_streams() -> None:
    assert gzip.decompress(compress(GZIP, BODY)) == BODY
    assert bytes(cramjam.zstd.decompress(compress(ZSTD, BODY))) == BODY


def test_lz4_dependent_blocks_are_refused_as_kafka_refuses_them() -> None:
    linked = bytes(cramjam.lz4.compress(BODY, level=0))  # cramjam's frame: linked blocks
    with pytest.raises(CodecError, match="Dependent block stream is unsupported"):
        decompress(LZ4, linked)


# -- bad bodies --------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_a_body_that_inflates_past_the_bound_is_refused(codec: int) -> None:
    packed = compress(codec, bytes(100_000))
    assert decompress(codec, packed, limit=100_000) == bytes(100_000)
    with pytest.raises(CodecError, match="inflate to more than 99999 bytes"):
        decompress(codec, packed, limit=99_999)


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_bad_bodies_are_codec_errors(codec: int) -> None:
    packed = compress(codec, BODY)
    for bad in (b"", b"\x00" * 40, packed[: len(packed) // 2]):
        with pytest.raises(CodecError):
            decompress(codec, bad)


def test_an_unknown_codec_is_a_codec_error() -> None:
    with pytest.raises(CodecError, match="unknown compression codec id 5"):
        decompress(5, b"x")
    with pytest.raises(CodecError, match="unknown compression codec id 6"):
        compress(6, b"x")


def test_levels_apply() -> None:
    body = BODY[:60_000]
    assert len(compress(GZIP, body, 1)) > len(compress(GZIP, body, 9))
    assert len(compress(ZSTD, body, -50)) > len(compress(ZSTD, body, 3))
    # lz4's default level 9 is lz4-java's fast compressor; other levels the slower HC one.
    assert compress(LZ4, body, 9) != compress(LZ4, body, 12)
    for codec, level in ((GZIP, 1), (LZ4, 12), (ZSTD, -5)):
        assert decompress(codec, compress(codec, body, level)) == body


# -- batches -----------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=NAMES.get)
def test_batch_records_reads_a_batch_in_every_codec(codec: int) -> None:
    plain = build_batch([Record(b"v%d" % i, b"k%d" % i, (("h", b"x"),), 1000 + i)
                         for i in range(50)], base_timestamp=1000, producer_id=7,
                        producer_epoch=1, base_sequence=3)
    h = parse_header(plain)
    batch = assemble_batch(h.base_offset, h.partition_leader_epoch, h.attributes | codec,
                           h.last_offset_delta, h.base_timestamp, h.max_timestamp,
                           h.producer_id, h.producer_epoch, h.base_sequence, h.records_count,
                           plain[61:])
    header = parse_header(batch)
    assert header.compression == codec and header.records_count == 50
    assert batch_records(header, batch) == decode_records(plain)
