package io.kraft.audit;

import java.util.ArrayList;
import java.util.List;

/**
 * The security records' bodies into their columns, as audit/decode.py's fast path reads them:
 * ACLs (metadata/rpc/acls.proto, KIP-801), SCRAM credentials and client quotas
 * (metadata/rpc/security_records.proto, KIP-554 and KIP-546). A credential's salt and keys are
 * skipped, never read into a value: no column holds a secret. int32 fields as protobuf reads
 * them (the low 32 bits of the varint).
 */
final class SecurityRecords {
    private SecurityRecords() {
    }

    private static boolean is(Wire w, int field, int type) {
        return Records.is(w, field, type);
    }

    /** An AccessControlEntryRecord (api key 18). */
    static void accessControlEntry(Wire w, Object[] v) throws Wire.Corrupt {
        String id = "";
        String name = "";
        String principal = "";
        String host = "";
        int resourceType = 0;
        int patternType = 0;
        int operation = 0;
        int permission = 0;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                id = w.string();
            } else if (is(w, 2, Wire.VARINT)) {
                resourceType = (int) w.varint();
            } else if (is(w, 3, Wire.LEN)) {
                name = w.string();
            } else if (is(w, 4, Wire.VARINT)) {
                patternType = (int) w.varint();
            } else if (is(w, 5, Wire.LEN)) {
                principal = w.string();
            } else if (is(w, 6, Wire.LEN)) {
                host = w.string();
            } else if (is(w, 7, Wire.VARINT)) {
                operation = (int) w.varint();
            } else if (is(w, 8, Wire.VARINT)) {
                permission = (int) w.varint();
            } else {
                w.skip();
            }
        }
        v[Columns.ACL_ID] = id;
        v[Columns.ACL_RESOURCE_TYPE] = resourceType;
        v[Columns.ACL_RESOURCE_NAME] = name;
        v[Columns.ACL_PATTERN_TYPE] = patternType;
        v[Columns.ACL_PRINCIPAL] = principal;
        v[Columns.ACL_HOST] = host;
        v[Columns.ACL_OPERATION] = operation;
        v[Columns.ACL_PERMISSION_TYPE] = permission;
    }

    /** A RemoveAccessControlEntryRecord (api key 19). */
    static void removeAccessControlEntry(Wire w, Object[] v) throws Wire.Corrupt {
        String id = "";
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                id = w.string();
            } else {
                w.skip();
            }
        }
        v[Columns.ACL_ID] = id;
    }

    /**
     * A UserScramCredentialRecord (api key 11): user, mechanism, iterations. Salt (3), stored
     * key (4) and server key (5) are bytes, which protobuf only bounds: skipping them checks
     * the same.
     */
    static void scramCredential(Wire w, Object[] v) throws Wire.Corrupt {
        String name = "";
        int mechanism = 0;
        int iterations = 0;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                name = w.string();
            } else if (is(w, 2, Wire.VARINT)) {
                mechanism = (int) w.varint();
            } else if (is(w, 6, Wire.VARINT)) {
                iterations = (int) w.varint();
            } else {
                w.skip();
            }
        }
        v[Columns.SCRAM_USER] = name;
        v[Columns.SCRAM_MECHANISM] = mechanism;
        v[Columns.SCRAM_ITERATIONS] = iterations;
    }

    /** A RemoveUserScramCredentialRecord (api key 22). */
    static void removeScramCredential(Wire w, Object[] v) throws Wire.Corrupt {
        String name = "";
        int mechanism = 0;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                name = w.string();
            } else if (is(w, 2, Wire.VARINT)) {
                mechanism = (int) w.varint();
            } else {
                w.skip();
            }
        }
        v[Columns.SCRAM_USER] = name;
        v[Columns.SCRAM_MECHANISM] = mechanism;
    }

    /** A ClientQuotaRecord (api key 14); each entity part in order, a null name the default. */
    static void clientQuota(Wire w, Object[] v) throws Wire.Corrupt {
        List<String> types = new ArrayList<>();
        List<String> names = new ArrayList<>();
        String key = "";
        double value = 0.0;
        boolean remove = false;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                entity(w.message(), types, names);
            } else if (is(w, 2, Wire.LEN)) {
                key = w.string();
            } else if (is(w, 3, Wire.FIXED64)) {
                value = w.float64();
            } else if (is(w, 4, Wire.VARINT)) {
                remove = w.varint() != 0;
            } else {
                w.skip();
            }
        }
        v[Columns.QUOTA_ENTITY_TYPES] = types.toArray(new String[0]);
        v[Columns.QUOTA_ENTITY_NAMES] = names.toArray(new String[0]);
        v[Columns.QUOTA_KEY] = key;
        v[Columns.QUOTA_VALUE] = value;
        v[Columns.QUOTA_REMOVE] = remove;
    }

    /** A ClientQuotaEntityData: entity_name is `optional`, so absent (null) is not "". */
    private static void entity(Wire w, List<String> types, List<String> names)
            throws Wire.Corrupt {
        String type = "";
        String name = null;
        while (w.more()) {
            w.next();
            if (is(w, 1, Wire.LEN)) {
                type = w.string();
            } else if (is(w, 2, Wire.LEN)) {
                name = w.string();
            } else {
                w.skip();
            }
        }
        types.add(type);
        names.add(name);
    }
}
