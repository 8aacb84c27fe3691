package io.kraft.audit;

import com.fasterxml.jackson.databind.JsonNode;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
import org.apache.hadoop.conf.Configuration;

/**
 * The rows of one segment or snapshot file, batch by batch, exactly as audit/decode.py's
 * read_file gives them with includeJson=false: one row per record (or per data batch), and
 * one CORRUPT row where a bad frame stops the file, naming the byte and why.
 */
final class FileRows implements Iterator<Object[]> {
    private static final int SNAPSHOT_HEADER = 3;
    private static final int SNAPSHOT_FOOTER = 4;

    private final FileTask task;
    private final ByteBuffer buf;
    private final int end;
    private final ArrayDeque<Object[]> ready = new ArrayDeque<>();
    private int pos;
    private long nextOffset;
    private boolean done;
    private List<Frames.Header> snapshotBatches;  // a verified snapshot's frames
    private int snapshotIndex;

    /** @param conf the Hadoop configuration for URIs (LogFiles); unused for local paths */
    FileRows(FileTask task, Configuration conf) {
        this.task = task;
        this.buf = LogFiles.read(task.path(), conf);
        this.end = buf.limit();
        this.nextOffset = task.baseOffset();
        if (task.snapshot()) {
            try {
                snapshotBatches = verifySnapshot();
            } catch (Frames.Corrupt e) {
                ready.add(corrupt(task.baseOffset(), e.position, e.reason));
                done = true;
            }
        } else if (end == 0) {
            done = true;  // an empty segment has no rows, not even an error
        }
    }

    @Override
    public boolean hasNext() {
        while (ready.isEmpty() && !done) {
            if (task.snapshot()) {
                nextSnapshotBatch();
            } else {
                nextSegmentBatch();
            }
        }
        return !ready.isEmpty();
    }

