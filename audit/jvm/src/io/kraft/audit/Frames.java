package io.kraft.audit;

import java.nio.ByteBuffer;
import java.util.zip.CRC32C;

/**
 * Batch frames as kraft/log/codec.py lays them out (big-endian):
 * length u32, crc u32 (CRC32C of the rest), magic u8 = 1, attributes u8 (bit 0 control),
 * base_offset i64, epoch i32, record_count i32, first_timestamp_ms i64, max_timestamp_ms i64,
 * then record_count x (u32 length + bytes). The error texts are codec.py's, word for word.
 */
final class Frames {
    static final int HEADER_SIZE = 42;
    static final int PREFIX_SIZE = 8;
    private static final int MAGIC = 1;
    private static final int ATTR_CONTROL = 1;

    private Frames() {
    }

    /** A verified frame (records not split). */
    record Header(long baseOffset, int epoch, int recordCount, int position, int size,
                  boolean control, long crc, long firstTimestampMs) {
        long nextOffset() {
            return baseOffset + recordCount;
        }
    }

    /** Why a frame is bad, and at which byte. */
    static final class Corrupt extends Exception {
        final long position;
        final String reason;

        Corrupt(String reason, long position) {
            super(reason + " (byte " + position + ")", null, false, false);
            this.reason = reason;
            this.position = position;
        }
    }

    /** The frame at `pos` of buf[0, end), verified as scan_prefix does; null when it is bad. */
    static Header read(ByteBuffer buf, int pos, int end) {
        if (end - pos < HEADER_SIZE) {
            return null;
        }
        long length = buf.getInt(pos) & 0xFFFFFFFFL;
        long crc = buf.getInt(pos + 4) & 0xFFFFFFFFL;
        int magic = buf.get(pos + 8) & 0xFF;
        int attrs = buf.get(pos + 9) & 0xFF;
        long base = buf.getLong(pos + 10);
        int epoch = buf.getInt(pos + 18);
        long count = buf.getInt(pos + 22);
        long size = length + PREFIX_SIZE;
        boolean ok = size >= HEADER_SIZE && pos + size <= end
            && crc32c(buf, pos + PREFIX_SIZE, (int) size - PREFIX_SIZE) == crc
            && magic == MAGIC && attrs <= ATTR_CONTROL && base >= 0 && epoch >= 0
            && count > 0 && count * 4 <= size - HEADER_SIZE && base <= Long.MAX_VALUE - count;
        if (!ok) {
            return null;
        }
        return new Header(base, epoch, (int) count, pos, (int) size, attrs == ATTR_CONTROL,
            crc, buf.getLong(pos + 26));
    }

    static long crc32c(ByteBuffer buf, int pos, int length) {
        CRC32C crc = new CRC32C();
        crc.update(buf.slice(pos, length));
        return crc.getValue();
    }

    /** Why the frame at `pos` is bad (codec._frame_error). */
    static Corrupt error(ByteBuffer buf, int pos, int end) {
        int left = end - pos;
        if (left < HEADER_SIZE) {
            return new Corrupt(left + " bytes left, shorter than a batch header", pos);
        }
        long length = buf.getInt(pos) & 0xFFFFFFFFL;
        long crc = buf.getInt(pos + 4) & 0xFFFFFFFFL;
        int magic = buf.get(pos + 8) & 0xFF;
        int attrs = buf.get(pos + 9) & 0xFF;
        long base = buf.getLong(pos + 10);
        int epoch = buf.getInt(pos + 18);
        long count = buf.getInt(pos + 22);
        long size = length + PREFIX_SIZE;
        if (size < HEADER_SIZE) {
            return new Corrupt("length " + length + " is too small", pos);
        }
        if (size > left) {
            return new Corrupt("batch of " + size + " bytes runs past the end (" + left
                + " bytes left)", pos);
        }
        if (magic != MAGIC) {
            return new Corrupt("unknown magic " + magic, pos);
        }
        long actual = crc32c(buf, pos + PREFIX_SIZE, (int) size - PREFIX_SIZE);
        if (actual != crc) {
            return new Corrupt(String.format("CRC32C mismatch (stored %#010x, computed %#010x)",
                crc, actual), pos);
        }
        if ((attrs & ~ATTR_CONTROL) != 0) {
            return new Corrupt(String.format("unknown attribute bits %#04x", attrs), pos);
        }
        if (base < 0 || epoch < 0) {
            return new Corrupt("negative base offset " + base + " or epoch " + epoch, pos);
        }
        if (count < 1 || count * 4 > size - HEADER_SIZE) {
            return new Corrupt("record count " + count + " does not fit a batch of " + size
                + " bytes", pos);
        }
        return new Corrupt("offsets overflow from " + base, pos);
    }

    /** Whether a bad frame at `pos` looks like an interrupted write (codec.is_torn_tail). */
    static boolean tornTail(ByteBuffer buf, int pos, int end) {
        if (end - pos < HEADER_SIZE) {
            return true;
        }
        long length = buf.getInt(pos) & 0xFFFFFFFFL;
        if (pos + PREFIX_SIZE + length >= end) {
            return true;
        }
        for (int i = pos; i < end; i++) {
            if (buf.get(i) != 0) {
                return false;
            }
        }
        return true;
    }

    /** The records of a verified frame as [start, length] pairs (codec.decode_batches). */
    static int[] records(ByteBuffer buf, Header h) throws Corrupt {
        int[] out = new int[2 * h.recordCount()];
        int frameEnd = h.position() + h.size();
        int pos = h.position() + HEADER_SIZE;
        for (int i = 0; i < h.recordCount(); i++) {
            if (pos + 4 > frameEnd) {
                throw new Corrupt("record length field past the end of the batch", h.position());
            }
            long length = buf.getInt(pos) & 0xFFFFFFFFL;
            pos += 4;
            if (pos + length > frameEnd) {
                throw new Corrupt("record runs past the end of the batch", h.position());
            }
            out[2 * i] = pos;
            out[2 * i + 1] = (int) length;
            pos += (int) length;
        }
        if (pos != frameEnd) {
            throw new Corrupt((frameEnd - pos) + " bytes after the last record", h.position());
        }
        return out;
    }

    static byte[] bytes(ByteBuffer buf, int pos, int length) {
        byte[] out = new byte[length];
        buf.get(pos, out);
        return out;
    }
}
