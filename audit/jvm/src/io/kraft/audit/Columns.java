package io.kraft.audit;

import org.apache.spark.sql.types.StructType;

/** The columns of the kraft-metadata rows, in audit/decode.py's order (COLUMNS there). */
final class Columns {
    static final String[] NAMES = {
        "node_id", "source_file", "source_kind", "offset", "record_index",
        "epoch", "batch_base_offset", "batch_last_offset", "batch_crc", "batch_position",
        "timestamp_ms", "is_control",
        "record_type", "record_version", "quorum_leader_id", "voters",
        "broker_id", "broker_epoch", "incarnation_id", "fenced", "in_controlled_shutdown",
        "topic_id", "topic_name", "partition", "leader", "replicas", "isr", "leader_epoch",
        "partition_epoch", "leader_recovery_state",
        "config_resource_type", "config_resource_name", "config_key", "config_value",
        "acl_id", "acl_resource_type", "acl_resource_name", "acl_pattern_type", "acl_principal",
        "acl_host", "acl_operation", "acl_permission_type",
        "scram_user", "scram_mechanism", "scram_iterations",
        "quota_entity_types", "quota_entity_names", "quota_key", "quota_value", "quota_remove",
        "record_json", "error",
    };
    static final int NODE_ID = 0;
    static final int SOURCE_FILE = 1;
    static final int SOURCE_KIND = 2;
    static final int OFFSET = 3;
    static final int RECORD_INDEX = 4;
    static final int EPOCH = 5;
    static final int BATCH_BASE_OFFSET = 6;
    static final int BATCH_LAST_OFFSET = 7;
    static final int BATCH_CRC = 8;
    static final int BATCH_POSITION = 9;
    static final int TIMESTAMP_MS = 10;
    static final int IS_CONTROL = 11;
    static final int RECORD_TYPE = 12;
    static final int RECORD_VERSION = 13;
    static final int QUORUM_LEADER_ID = 14;
    static final int VOTERS = 15;
    static final int BROKER_ID = 16;
    static final int BROKER_EPOCH = 17;
    static final int INCARNATION_ID = 18;
    static final int FENCED = 19;
    static final int IN_CONTROLLED_SHUTDOWN = 20;
    static final int TOPIC_ID = 21;
    static final int TOPIC_NAME = 22;
    static final int PARTITION = 23;
    static final int LEADER = 24;
    static final int REPLICAS = 25;
    static final int ISR = 26;
    static final int LEADER_EPOCH = 27;
    static final int PARTITION_EPOCH = 28;
    static final int LEADER_RECOVERY_STATE = 29;
    static final int CONFIG_RESOURCE_TYPE = 30;
    static final int CONFIG_RESOURCE_NAME = 31;
    static final int CONFIG_KEY = 32;
    static final int CONFIG_VALUE = 33;
    static final int ACL_ID = 34;
    static final int ACL_RESOURCE_TYPE = 35;
    static final int ACL_RESOURCE_NAME = 36;
    static final int ACL_PATTERN_TYPE = 37;
    static final int ACL_PRINCIPAL = 38;
    static final int ACL_HOST = 39;
    static final int ACL_OPERATION = 40;
    static final int ACL_PERMISSION_TYPE = 41;
    static final int SCRAM_USER = 42;
    static final int SCRAM_MECHANISM = 43;
    static final int SCRAM_ITERATIONS = 44;
    static final int QUOTA_ENTITY_TYPES = 45;
    static final int QUOTA_ENTITY_NAMES = 46;
    static final int QUOTA_KEY = 47;
    static final int QUOTA_VALUE = 48;
    static final int QUOTA_REMOVE = 49;
    static final int RECORD_JSON = 50;
    static final int ERROR = 51;
    static final int COUNT = NAMES.length;

    private Columns() {
    }

    /** The schema from the Python side's DDL, checked against the indexes above. */
    static StructType schema(String ddl) {
        StructType schema = StructType.fromDDL(ddl);
        String[] names = schema.fieldNames();
        if (!java.util.Arrays.equals(names, NAMES)) {
            throw new IllegalArgumentException("kraft-audit jar and audit/decode.py disagree on "
                + "the columns: " + String.join(",", names));
        }
        return schema;
    }
}
