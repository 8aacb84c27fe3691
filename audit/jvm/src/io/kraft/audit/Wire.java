package io.kraft.audit;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * The protobuf wire format over a slice of a buffer, strict where Python's protobuf (upb) is
 * strict: a truncated or malformed field, a bad tag or bad UTF-8 in a string is an error, an
 * unknown field (or a known one with another wire type) is skipped.
 */
final class Wire {
    static final int VARINT = 0;
    static final int FIXED64 = 1;
    static final int LEN = 2;
    static final int START_GROUP = 3;
    static final int END_GROUP = 4;
    static final int FIXED32 = 5;

    /** A parse failure; the message is upb's reason. No stack trace: these are data. */
    static final class Corrupt extends Exception {
        Corrupt(String reason) {
            super(reason, null, false, false);
        }
    }

    static final String CORRUPT = "Wire format was corrupt";
    static final String BAD_UTF8 = "String field had bad UTF-8";

    private static final ThreadLocal<CharsetDecoder> UTF8 = ThreadLocal.withInitial(
        () -> StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT));

    private final ByteBuffer buf;
    private int pos;
    private final int end;
    private int lastTag;

    Wire(ByteBuffer buf, int pos, int end) {
        this.buf = buf;
        this.pos = pos;
        this.end = end;
    }

    boolean more() {
        return pos < end;
    }

    /** The next tag; its field number is {@link #field()} and wire type {@link #type()}. */
    int next() throws Corrupt {
        long tag = varint();
        if (tag > 0xFFFFFFFFL || (tag >>> 3) == 0) {
            throw new Corrupt(CORRUPT);
        }
        int type = (int) (tag & 7);
        if (type == END_GROUP || type > FIXED32) {
            throw new Corrupt(CORRUPT);
        }
        lastTag = (int) tag;
        return lastTag;
    }

    int field() {
        return lastTag >>> 3;
    }

    int type() {
        return lastTag & 7;
    }

    long varint() throws Corrupt {
        long value = 0;
        for (int shift = 0; shift < 70; shift += 7) {
            if (pos >= end) {
                throw new Corrupt(CORRUPT);
            }
            byte b = buf.get(pos++);
            value |= (long) (b & 0x7F) << shift;
            if (b >= 0) {
                return value;
            }
        }
        throw new Corrupt(CORRUPT);
    }

    /** A length-delimited field: its end position (the reader is left at its start). */
    int length() throws Corrupt {
        long length = varint();
        if (length > end - pos) {
            throw new Corrupt(CORRUPT);
        }
        return pos + (int) length;
    }

    String string() throws Corrupt {
        int stop = length();
        int n = stop - pos;
        String cached = Strings.lookup(buf, pos, n);
        if (cached != null) {
            pos = stop;
            return cached;
        }
        byte[] bytes = new byte[n];
        buf.get(pos, bytes);
        pos = stop;
        boolean ascii = true;
        for (byte b : bytes) {
            if (b < 0) {
                ascii = false;
                break;
            }
        }
        String text;
        if (ascii) {
            text = new String(bytes, StandardCharsets.ISO_8859_1);
        } else {
            try {
                text = UTF8.get().decode(ByteBuffer.wrap(bytes)).toString();
            } catch (CharacterCodingException e) {
                throw new Corrupt(BAD_UTF8);
            }
        }
        Strings.store(bytes, text);
        return text;
    }

    /** A repeated int32 field, packed (LEN) or one value (VARINT), appended to `into`. */
    void int32s(IntList into) throws Corrupt {
        if (type() == VARINT) {
            into.add((int) varint());
            return;
        }
        int stop = length();
        Wire packed = new Wire(buf, pos, stop);
        while (packed.more()) {
            into.add((int) packed.varint());
        }
        pos = stop;
    }

    /** A FIXED64 field as a double (protobuf's little-endian IEEE 754). */
    double float64() throws Corrupt {
        advance(8);
        long bits = 0;
        for (int i = 1; i <= 8; i++) {
            bits = (bits << 8) | (buf.get(pos - i) & 0xFFL);
        }
        return Double.longBitsToDouble(bits);
    }

    /** A sub-message: a reader over its bytes (this reader moves past it). */
    Wire message() throws Corrupt {
        int stop = length();
        Wire inner = new Wire(buf, pos, stop);
        pos = stop;
        return inner;
    }

    /** Skip the current field (an unknown one, or a known one with another wire type). */
    void skip() throws Corrupt {
        switch (type()) {
            case VARINT -> varint();
            case FIXED64 -> advance(8);
            case FIXED32 -> advance(4);
            case LEN -> pos = length();
            case START_GROUP -> skipGroup(field());
            default -> throw new Corrupt(CORRUPT);
        }
    }

    private void skipGroup(int field) throws Corrupt {
        while (true) {
            if (pos >= end) {
                throw new Corrupt(CORRUPT);
            }
            long tag = varint();
            int type = (int) (tag & 7);
            int number = (int) (tag >>> 3);
            if (tag > 0xFFFFFFFFL || number == 0 || type > FIXED32) {
                throw new Corrupt(CORRUPT);
            }
            if (type == END_GROUP) {
                if (number != field) {
                    throw new Corrupt(CORRUPT);
                }
                return;
            }
            lastTag = (int) tag;
            skip();
        }
    }

    private void advance(int n) throws Corrupt {
        if (end - pos < n) {
            throw new Corrupt(CORRUPT);
        }
        pos += n;
    }
}
