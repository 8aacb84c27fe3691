package io.kraft.audit;

import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.hadoop.conf.Configuration;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * One shard of the partition replay: it reads the canonical copy of the log in offset order
 * (the seeding snapshot's records, then the segments) and replays the partitions whose
 * (topic id, partition) hash to it. The log is already in offset order, so no shuffle and no
 * sort are needed: each shard scans the files, and replays only its own partitions.
 */
final class ReplayShard implements Iterator<InternalRow> {
    private final List<FileTask> tasks;
    private final int shard;
    private final int shards;
    private final PartitionReplay replay;
    private final Configuration conf;
    private final ArrayDeque<PartitionReplay.Out> ready = new ArrayDeque<>();
    private final List<PartitionReplay.Out> out = PartitionReplay.newOut();
    private final Map<String, UTF8String> utf8 = new HashMap<>();
    private int next;
    private Iterator<Object[]> rows;
    private FileTask task;

    ReplayShard(List<FileTask> tasks, int shard, int shards, ClusterHistory history,
                boolean complete, Configuration conf) {
        this.tasks = tasks;
        this.conf = conf;
        this.shard = shard;
        this.shards = shards;
        this.replay = new PartitionReplay(history, complete);
    }

    static boolean partitionRecord(Object type) {
        return "PARTITION_RECORD".equals(type) || "PARTITION_CHANGE_RECORD".equals(type);
    }

    static int owner(String topicId, int partition, int shards) {
        return Math.floorMod(topicId.hashCode() * 31 + partition, shards);
    }

    @Override
    public boolean hasNext() {
        while (ready.isEmpty()) {
            if (rows == null || !rows.hasNext()) {
                if (next >= tasks.size()) {
                    return false;
                }
                task = tasks.get(next++);
                rows = task.snapshot() ? new FileRows(task, conf) : new OwnedRecords(task);
                continue;
            }
            Object[] r = rows.next();
            // The canonical rows: no error rows, and a snapshot's state records only.
            if (r[Columns.ERROR] != null || !partitionRecord(r[Columns.RECORD_TYPE])
                    || (task.snapshot() && (Boolean) r[Columns.IS_CONTROL])) {
                continue;
            }
            if (owner((String) r[Columns.TOPIC_ID], (Integer) r[Columns.PARTITION], shards)
                    != shard) {
                continue;
            }
            replay.step(r, out);
            ready.addAll(out);
            out.clear();
        }
        return true;
    }

    /**
     * A segment's partition records that this shard owns, as FileRows would give them (other
     * rows are not built): the owner is read from the record's first fields, and only owned
     * records are decoded whole. Control batches hold no partition records; a bad frame ends
     * the file (its CORRUPT row is not part of the canonical rows either).
     */
    private final class OwnedRecords implements Iterator<Object[]> {
        private final FileTask file;
        private final ByteBuffer buf;
        private final int end;
        private final ArrayDeque<Object[]> owned = new ArrayDeque<>();
        private int pos;

        OwnedRecords(FileTask file) {
            this.file = file;
            this.buf = LogFiles.read(file.path(), conf);
            this.end = buf.limit();
        }

        @Override
        public boolean hasNext() {
            while (owned.isEmpty() && pos < end) {
                Frames.Header h = Frames.read(buf, pos, end);
                if (h == null) {
                    pos = end;
                    break;
                }
                pos += h.size();
                if (!h.control() && h.nextOffset() > file.start()
                        && (file.end() < 0 || h.baseOffset() < file.end())) {
                    batch(h);
                }
            }
            return !owned.isEmpty();
        }

        @Override
        public Object[] next() {
            if (!hasNext()) {
                throw new NoSuchElementException();
            }
            return owned.poll();
        }

        private void batch(Frames.Header h) {
            int[] records;
            try {
                records = Frames.records(buf, h);
            } catch (Frames.Corrupt e) {
                throw new IllegalStateException(file.path() + ": " + e.getMessage());
            }
            long first = Math.max(h.baseOffset(), file.start());
            long stop = file.end() < 0 ? h.nextOffset() : Math.min(h.nextOffset(), file.end());
            for (long offset = first; offset < stop; offset++) {
                int i = (int) (offset - h.baseOffset());
                int at = records[2 * i];
                int length = records[2 * i + 1];
                if (!Records.isOwned(buf, at, length, shard, shards)) {
                    continue;
                }
                Object[] row = new Object[Columns.COUNT];
                row[Columns.NODE_ID] = file.nodeId();
                row[Columns.OFFSET] = offset;
                row[Columns.TIMESTAMP_MS] = h.firstTimestampMs();
                row[Columns.IS_CONTROL] = false;
                Records.metadata(buf, at, length, row);
                owned.add(row);
            }
        }
    }

    @Override
    public InternalRow next() {
        if (!hasNext()) {
            throw new NoSuchElementException();
        }
        PartitionReplay.Out o = ready.poll();
        return new GenericInternalRow(new Object[] {
            utf8(o.kind()), utf8(o.severity()), utf8(o.check()), o.nodeId(), o.offset(),
            o.timestampMs(), utf8(o.topicId()), utf8(o.topicName()), o.partition(),
            o.prevLeader(), o.leader(), o.leaderEpoch(), o.partitionEpoch(), o.unclean(),
            utf8(o.detail()),
        });
    }

    private UTF8String utf8(String s) {
        if (s == null) {
            return null;
        }
        // Topic ids and names repeat in every row (and are the same String objects).
        UTF8String cached = utf8.get(s);
        if (cached == null) {
            cached = UTF8String.fromString(s);
            if (utf8.size() < 100_000) {
                utf8.put(s, cached);
            }
        }
        return cached;
    }
}
