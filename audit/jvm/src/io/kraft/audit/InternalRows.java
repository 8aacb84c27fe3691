package io.kraft.audit;

import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * FileRows' Object[] rows as Spark's internal rows: strings as UTF8String (the file name, the
 * record types and topic ids repeat, so each is converted once per file), int and string
 * lists as arrays. Spark's conversion of external Rows costs several times the decoding itself.
 */
final class InternalRows implements Iterator<InternalRow> {
    private static final int MAX_CACHED = 100_000;
    private final Iterator<Object[]> rows;
    private final Map<String, UTF8String> strings = new HashMap<>();

    InternalRows(Iterator<Object[]> rows) {
        this.rows = rows;
    }

    @Override
    public boolean hasNext() {
        return rows.hasNext();
    }

    @Override
    public InternalRow next() {
        Object[] values = rows.next();
        for (int i = 0; i < values.length; i++) {
            Object value = values[i];
            if (value instanceof String text) {
                values[i] = utf8(i, text);
            } else if (value instanceof int[] ints) {
                values[i] = UnsafeArrayData.fromPrimitiveArray(ints);
            } else if (value instanceof String[] texts) {
                values[i] = strings(texts);
            }
        }
        return new GenericInternalRow(values);
    }

    /** A string list (null elements kept) as an array of UTF8String. */
    private static GenericArrayData strings(String[] texts) {
        Object[] items = new Object[texts.length];
        for (int i = 0; i < texts.length; i++) {
            items[i] = texts[i] == null ? null : UTF8String.fromString(texts[i]);
        }
        return new GenericArrayData(items);
    }

    private UTF8String utf8(int column, String text) {
        boolean repeats = column == Columns.SOURCE_FILE || column == Columns.SOURCE_KIND
            || column == Columns.RECORD_TYPE || column == Columns.TOPIC_ID;
        if (!repeats) {
            return UTF8String.fromString(text);
        }
        UTF8String cached = strings.get(text);
        if (cached == null) {
            cached = UTF8String.fromString(text);
            if (strings.size() < MAX_CACHED) {
                strings.put(text, cached);
            }
        }
        return cached;
    }
}
