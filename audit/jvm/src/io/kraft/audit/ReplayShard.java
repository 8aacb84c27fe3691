package io.kraft.audit;

import java.util.ArrayDeque;
import java.util.Iterator;
import java.util.List;
import java.util.NoSuchElementException;
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
    private final ArrayDeque<PartitionReplay.Out> ready = new ArrayDeque<>();
    private final List<PartitionReplay.Out> out = PartitionReplay.newOut();
    private int next;
    private FileRows rows;
    private FileTask task;

    ReplayShard(List<FileTask> tasks, int shard, int shards, ClusterHistory history,
                boolean complete) {
        this.tasks = tasks;
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
                rows = new FileRows(task);
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

    private static UTF8String utf8(String s) {
        return s == null ? null : UTF8String.fromString(s);
    }
}
