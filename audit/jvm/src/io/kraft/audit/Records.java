package io.kraft.audit;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;

/**
 * One record's bytes into the typed columns of its row, as audit/decode.py's fast path does:
 * metadata records are `u16 api key, u16 version, protobuf body` (metadata/records.py),
 * control records `u16 type, JSON body` (kraft/log/codec.py). A record that does not decode
 * gets record_type UNDECODABLE and the error text the Python decoder gives.
 */
final class Records {
    static final int LEADER_CHANGE = 2;
    private static final String PROTO_PACKAGE = "kraft.metadata.v1.";
    private static final ObjectMapper JSON = new ObjectMapper()
        .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS);

    private Records() {
    }

    /** Record types by api key: display name and protobuf message name. */
    private static String typeName(int key) {
        return switch (key) {
            case 0 -> "REGISTER_BROKER_RECORD";
            case 1 -> "UNREGISTER_BROKER_RECORD";
            case 2 -> "TOPIC_RECORD";
            case 3 -> "PARTITION_RECORD";
            case 4 -> "CONFIG_RECORD";
            case 5 -> "PARTITION_CHANGE_RECORD";
            case 9 -> "REMOVE_TOPIC_RECORD";
            case 11 -> "USER_SCRAM_CREDENTIAL_RECORD";
            case 12 -> "FEATURE_LEVEL_RECORD";
            case 14 -> "CLIENT_QUOTA_RECORD";
            case 15 -> "PRODUCER_IDS_RECORD";
            case 17 -> "BROKER_REGISTRATION_CHANGE_RECORD";
            case 18 -> "ACCESS_CONTROL_ENTRY_RECORD";
            case 19 -> "REMOVE_ACCESS_CONTROL_ENTRY_RECORD";
            case 20 -> "NO_OP_RECORD";
            case 22 -> "REMOVE_USER_SCRAM_CREDENTIAL_RECORD";
            default -> null;
        };
    }

    private static String messageName(int key) {
        return switch (key) {
            case 0 -> "RegisterBrokerRecord";
            case 1 -> "UnregisterBrokerRecord";
            case 2 -> "TopicRecord";
            case 3 -> "PartitionRecord";
            case 4 -> "ConfigRecord";
            case 5 -> "PartitionChangeRecord";
            case 9 -> "RemoveTopicRecord";
            case 11 -> "UserScramCredentialRecord";
            case 12 -> "FeatureLevelRecord";
            case 14 -> "ClientQuotaRecord";
            case 15 -> "ProducerIdsRecord";
            case 17 -> "BrokerRegistrationChangeRecord";
            case 18 -> "AccessControlEntryRecord";
            case 19 -> "RemoveAccessControlEntryRecord";
            case 20 -> "NoOpRecord";
            case 22 -> "RemoveUserScramCredentialRecord";
            default -> throw new IllegalArgumentException("api key " + key);
        };
    }

    /** A metadata record at buf[pos, pos + len) into `row`. */
    static void metadata(ByteBuffer buf, int pos, int len, Object[] row) {
        if (len < 4) {
            undecodable(row, "metadata record of " + len + " byte(s) has no header");
            return;
        }
        int key = buf.getShort(pos) & 0xFFFF;
        int version = buf.getShort(pos + 2) & 0xFFFF;
        String name = typeName(key);
        if (name == null) {
            undecodable(row, "unknown metadata record api key " + key);
            return;
        }
        if (version != 0) {
            undecodable(row, "unsupported " + name + " version " + version
                + " (this code reads 0-0)");
            return;
        }
        Object[] values = new Object[Columns.COUNT];
        try {
            body(key, new Wire(buf, pos + 4, pos + len), values);
        } catch (Wire.Corrupt e) {
            undecodable(row, "malformed " + name + " v0: Error parsing message with type '"
                + PROTO_PACKAGE + messageName(key) + "': " + e.getMessage());
            return;
        }
        for (int i = Columns.BROKER_ID; i < Columns.RECORD_JSON; i++) {
            if (values[i] != null) {
                row[i] = values[i];
            }
        }
        row[Columns.RECORD_TYPE] = name;
        row[Columns.RECORD_VERSION] = 0;
    }

    /**
     * Whether the record is a version-0 partition record whose (topic id, partition) the
     * shard owns (ReplayShard.owner): a scan of its fields that decodes only those two.
     * Anything that does not parse is owned by no shard (the whole decoder fails on it too).
     */
    static boolean isOwned(ByteBuffer buf, int pos, int len, int shard, int shards) {
        if (len < 4 || buf.getShort(pos + 2) != 0) {
            return false;
        }
        int key = buf.getShort(pos) & 0xFFFF;
        if (key != 3 && key != 5) {
            return false;
        }
        Wire w = new Wire(buf, pos + 4, pos + len);
        int partition = 0;
        String topic = "";
        try {
            while (w.more()) {
                w.next();
                if (is(w, 1, Wire.VARINT)) {
                    partition = (int) w.varint();
                } else if (is(w, 2, Wire.LEN)) {
                    topic = w.string();
                } else {
                    w.skip();
                }
            }
        } catch (Wire.Corrupt e) {
            return false;
        }
        return ReplayShard.owner(topic, partition, shards) == shard;
    }

    private static void undecodable(Object[] row, String error) {
        row[Columns.RECORD_TYPE] = "UNDECODABLE";
        row[Columns.ERROR] = error;
    }

    private static void body(int key, Wire w, Object[] v) throws Wire.Corrupt {
        switch (key) {
            case 0 -> registerBroker(w, v);
            case 1 -> unregisterBroker(w, v);
            case 2 -> topic(w, v);
            case 3 -> partition(w, v);
            case 4 -> config(w, v);
            case 5 -> partitionChange(w, v);
            case 9 -> removeTopic(w, v);
            case 11 -> SecurityRecords.scramCredential(w, v);
            case 12 -> featureLevel(w);
            case 14 -> SecurityRecords.clientQuota(w, v);
            case 17 -> registrationChange(w, v);
            case 18 -> SecurityRecords.accessControlEntry(w, v);
            case 19 -> SecurityRecords.removeAccessControlEntry(w, v);
            case 22 -> SecurityRecords.removeScramCredential(w, v);
            default -> noOp(w);
        }
    }

    static boolean is(Wire w, int field, int type) {
        return w.field() == field && w.type() == type;
    }

    private static void partitionChange(Wire w, Object[] v) throws Wire.Corrupt {
        int partition = 0;
        String topic = "";
        IntList isr = null;
        IntList replicas = null;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.VARINT)) {
                partition = (int) w.varint();
            } else if (is(w, 2, Wire.LEN)) {
                topic = w.string();
            } else if (is(w, 3, Wire.LEN)) {
                isr = brokerIds(w.message(), isr);
            } else if (is(w, 4, Wire.VARINT)) {
                v[Columns.LEADER] = (int) w.varint();
            } else if (is(w, 5, Wire.LEN)) {
                replicas = brokerIds(w.message(), replicas);
            } else if (is(w, 6, Wire.LEN) || is(w, 7, Wire.LEN)) {
                brokerIds(w.message(), null);
            } else if (is(w, 8, Wire.VARINT)) {
                v[Columns.LEADER_RECOVERY_STATE] = (int) w.varint();
            } else {
                w.skip();
            }
        }
        v[Columns.TOPIC_ID] = topic;
        v[Columns.PARTITION] = partition;
        v[Columns.ISR] = ints(isr);
        v[Columns.REPLICAS] = ints(replicas);
    }

    /** A BrokerIdList; a repeated occurrence merges into the earlier one (protobuf's rule). */
    private static IntList brokerIds(Wire w, IntList into) throws Wire.Corrupt {
        IntList ids = into == null ? new IntList() : into;
        while (w.more()) {
            w.next();
            if (w.field() == 1 && (w.type() == Wire.VARINT || w.type() == Wire.LEN)) {
                w.int32s(ids);
            } else {
                w.skip();
            }
        }
        return ids;
    }

    private static void partition(Wire w, Object[] v) throws Wire.Corrupt {
        int partition = 0;
        int leader = 0;
        int recovery = 0;
        int leaderEpoch = 0;
        int partitionEpoch = 0;
        String topic = "";
        IntList replicas = new IntList();
        IntList isr = new IntList();
        IntList other = new IntList();
        while (w.more()) {
            w.next();
            int f = w.field();
            boolean list = w.type() == Wire.VARINT || w.type() == Wire.LEN;
            if (is(w, 1, Wire.VARINT)) {
                partition = (int) w.varint();
            } else if (is(w, 2, Wire.LEN)) {
                topic = w.string();
            } else if (f == 3 && list) {
                w.int32s(replicas);
            } else if (f == 4 && list) {
                w.int32s(isr);
            } else if ((f == 5 || f == 6) && list) {
                w.int32s(other);
            } else if (is(w, 7, Wire.VARINT)) {
                leader = (int) w.varint();
            } else if (is(w, 8, Wire.VARINT)) {
                recovery = (int) w.varint();
            } else if (is(w, 9, Wire.VARINT)) {
                leaderEpoch = (int) w.varint();
            } else if (is(w, 10, Wire.VARINT)) {
                partitionEpoch = (int) w.varint();
            } else {
                w.skip();
            }
        }
        v[Columns.TOPIC_ID] = topic;
        v[Columns.PARTITION] = partition;
        v[Columns.LEADER] = leader;
        v[Columns.REPLICAS] = ints(replicas);
        v[Columns.ISR] = ints(isr);
        v[Columns.LEADER_EPOCH] = leaderEpoch;
        v[Columns.PARTITION_EPOCH] = partitionEpoch;
        v[Columns.LEADER_RECOVERY_STATE] = recovery;
    }

    private static void registerBroker(Wire w, Object[] v) throws Wire.Corrupt {
        int broker = 0;
        long epoch = 0;
        String incarnation = "";
        boolean fenced = true;  // absent: true, Kafka's default
        boolean shutdown = false;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.VARINT)) {
                broker = (int) w.varint();
            } else if (is(w, 2, Wire.LEN)) {
                incarnation = w.string();
            } else if (is(w, 3, Wire.VARINT)) {
                epoch = w.varint();
            } else if (is(w, 4, Wire.LEN)) {
                endpoint(w.message());
            } else if (is(w, 5, Wire.LEN)) {
                w.string();
            } else if (is(w, 6, Wire.VARINT)) {
                fenced = w.varint() != 0;
            } else if (is(w, 7, Wire.VARINT)) {
                shutdown = w.varint() != 0;
            } else {
                w.skip();
            }
        }
        v[Columns.BROKER_ID] = broker;
        v[Columns.BROKER_EPOCH] = epoch;
        v[Columns.INCARNATION_ID] = incarnation;
        v[Columns.FENCED] = fenced;
        v[Columns.IN_CONTROLLED_SHUTDOWN] = shutdown;
    }

    /** A BrokerEndpoint: not a column, but parsed so that its errors are found. */
    private static void endpoint(Wire w) throws Wire.Corrupt {
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN) || is(w, 2, Wire.LEN)) {
                w.string();
            } else {
                w.skip();
            }
        }
    }

    private static void registrationChange(Wire w, Object[] v) throws Wire.Corrupt {
        int broker = 0;
        long epoch = 0;
        int fenced = 0;
        int shutdown = 0;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.VARINT)) {
                broker = (int) w.varint();
            } else if (is(w, 2, Wire.VARINT)) {
                epoch = w.varint();
            } else if (is(w, 3, Wire.VARINT)) {
                fenced = (int) w.varint();
            } else if (is(w, 4, Wire.VARINT)) {
                shutdown = (int) w.varint();
            } else {
                w.skip();
            }
        }
        v[Columns.BROKER_ID] = broker;
        v[Columns.BROKER_EPOCH] = epoch;
        // -1 unfence, 0 no change, 1 fence
        v[Columns.FENCED] = fenced == 0 ? null : fenced == 1;
        v[Columns.IN_CONTROLLED_SHUTDOWN] = shutdown != 0 ? Boolean.TRUE : null;
    }

    private static void unregisterBroker(Wire w, Object[] v) throws Wire.Corrupt {
        int broker = 0;
        long epoch = 0;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.VARINT)) {
                broker = (int) w.varint();
            } else if (is(w, 2, Wire.VARINT)) {
                epoch = w.varint();
            } else {
                w.skip();
            }
        }
        v[Columns.BROKER_ID] = broker;
        v[Columns.BROKER_EPOCH] = epoch;
    }

    private static void topic(Wire w, Object[] v) throws Wire.Corrupt {
        String name = "";
        String id = "";
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                name = w.string();
            } else if (is(w, 2, Wire.LEN)) {
                id = w.string();
            } else {
                w.skip();
            }
        }
        v[Columns.TOPIC_ID] = id;
        v[Columns.TOPIC_NAME] = name;
    }

    private static void removeTopic(Wire w, Object[] v) throws Wire.Corrupt {
        String id = "";
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                id = w.string();
            } else {
                w.skip();
            }
        }
        v[Columns.TOPIC_ID] = id;
    }

    private static void config(Wire w, Object[] v) throws Wire.Corrupt {
        int type = 0;
        String resource = "";
        String name = "";
        String value = null;  // absent: the key is deleted
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.VARINT)) {
                type = (int) w.varint();
            } else if (is(w, 2, Wire.LEN)) {
                resource = w.string();
            } else if (is(w, 3, Wire.LEN)) {
                name = w.string();
            } else if (is(w, 4, Wire.LEN)) {
                value = w.string();
            } else {
                w.skip();
            }
        }
        v[Columns.CONFIG_RESOURCE_TYPE] = type;
        v[Columns.CONFIG_RESOURCE_NAME] = resource;
        v[Columns.CONFIG_KEY] = name;
        v[Columns.CONFIG_VALUE] = value;
    }

    private static void featureLevel(Wire w) throws Wire.Corrupt {
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                w.string();
            } else {
                w.skip();
            }
        }
    }

    private static void noOp(Wire w) throws Wire.Corrupt {
        while (w.more()) {
            w.next();
            w.skip();
        }
    }

    static int[] ints(IntList list) {
        return list == null ? null : list.toArray();
    }

    // -- control records ------------------------------------------------------------------

    static String controlName(int type) {
        return switch (type) {
            case 2 -> "LEADER_CHANGE";
            case 3 -> "SNAPSHOT_HEADER";
            case 4 -> "SNAPSHOT_FOOTER";
            default -> "CONTROL_" + type;
        };
    }

    /** A control record's type and JSON object; ControlError when it is not one. */
    static JsonNode controlBody(byte[] data) throws ControlError {
        if (data.length < 2) {
            throw new ControlError("control record shorter than its type field");
        }
        JsonNode body;
        try {
            String text = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT)
                .decode(ByteBuffer.wrap(data, 2, data.length - 2)).toString();
            body = JSON.readTree(text);
        } catch (CharacterCodingException e) {
            throw new ControlError("control record body is not JSON: not UTF-8");
        } catch (JsonProcessingException e) {
            throw new ControlError("control record body is not JSON: "
                + e.getOriginalMessage());
        }
        if (body == null || !body.isObject()) {
            throw new ControlError("control record body is not a JSON object");
        }
        return body;
    }

    static int controlType(byte[] data) {
        return ((data[0] & 0xFF) << 8) | (data[1] & 0xFF);
    }

    /** A control record into `row`. */
    static void control(byte[] data, Object[] row) {
        JsonNode body;
        try {
            body = controlBody(data);
        } catch (ControlError e) {
            undecodable(row, e.getMessage());
            return;
        }
        int type = controlType(data);
        row[Columns.RECORD_TYPE] = controlName(type);
        row[Columns.RECORD_VERSION] = 0;
        if (type == LEADER_CHANGE) {
            JsonNode leader = body.get("leaderId");
            if (leader != null && leader.isIntegralNumber() && leader.canConvertToInt()) {
                row[Columns.QUORUM_LEADER_ID] = leader.intValue();
            }
            JsonNode voters = body.get("voters");
            if (voters != null && voters.isArray()) {
                IntList ids = new IntList();
                boolean ints = true;
                for (JsonNode voter : voters) {
                    ints &= voter.isIntegralNumber() && voter.canConvertToInt();
                    ids.add(voter.intValue());
                }
                if (ints) {
                    row[Columns.VOTERS] = ints(ids);
                }
            }
        }
    }

    /** Why a control record does not decode (kraft.log.codec.decode_control_record). */
    static final class ControlError extends Exception {
        ControlError(String reason) {
            super(reason, null, false, false);
        }
    }
}
