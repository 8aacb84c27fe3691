"""Kafka's record batch codecs (reference/kafka-data-plane.md §1, Codecs), the one place a
broker decompresses or compresses records: the log cleaner, the leader's per-record checks and
its recompression to a topic's `compression.type` (broker/log/validator.py) all read and write
batches through `batch_records` and `assemble_batch`.

gzip is the standard library's zlib; snappy, lz4 and zstd are cramjam's (one maintained
package of Rust bindings to the reference C libraries, with wheels for every platform we run
on). The stream formats are the ones Kafka's Java client reads and writes:
* gzip: a gzip stream; concatenated members are read too.
* snappy: the xerial framing Java's SnappyOutputStream writes (magic, version 1, compatible
  version 1, then a big-endian int32 length and one raw snappy block per 32 KiB of input), or
  one raw snappy block, which librdkafka writes. Writing uses the xerial framing.
* lz4: an LZ4 frame with independent blocks of 64 KiB, as Kafka's Lz4BlockOutputStream writes
  it (this one adds a checksum per block, which every reader accepts). A frame with dependent
  blocks is refused, as Kafka's Lz4BlockInputStream refuses it (Java consumers could not read
  it either). Descriptor, block and content checksums are not verified on reading: the
  batch's CRC-32C already covers those bytes.
* zstd: zstd frames.

Kafka decompresses as a stream and never holds a whole batch's records; here they are held,
so every decompression stops at `MAX_DECOMPRESSED_BYTES` (CodecError): a 1 MiB zstd batch of
zeros would otherwise inflate to gigabytes in the broker's memory.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import cramjam

from broker.records import (
    CODEC_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC,
    DecodedRecord,
    RecordBatchHeader,
    compute_crc,
    decode_records,
)

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
# Kafka's CompressionType names by codec id; BrokerCompressionType calls NONE "uncompressed".
NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

# Kafka's levels (KIP-390): gzip 1..9 or -1 (Deflater's default, zlib's 6), lz4 1..17 (9: the
# fast compressor, any other level lz4's high-compression one), zstd ZSTD_minCLevel..22.
GZIP_LEVELS = (1, 9, -1)
LZ4_LEVELS = (1, 17, 9)
ZSTD_LEVELS = (-131072, 22, 3)
DEFAULT_LEVELS = {GZIP: GZIP_LEVELS[2], LZ4: LZ4_LEVELS[2], ZSTD: ZSTD_LEVELS[2]}

# A bound of ours (Kafka has none, it streams): far above any producer's batch (librdkafka's
# batch.size caps a batch at 1 MB of records, Java's producer at max.request.size).
MAX_DECOMPRESSED_BYTES = 256 << 20

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 << 10
_LZ4_MAGIC = bytes.fromhex("04224d18")
_LZ4_STORED = 0x80000000  # the block is stored uncompressed
_INT = struct.Struct(">i")
_LE_UINT = struct.Struct("<I")
_BATCH_LENGTH_AT = 8
_ATTRIBUTES_AT = 21
_HEADER_TAIL = struct.Struct(">hiqqqhii")  # attributes .. recordsCount


class CodecError(Exception):
    """A compressed body that does not decompress (or inflates past MAX_DECOMPRESSED_BYTES),
    or a codec id Kafka does not define."""


def decompress(codec: int, data: bytes, limit: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    """The plain bytes of a batch body in `codec`; CodecError when they are bad or more than
    `limit` bytes."""
    if codec == NONE:
        return data
    reader = _READERS.get(codec)
    if reader is None:
        raise CodecError(f"unknown compression codec id {codec}")
    if not data:
        raise CodecError(f"{NAMES[codec]} body is empty")
    try:
        return reader(data, limit)
    except (zlib.error, cramjam.DecompressionError, struct.error) as exc:
        raise CodecError(f"{NAMES[codec]} body does not decompress: {exc}") from None


def compress(codec: int, data: bytes, level: int | None = None) -> bytes:
    """`data` compressed in `codec` as Kafka's Java client writes it, at `level` (None: Kafka's
    default level for the codec; snappy has none)."""
    if codec == NONE:
        return data
    if codec == GZIP:
        deflate = zlib.compressobj(GZIP_LEVELS[2] if level is None else level, zlib.DEFLATED, 31)
        return deflate.compress(data) + deflate.flush()
    if codec == SNAPPY:
        return _xerial(data)
    if codec == LZ4:
        return _lz4_frame(data, LZ4_LEVELS[2] if level is None else level)
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data, level=ZSTD_LEVELS[2] if level is None
                                           else level))
    raise CodecError(f"unknown compression codec id {codec}")


# -- readers -----------------------------------------------------------------------------------


def _too_large(limit: int) -> CodecError:
    return CodecError(f"the records inflate to more than {limit} bytes")


def _gunzip(data: bytes, limit: int) -> bytes:
    out: list[bytes] = []
    total = 0
    rest = data
    while rest:
        inflate = zlib.decompressobj(31)
        try:
            chunk = inflate.decompress(rest, limit - total + 1)
        except zlib.error:
            if not out:
                raise
            break  # bytes after a member that are not one: Java's GZIPInputStream ignores them
        total += len(chunk)
        if total > limit:
            raise _too_large(limit)
        if not inflate.eof:
            raise CodecError("gzip body does not decompress: the stream ends early")
        out.append(chunk)
        rest = inflate.unused_data
    return b"".join(out)


def _raw_snappy(block: bytes, budget: int, limit: int) -> bytes:
    if cramjam.snappy.decompress_raw_len(block) > budget:
        raise _too_large(limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _unsnappy(data: bytes, limit: int) -> bytes:
    if not data.startswith(_XERIAL_MAGIC):
        return _raw_snappy(data, limit, limit)
    if len(data) < len(_XERIAL_HEADER):
        raise CodecError("snappy body does not decompress: the xerial header is cut")
    out: list[bytes] = []
    total = 0
    pos = len(_XERIAL_HEADER)
    while pos < len(data):
        (size,) = _INT.unpack_from(data, pos)
        pos += _INT.size
        if size < 0 or pos + size > len(data):
            raise CodecError(f"snappy body does not decompress: a xerial block of {size} "
                             "bytes runs past the end")
        chunk = _raw_snappy(data[pos : pos + size], limit - total, limit)
        total += len(chunk)
        out.append(chunk)
        pos += size
    return b"".join(out)


def _unlz4(data: bytes, limit: int) -> bytes:
    if len(data) < 7 or not data.startswith(_LZ4_MAGIC):
        raise CodecError("lz4 body does not decompress: Stream unsupported (invalid magic "
                         "bytes)")
    flg, bd = data[4], data[5]
    if flg & 0x03 or flg >> 6 != 1 or bd & 0x8F or not 4 <= (bd >> 4) & 7 <= 7:
        raise CodecError(f"lz4 body does not decompress: frame descriptor {flg:#04x} "
                         f"{bd:#04x} (Kafka reads version 1, block sizes 64 KiB to 4 MiB)")
    if not flg & 0x20:
        raise CodecError("lz4 body does not decompress: Dependent block stream is unsupported")
    block_checksum = 4 if flg & 0x10 else 0
    max_block = 1 << (2 * ((bd >> 4) & 7) + 8)
    pos = 7 + (8 if flg & 0x08 else 0)  # magic, FLG, BD, [content size], header checksum
    buffer = bytearray(max_block)
    out: list[bytes] = []
    total = 0
    while True:
        if pos + 4 > len(data):
            raise CodecError("lz4 body does not decompress: Stream ended prematurely")
        (size,) = _LE_UINT.unpack_from(data, pos)
        pos += 4
        if size == 0:  # the end mark (a content checksum may follow: the CRC covers it)
            return b"".join(out)
        stored = size & _LZ4_STORED
        size &= ~_LZ4_STORED
        if size > max_block or pos + size + block_checksum > len(data):
            raise CodecError(f"lz4 body does not decompress: a block of {size} bytes (at most "
                             f"{max_block}) runs past the end")
        block = data[pos : pos + size]
        pos += size + block_checksum
        if stored:
            chunk = block
        else:
            written = cramjam.lz4.decompress_block_into(block, buffer)
            chunk = bytes(memoryview(buffer)[:written])
        total += len(chunk)
        if total > limit:
            raise _too_large(limit)
        out.append(chunk)


def _unzstd(data: bytes, limit: int) -> bytes:
    # decompress_into refuses output past the buffer: grow it from a guess up to the limit.
    capacity = min(limit, max(1 << 16, 16 * len(data)))
    while True:
        buffer = bytearray(capacity)
        try:
            written = cramjam.zstd.decompress_into(data, buffer)
        except cramjam.DecompressionError as exc:
            if "failed to write whole buffer" not in str(exc):
                raise
            if capacity >= limit:
                raise _too_large(limit) from None
            capacity = min(limit, capacity * 4)
            continue
        return bytes(memoryview(buffer)[:written])


_READERS: dict[int, Callable[[bytes, int], bytes]] = {
    GZIP: _gunzip, SNAPPY: _unsnappy, LZ4: _unlz4, ZSTD: _unzstd,
}


# -- writers -----------------------------------------------------------------------------------


def _xerial(data: bytes) -> bytes:
    out = [_XERIAL_HEADER]
    for start in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + _XERIAL_BLOCK]))
        out += [_INT.pack(len(block)), block]
    return b"".join(out)


def _lz4_frame(data: bytes, level: int) -> bytes:
    # Kafka's Lz4BlockOutputStream: lz4-java's fast compressor at the default level 9, its
    # high-compression one at any other. An lz4 frame's level picks the fast compressor below
    # 3 and the high-compression one at 3 and up (so Kafka's levels 1 and 2 count as 3).
    compressor = cramjam.lz4.Compressor(level=0 if level == LZ4_LEVELS[2] else max(level, 3),
                                        content_checksum=False, block_linked=False)
    compressor.compress(data)
    return bytes(compressor.finish())


# -- batches -----------------------------------------------------------------------------------


def batch_records(header: RecordBatchHeader, blob: bytes) -> list[DecodedRecord]:
    """The records of the batch `blob` in any codec; CodecError for a body that does not
    decompress, CorruptRecordError for records that do not parse."""
    codec = header.compression
    if codec == NONE:
        return decode_records(blob)
    plain = bytearray(blob[:HEADER_SIZE])
    plain += decompress(codec, blob[HEADER_SIZE : header.size])
    _INT.pack_into(plain, _BATCH_LENGTH_AT, len(plain) - LOG_OVERHEAD)
    struct.pack_into(">h", plain, _ATTRIBUTES_AT, header.attributes & ~CODEC_MASK)
    return decode_records(bytes(plain))


def assemble_batch(
    base_offset: int, epoch: int, attributes: int, last_offset_delta: int,
    base_timestamp: int, max_timestamp: int, producer_id: int, producer_epoch: int,
    base_sequence: int, count: int, records: bytes, level: int | None = None,
) -> bytes:
    """A v2 batch of `count` encoded `records`, compressed in the codec `attributes` names (at
    `level`), with its CRC."""
    body = compress(attributes & CODEC_MASK, records, level)
    covered = _HEADER_TAIL.pack(attributes, last_offset_delta, base_timestamp, max_timestamp,
                                producer_id, producer_epoch, base_sequence, count) + body
    length = 4 + 1 + 4 + len(covered)  # epoch, magic, crc, covered bytes
    batch = bytearray(struct.pack(">qiibI", base_offset, length, epoch, MAGIC, 0) + covered)
    struct.pack_into(">I", batch, 17, compute_crc(batch))
    return bytes(batch)
