package io.kraft.audit;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * The partition rules of the audit (docs/audit.md), replayed record by record in offset order
 * for the partitions one shard owns. The same rules, in the same words, as the step-by-step
 * replay this replaced (tests/audit/reference_replay.py keeps it to compare against).
 * Output rows follow audit/replay.py OUT_SCHEMA: a finding or a leader change.
 */
final class PartitionReplay {
    static final String VIOLATION = "violation";
    static final String WARNING = "warning";

    /** A partition's state after a record. */
    private record State(int leader, int[] replicas, int[] isr, int leaderEpoch,
                         int partitionEpoch) {
    }

    private record Key(String topicId, int partition) {
    }

    /** One output row, in OUT_SCHEMA's order. */
    record Out(String kind, String severity, String check, int nodeId, long offset,
               long timestampMs, String topicId, String topicName, int partition,
               Integer prevLeader, Integer leader, Integer leaderEpoch, Integer partitionEpoch,
               Boolean unclean, String detail) {
    }

    private final ClusterHistory history;
    private final boolean complete;
    private final Map<Key, State> states = new HashMap<>();

    PartitionReplay(ClusterHistory history, boolean complete) {
        this.history = history;
        this.complete = complete;
    }

    /** One PARTITION_RECORD or PARTITION_CHANGE_RECORD row (Columns indexes). */
    void step(Object[] r, List<Out> out) {
        long offset = (Long) r[Columns.OFFSET];
        String tid = (String) r[Columns.TOPIC_ID];
        int partition = (Integer) r[Columns.PARTITION];
        String type = (String) r[Columns.RECORD_TYPE];
        boolean create = type.equals("PARTITION_RECORD");
        ClusterHistory.Topic topic = history.topic(tid);
        boolean alive = topic != null && topic.aliveAt(offset);
        if (!alive && (complete || topic != null)) {
            finding(out, r, VIOLATION, "unknown-topic", type + " names topic id " + tid
                + ", which does not exist at offset " + offset);
        }
        Key key = new Key(tid, partition);
        State prev = states.get(key);
        State next;
        boolean leaderSet;
        if (create) {
            next = new State((Integer) r[Columns.LEADER], (int[]) r[Columns.REPLICAS],
                (int[]) r[Columns.ISR], (Integer) r[Columns.LEADER_EPOCH],
                (Integer) r[Columns.PARTITION_EPOCH]);
            if (prev != null) {
                if (next.leaderEpoch() < prev.leaderEpoch()) {
                    finding(out, r, VIOLATION, "leader-epoch-decrease", "leader_epoch "
                        + next.leaderEpoch() + " after " + prev.leaderEpoch());
                }
                if (next.partitionEpoch() < prev.partitionEpoch()) {
                    finding(out, r, VIOLATION, "partition-epoch-decrease", "partition_epoch "
                        + next.partitionEpoch() + " after " + prev.partitionEpoch());
                }
            }
            leaderSet = true;
        } else {
            if (prev == null) {
                if (complete) {
                    finding(out, r, VIOLATION, "unknown-partition",
                        "PartitionChangeRecord for a partition never created");
                }
                return;
            }
            Integer leader = (Integer) r[Columns.LEADER];
            int[] isr = (int[]) r[Columns.ISR];
            int[] replicas = (int[]) r[Columns.REPLICAS];
            leaderSet = leader != null;
            next = new State(leaderSet ? leader : prev.leader(),
                replicas != null ? replicas : prev.replicas(), isr != null ? isr : prev.isr(),
                prev.leaderEpoch() + (leaderSet ? 1 : 0), prev.partitionEpoch() + 1);
        }
        states.put(key, next);
        int leader = next.leader();
        if (leader != -1 && !contains(next.isr(), leader)) {
            finding(out, r, VIOLATION, "leader-not-in-isr", "leader " + leader
                + " is not in the ISR " + Arrays.toString(next.isr()));
        }
        if (!subset(next.isr(), next.replicas())) {
            finding(out, r, VIOLATION, "isr-not-subset-of-replicas", "ISR "
                + Arrays.toString(next.isr()) + " is not within the replicas "
                + Arrays.toString(next.replicas()));
        }
        if (!leaderSet) {
            return;
        }
        boolean unclean = false;
        if (leader != -1) {
            String state = history.brokerState(leader, offset);
            // Without the history before the log start, a broker with no event yet is
            // unknown, not unregistered: it may have registered below the log start.
            if (!state.equals("unfenced") && (complete || !state.equals("unregistered"))) {
                finding(out, r, VIOLATION, "leader-on-fenced-broker", "leader " + leader
                    + " is " + state + " at this offset");
            }
            Integer recovery = (Integer) r[Columns.LEADER_RECOVERY_STATE];
            boolean recovering = !create && recovery != null && recovery == 1;
            if (prev != null && prev.leader() != leader
                    && (!contains(prev.isr(), leader) || recovering)) {
                unclean = true;
                TreeSet<Integer> lost = new TreeSet<>();
                for (int replica : prev.isr()) {
                    lost.add(replica);
                }
                lost.remove(leader);
                finding(out, r, WARNING, "unclean-election", "leader " + leader
                    + " was not in the ISR " + Arrays.toString(prev.isr())
                    + "; replicas that lost data: " + lost);
            }
        }
        if (prev == null || prev.leader() != leader || !create) {
            out.add(new Out("leader_change", null, null, (Integer) r[Columns.NODE_ID], offset,
                (Long) r[Columns.TIMESTAMP_MS], tid, topicName(tid), partition,
                prev == null ? null : prev.leader(), leader, next.leaderEpoch(),
                next.partitionEpoch(), unclean, null));
        }
    }

    private String topicName(String tid) {
        ClusterHistory.Topic topic = history.topic(tid);
        return topic == null ? "?" : topic.name();
    }

    private void finding(List<Out> out, Object[] r, String severity, String check,
                         String detail) {
        String tid = (String) r[Columns.TOPIC_ID];
        String name = topicName(tid);
        int partition = (Integer) r[Columns.PARTITION];
        out.add(new Out("finding", severity, check, (Integer) r[Columns.NODE_ID],
            (Long) r[Columns.OFFSET], (Long) r[Columns.TIMESTAMP_MS], tid, name, partition,
            null, null, null, null, null, name + "-" + partition + ": " + detail));
    }

    private static boolean contains(int[] values, int value) {
        for (int v : values) {
            if (v == value) {
                return true;
            }
        }
        return false;
    }

    private static boolean subset(int[] part, int[] whole) {
        for (int v : part) {
            if (!contains(whole, v)) {
                return false;
            }
        }
        return true;
    }

    static List<Out> newOut() {
        return new ArrayList<>();
    }
}