    @Override
    public Object[] next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        return ready.poll();
    }

    private void nextSegmentBatch() {
        if (pos >= end) {
            done = true;
            return;
        }
        Frames.Header h = Frames.read(buf, pos, end);
        if (h == null) {
            Frames.Corrupt e = Frames.error(buf, pos, end);
            String reason = Frames.tornTail(buf, pos, end) ? "torn tail: " + e.reason : e.reason;
            ready.add(corrupt(nextOffset, e.position, reason));
            done = true;
            return;
        }
        pos += h.size();
        nextOffset = h.nextOffset();
        if (h.nextOffset() <= task.start() || (task.end() >= 0 && h.baseOffset() >= task.end())) {
            return;
        }
        addBatch(h);
    }

    private void nextSnapshotBatch() {
        if (snapshotIndex >= snapshotBatches.size()) {
            done = true;
            return;
        }
        addBatch(snapshotBatches.get(snapshotIndex++));
    }

    /** Rows for one batch (decode._add_batch). */
    private void addBatch(Frames.Header h) {
        boolean snapshot = task.snapshot();
        long first = h.baseOffset();
        long stop = h.nextOffset();
        if (!snapshot) {
            first = Math.max(first, task.start());
            if (task.end() >= 0) {
                stop = Math.min(stop, task.end());
            }
        }
        if (stop - first <= 0) {
            return;
        }
        boolean oneRow = task.batchesOnly() && !h.control() && !snapshot;
        if (oneRow) {
            Object[] row = common(h, h.baseOffset(), null);
            row[Columns.RECORD_TYPE] = "DATA_BATCH";
            ready.add(row);
            return;
        }
        int[] records;
        try {
            records = Frames.records(buf, h);
        } catch (Frames.Corrupt e) {
            // As in the Python reader, a bad record frame inside a segment fails the task.
            throw new IllegalStateException(task.path() + ": " + e.getMessage());
        }
        for (long offset = first; offset < stop; offset++) {
            int i = (int) (offset - h.baseOffset());
            Object[] row = snapshot ? common(h, task.baseOffset() - 1, offset)
                : common(h, offset, null);
            int at = records[2 * i];
            int length = records[2 * i + 1];
            if (h.control()) {
                Records.control(Frames.bytes(buf, at, length), row);
            } else {
                Records.metadata(buf, at, length, row);
            }
            ready.add(row);
        }
    }

    private Object[] common(Frames.Header h, long offset, Long recordIndex) {
        Object[] row = new Object[Columns.COUNT];
        row[Columns.NODE_ID] = task.nodeId();
        row[Columns.SOURCE_FILE] = task.path();
        row[Columns.SOURCE_KIND] = task.kind();
        row[Columns.OFFSET] = offset;
        row[Columns.RECORD_INDEX] = recordIndex;
        row[Columns.EPOCH] = h.epoch();
        row[Columns.BATCH_BASE_OFFSET] = h.baseOffset();
        row[Columns.BATCH_LAST_OFFSET] = h.nextOffset() - 1;
        row[Columns.BATCH_CRC] = h.crc();
        row[Columns.BATCH_POSITION] = (long) h.position();
        row[Columns.TIMESTAMP_MS] = h.firstTimestampMs();
        row[Columns.IS_CONTROL] = h.control();
        return row;
    }

    private Object[] corrupt(long offset, long position, String reason) {
        Object[] row = new Object[Columns.COUNT];
        row[Columns.NODE_ID] = task.nodeId();
        row[Columns.SOURCE_FILE] = task.path();
        row[Columns.SOURCE_KIND] = task.kind();
        row[Columns.OFFSET] = offset;
        row[Columns.BATCH_POSITION] = position;
        row[Columns.RECORD_TYPE] = "CORRUPT";
        row[Columns.ERROR] = reason + " (byte " + position + ")";
        return row;
    }

    /** Every frame of a whole snapshot, checked as kraft.log.snapshots.verify_snapshot_bytes
     * does: CRCs, offsets from 0, one epoch, a header first and a footer last. */
    private List<Frames.Header> verifySnapshot() throws Frames.Corrupt {
        List<Frames.Header> headers = new ArrayList<>();
        int at = 0;
        while (at < end) {
            Frames.Header h = Frames.read(buf, at, end);
            if (h == null) {
                throw Frames.error(buf, at, end);
            }
            headers.add(h);
            at += h.size();
        }
        if (headers.isEmpty()) {
            throw new Frames.Corrupt("empty snapshot: no header batch", 0);
        }
        long offset = 0;
        int last = headers.size() - 1;
        for (int i = 0; i < headers.size(); i++) {
            Frames.Header h = headers.get(i);
            if (h.baseOffset() != offset) {
                throw new Frames.Corrupt("batch starts at offset " + h.baseOffset()
                    + ", expected " + offset, h.position());
            }
            if (h.epoch() != task.snapshotEpoch()) {
                throw new Frames.Corrupt("batch epoch " + h.epoch() + " differs from the "
                    + "snapshot epoch " + task.snapshotEpoch(), h.position());
            }
            if (0 < i && i < last && h.control()) {
                throw new Frames.Corrupt("control batch inside the snapshot", h.position());
            }
            offset = h.nextOffset();
        }
        int kind = singleControl(headers.get(0));
        if (kind != SNAPSHOT_HEADER) {
            throw new Frames.Corrupt("first batch is control type " + kind + ", not a header", 0);
        }
        if (last == 0) {
            throw new Frames.Corrupt("snapshot ends after its header: no footer", end);
        }
        kind = singleControl(headers.get(last));
        if (kind != SNAPSHOT_FOOTER) {
            throw new Frames.Corrupt("last batch is control type " + kind + ", not a footer",
                headers.get(last).position());
        }
        for (Frames.Header h : headers) {
            Frames.records(buf, h);  // decode_batches: every record frame whole
        }
        return headers;
    }

    private int singleControl(Frames.Header h) throws Frames.Corrupt {
        if (!h.control() || h.recordCount() != 1) {
            throw new Frames.Corrupt("expected a control batch of one record", h.position());
        }
        int[] record = Frames.records(buf, h);
        byte[] data = Frames.bytes(buf, record[0], record[1]);
        try {
            JsonNode body = Records.controlBody(data);
            assert body != null;
        } catch (Records.ControlError e) {
            throw new Frames.Corrupt(e.getMessage(), h.position());
        }
        return Records.controlType(data);
    }
}
