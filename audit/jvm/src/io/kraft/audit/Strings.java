package io.kraft.audit;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * Decoded strings by their bytes, per thread: topic ids repeat in nearly every record, and
 * one String per id means one UTF-8 check and one hash code instead of one per record.
 * Direct-mapped: a collision replaces the older entry.
 */
final class Strings {
    private static final int SLOTS = 4096;
    private static final int MAX_LENGTH = 64;
    private static final VarHandle LONGS =
        MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final ThreadLocal<Strings> CACHE = ThreadLocal.withInitial(Strings::new);

    private final byte[][] keys = new byte[SLOTS][];
    private final String[] values = new String[SLOTS];
    private final byte[] scratch = new byte[MAX_LENGTH];

    private Strings() {
    }

    /** A hash of bytes[0, n), eight bytes at a time (a per-byte loop was the hot spot). */
    private static int slot(byte[] bytes, int n) {
        long h = n;
        int i = 0;
        for (; i + 8 <= n; i += 8) {
            h = (h ^ (long) LONGS.get(bytes, i)) * 0x9E3779B97F4A7C15L;
        }
        for (; i < n; i++) {
            h = (h ^ bytes[i]) * 0x9E3779B97F4A7C15L;
        }
        return (int) (h >>> 52) & (SLOTS - 1);
    }

    /** The cached String for buf[pos, pos + n), null when it is not cached. */
    static String lookup(ByteBuffer buf, int pos, int n) {
        if (n > MAX_LENGTH) {
            return null;
        }
        Strings cache = CACHE.get();
        byte[] bytes = cache.scratch;
        buf.get(pos, bytes, 0, n);
        int slot = slot(bytes, n);
        byte[] key = cache.keys[slot];
        if (key == null || !Arrays.equals(key, 0, key.length, bytes, 0, n)) {
            return null;
        }
        return cache.values[slot];
    }

    static void store(byte[] bytes, String value) {
        if (bytes.length > MAX_LENGTH) {
            return;
        }
        Strings cache = CACHE.get();
        int slot = slot(bytes, bytes.length);
        cache.keys[slot] = bytes;
        cache.values[slot] = value;
    }
}
