package io.kraft.audit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;

/**
 * What the driver's broker and topic replay learned (audit/replay.py ClusterHistory), for the
 * partition replay: each broker's state from each offset on, and each topic's lifetime.
 * Handed over as JSON: {"brokers": {"4": [[offset, state], ...]}, "topics": [[id, name,
 * created, removed or null], ...]}.
 */
final class ClusterHistory implements Serializable {
    private static final long serialVersionUID = 1L;

    record Topic(String name, long created, long removed) implements Serializable {
        boolean aliveAt(long offset) {
            return created <= offset && (removed < 0 || offset < removed);
        }
    }

    private final Map<Integer, long[]> brokerOffsets = new HashMap<>();
    private final Map<Integer, String[]> brokerStates = new HashMap<>();
    private final Map<String, Topic> topics = new HashMap<>();

    static ClusterHistory parse(String json) {
        try {
            JsonNode root = new ObjectMapper().readTree(json);
            ClusterHistory h = new ClusterHistory();
            Iterator<Map.Entry<String, JsonNode>> brokers = root.get("brokers").fields();
            while (brokers.hasNext()) {
                Map.Entry<String, JsonNode> entry = brokers.next();
                JsonNode events = entry.getValue();
                long[] offsets = new long[events.size()];
                String[] states = new String[events.size()];
                for (int i = 0; i < offsets.length; i++) {
                    offsets[i] = events.get(i).get(0).asLong();
                    states[i] = events.get(i).get(1).asText();
                }
                int broker = Integer.parseInt(entry.getKey());
                h.brokerOffsets.put(broker, offsets);
                h.brokerStates.put(broker, states);
            }
            for (JsonNode t : root.get("topics")) {
                long removed = t.get(3).isNull() ? -1 : t.get(3).asLong();
                h.topics.put(t.get(0).asText(), new Topic(t.get(1).asText(), t.get(2).asLong(),
                    removed));
            }
            return h;
        } catch (java.io.IOException e) {
            throw new IllegalArgumentException("bad cluster history: " + e.getMessage(), e);
        }
    }

    Topic topic(String id) {
        return topics.get(id);
    }

    /** The broker's state at `offset`: from its last event at or before it (bisect_right). */
    String brokerState(int broker, long offset) {
        long[] offsets = brokerOffsets.get(broker);
        if (offsets == null) {
            return "unregistered";
        }
        int i = Arrays.binarySearch(offsets, offset);
        if (i >= 0) {
            while (i + 1 < offsets.length && offsets[i + 1] == offset) {
                i++;  // several events at one offset: the last one holds
            }
        } else {
            i = -i - 2;
        }
        return i < 0 ? "unregistered" : brokerStates.get(broker)[i];
    }
}
