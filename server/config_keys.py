"""Every key a node's config file supports, declared once in REGISTRY with the project's one
definition machinery (metadata.config_def: name, type, default, parser, doc), in the order
they are parsed: the first bad value is the error. The value parsers of keys that are not
addresses live here too (those are server/config_listeners.py); the SASL and
connection-limit keys are declared in server/config_security.py and registered here, last.
NodeConfig's typed attributes (server/config.py) are these keys themselves.
"""

from __future__ import annotations

import os

from kraft.security.principal_mapping import PrincipalMapper, parse_mapping_rules
from kraft.security.tls import CLIENT_AUTH_VALUES
from metadata.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    ConfigType,
    boolean,
    integer,
)
from server.config_listeners import (
    Listener,
    normalise_listener_name,
    parse_advertised_listeners,
    parse_endpoints,
    parse_listener_names,
    parse_listeners,
    parse_protocol_map,
    parse_voters,
    split_entries,
)
from server.config_security import SECURITY_KEYS
from server.config_txn import TXN_KEYS

ROLE_BROKER = "broker"
ROLE_CONTROLLER = "controller"
_ROLES = (ROLE_BROKER, ROLE_CONTROLLER)


# -- value parsers: each takes the raw string and raises ValueError(reason) --------------------


def _parse_roles(raw: str) -> frozenset[str]:
    roles = split_entries(raw)
    if not roles:
        raise ValueError(
            "must list this node's roles, 'controller' and/or 'broker' "
            "(an empty process.roles means ZooKeeper mode, which is not supported)"
        )
    for role in roles:
        if role not in _ROLES:
            raise ValueError(
                f"unknown process role '{role}' (only 'broker' and 'controller' are allowed roles)"
            )
    duplicates = sorted({role for role in roles if roles.count(role) > 1})
    if duplicates:
        raise ValueError(f"duplicate role names found: {', '.join(duplicates)}")
    return frozenset(roles)


def _parse_dirs(raw: str) -> tuple[str, ...]:
    dirs = tuple(split_entries(raw))
    if not dirs:
        raise ValueError("must list at least one directory")
    seen: dict[str, str] = {}
    for path in dirs:
        normal = os.path.normpath(path)
        if normal in seen:
            raise ValueError(f"the directory {seen[normal]} appears more than once")
        seen[normal] = path
    return dirs


def _parse_dir(raw: str) -> str:
    path = raw.strip()
    if not path:
        raise ValueError("must not be empty (remove the line to use the first log directory)")
    return path


def _parse_rack(raw: str) -> str:
    rack = raw.strip()
    if not rack:
        raise ValueError("must not be empty (remove the line if the broker has no rack)")
    return rack


def _parse_pem_type(raw: str) -> str:
    value = raw.strip().upper()
    if value != "PEM":
        raise ValueError(
            "only PEM is supported: convert a JKS or PKCS12 store with keytool/openssl into "
            "one PEM file holding the private key and certificate chain"
        )
    return value


def _parse_client_auth(raw: str) -> str:
    value = raw.strip().lower()
    if value not in CLIENT_AUTH_VALUES:
        raise ValueError("must be none, requested or required")
    return value


def _reject_key_password(raw: str) -> str:
    raise ValueError(
        "encrypted private keys are not supported: store the key unencrypted in the PEM "
        "keystore with permissions 0600, and remove ssl.key.password"
    )


def _reject_acl_file(raw: str) -> str:
    raise ValueError(
        "ACLs are metadata records now, not a file read at start: import this file once with "
        f"`kraft-admin acls --add --from-file {raw.strip()}`, then remove authorizer.acl.file"
    )


def _stripped(raw: str) -> str:
    return raw.strip()


# -- the registry ----------------------------------------------------------------------------

# Every key a node's config file supports, in the order they are parsed (the first bad value
# is the error). NodeConfig's typed attributes are these keys (see NodeConfig).
REGISTRY = ConfigDef()
_define = REGISTRY.define


def _define_int(
    name: str, default: int | None, lo: int, doc: str, *, hi: int = INT_MAX, note: str = "",
    internal: bool = False,
) -> ConfigKey[int]:
    description, parse = integer(lo, hi, note)
    type_ = ConfigType.LONG if hi == LONG_MAX else ConfigType.INT
    return _define(name, type_, None if default is None else str(default), parse, doc,
                   valid_values=description, internal=internal)


PROCESS_ROLES = _define(
    "process.roles", ConfigType.LIST, None, _parse_roles,
    "The roles of this node: `controller` (votes in the metadata quorum), `broker`, or "
    "`broker,controller` (combined mode).",
    valid_values="controller, broker, or both", required=True,
)
_NODE_ID_DESCRIPTION, _parse_node_id = integer(0)
NODE_ID = _define(
    "node.id", ConfigType.INT, None, _parse_node_id,
    "The id of this node. A controller's id must be one of the static voters when "
    "`controller.quorum.voters` is set.",
    valid_values=_NODE_ID_DESCRIPTION, required=True,
)
BROKER_ID: ConfigKey[int | None] = _define(
    "broker.id", ConfigType.INT, None, _parse_node_id,
    "Kafka's older name for `node.id`: used when `node.id` is absent; if both are set they "
    "must be equal.",
    valid_values=_NODE_ID_DESCRIPTION,
)
QUORUM_VOTERS = _define(
    "controller.quorum.voters", ConfigType.LIST, "", parse_voters,
    "The static voter set (kraft.version 0), identical on every node: each controller's id "
    "and the address the other nodes reach it at. Leave it empty for a dynamic quorum "
    "(KIP-853), whose voters come from `kraft-storage format --standalone` or "
    "`--initial-controllers` and change with `kraft-admin quorum add-controller`.",
    valid_values="id@host:port,... (ids unique)",
)
QUORUM_BOOTSTRAP_SERVERS = _define(
    "controller.quorum.bootstrap.servers", ConfigType.LIST, "", parse_endpoints,
    "Controllers any node may contact to discover the quorum leader (KIP-853); the voters "
    "then come from the log. Enough on its own for a broker, and for a controller whose "
    "storage was formatted with --standalone, --initial-controllers or "
    "--no-initial-controllers.",
    valid_values="host:port,...",
)
QUORUM_ELECTION_TIMEOUT_MS = _define_int(
    "controller.quorum.election.timeout.ms", 1000, 1,
    "Base election timeout T: a candidate or a voter without a leader waits a random time "
    "in [T, 2T) before starting an election.",
)
QUORUM_FETCH_TIMEOUT_MS = _define_int(
    "controller.quorum.fetch.timeout.ms", 2000, 1,
    "A follower that has not fetched successfully from the leader for this long becomes a "
    "candidate; the leader resigns after 1.5x this without hearing from a majority.",
)
QUORUM_ELECTION_BACKOFF_MAX_MS = _define_int(
    "controller.quorum.election.backoff.max.ms", 1000, 1,
    "Cap of the exponential backoff between failed elections.",
)
QUORUM_REQUEST_TIMEOUT_MS = _define_int(
    "controller.quorum.request.timeout.ms", 2000, 1,
    "How long a Raft request may wait for its response before it is treated as failed.",
)
QUORUM_RETRY_BACKOFF_MS = _define_int(
    "controller.quorum.retry.backoff.ms", 20, 0,
    "Wait before retrying a request to a node after an error.",
)
LISTENERS = _define(
    "listeners", ConfigType.LIST, "PLAINTEXT://:9092", parse_listeners,
    "The addresses this node binds. An empty host binds every interface.",
    valid_values="NAME://host:port,... (port 0 = ephemeral)",
)
ADVERTISED_LISTENERS: ConfigKey[dict[str, Listener] | None] = _define(
    "advertised.listeners", ConfigType.LIST, None, parse_advertised_listeners,
    "The addresses other nodes and clients should use, when they differ from `listeners`. "
    "Controller listeners not listed here are advertised as in `listeners`.",
    valid_values="NAME://host:port,...",
)
CONTROLLER_LISTENER_NAMES: ConfigKey[tuple[str, ...] | None] = _define(
    "controller.listener.names", ConfigType.LIST, None, parse_listener_names,
    "The listener(s) used for controller traffic; each must be a name in `listeners` on a "
    "controller. Required.",
    valid_values="listener names",
)
LISTENER_SECURITY_PROTOCOL_MAP = _define(
    "listener.security.protocol.map", ConfigType.LIST,
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    parse_protocol_map,
    "Security protocol of each listener: PLAINTEXT, SSL (TLS, mutual with "
    "ssl.client.auth=required), or on a broker's client listeners SASL_PLAINTEXT / SASL_SSL "
    "(sasl.enabled.mechanisms); controller listener names missing from the map are PLAINTEXT. "
    "A broker-only node dials the controllers with the protocol its controller listener name "
    "maps to.",
    valid_values="NAME:PROTOCOL,...",
)
LOG_DIRS: ConfigKey[tuple[str, ...] | None] = _define(
    "log.dirs", ConfigType.LIST, None, _parse_dirs,
    "Directories holding this node's data, each with its `meta.properties`. Overrides "
    "`log.dir`. Relative paths are resolved against the process's working directory.",
    valid_values="directories",
)
LOG_DIR = _define(
    "log.dir", ConfigType.LIST, "/tmp/kraft-combined-logs", _parse_dirs,
    "Used when `log.dirs` is not set.",
    valid_values="directories",
)
METADATA_LOG_DIR: ConfigKey[str | None] = _define(
    "metadata.log.dir", ConfigType.STRING, None, _parse_dir,
    "Where the metadata log and snapshots live; defaults to the first log directory.",
    valid_values="a directory",
)
METADATA_LOG_SEGMENT_BYTES = _define_int(
    "metadata.log.segment.bytes", 1073741824, 12,
    "Maximum size of one metadata log segment; must be >= metadata.log.segment.min.bytes.",
)
METADATA_LOG_SEGMENT_MIN_BYTES = _define_int(
    "metadata.log.segment.min.bytes", 8388608, 12,
    "Lower bound for metadata.log.segment.bytes; lowered by tests to exercise rolling.",
    internal=True,
)
BROKER_SESSION_TIMEOUT_MS = _define_int(
    "broker.session.timeout.ms", 9000, 1,
    "The active controller fences a broker it has not heard a heartbeat from for this long.",
)
BROKER_HEARTBEAT_INTERVAL_MS = _define_int(
    "broker.heartbeat.interval.ms", 2000, 1,
    "How often a broker sends a heartbeat to the active controller.",
)
INITIAL_BROKER_REGISTRATION_TIMEOUT_MS = _define_int(
    "initial.broker.registration.timeout.ms", 60000, 1,
    "How long a starting broker keeps trying to register with the active controller before "
    "it gives up and exits.",
)
BROKER_LIVENESS_GRACE_MS = _define_int(
    "broker.liveness.grace.ms", 500, 0,
    "The active controller fences a broker whose liveness stream broke without a goodbye and "
    "was not reopened within this long (its process is gone); 0 turns this off, leaving "
    "broker.session.timeout.ms alone (docs/brokers.md).",
)
BROKER_LIVENESS_PROBE_ENABLE = _define(
    "broker.liveness.probe.enable", ConfigType.BOOLEAN, "true", boolean,
    "When a broker's liveness stream breaks, the active controller connects to the broker's "
    "registered listeners; if every one refuses (nothing listens: the process is gone), it "
    "fences the broker at once instead of after broker.liveness.grace.ms. Turn off where a "
    "firewall rejects the controllers' connections to brokers' listeners (docs/brokers.md).",
    valid_values="true or false",
)
BROKER_LIVENESS_RECONNECT_BACKOFF_MS = _define_int(
    "broker.liveness.reconnect.backoff.ms", 100, 1,
    "After a second failed attempt to reopen its liveness stream, a broker waits this long "
    "before the next one, doubling up to 1 s.",
)
GRPC_LISTENER_NAMES: ConfigKey[tuple[str, ...] | None] = _define(
    "grpc.listener.names", ConfigType.LIST, None, parse_listener_names,
    "Broker listeners that serve this project's gRPC services (the broker metadata service, "
    "the Admin API that kraft-admin uses, DescribeQuorum) instead of Kafka's wire protocol. "
    "Every other broker listener speaks Kafka's protocol to Kafka clients and other brokers.",
    valid_values="listener names",
)
INTER_BROKER_LISTENER_NAME: ConfigKey[str | None] = _define(
    "inter.broker.listener.name", ConfigType.STRING, None,
    lambda raw: normalise_listener_name(raw.strip(), raw),
    "The Kafka-protocol listener brokers use to replicate from each other; defaults to the "
    "first broker listener that is not a gRPC listener.",
    valid_values="a listener name",
)
REPLICA_LAG_TIME_MAX_MS = _define_int(
    "replica.lag.time.max.ms", 30000, 1,
    "A follower that has not caught up to the leader's log end within this long leaves the "
    "ISR; it rejoins once it holds everything below the high watermark.",
)
REPLICA_FETCH_MAX_BYTES = _define_int(
    "replica.fetch.max.bytes", 1048576, 0,
    "Bytes a follower asks per partition in one fetch (the first batch comes whole anyway).",
)
REPLICA_FETCH_RESPONSE_MAX_BYTES = _define_int(
    "replica.fetch.response.max.bytes", 10485760, 0,
    "Bytes a follower asks for in one fetch across all its partitions.",
)
REPLICA_FETCH_WAIT_MAX_MS = _define_int(
    "replica.fetch.wait.max.ms", 500, 0,
    "How long a follower's fetch may wait at the leader for new records.",
)
REPLICA_FETCH_BACKOFF_MS = _define_int(
    "replica.fetch.backoff.ms", 1000, 0,
    "Pause before a follower retries a leader it could not reach or that refused a "
    "partition with an error other than a pending leadership change.",
)
FETCH_MAX_BYTES = _define_int(
    "fetch.max.bytes", 57671680, 1024,
    "The most bytes a broker returns for one Fetch request (a first batch larger than this "
    "still comes whole).",
)
MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS = _define_int(
    "max.incremental.fetch.session.cache.slots", 1000, 0,
    "How many incremental fetch sessions (KIP-227) a broker keeps; a new one beyond that "
    "evicts an idle or smaller one, or its client goes on with full fetches.",
)
SOCKET_REQUEST_MAX_BYTES = _define_int(
    "socket.request.max.bytes", 104857600, 1,
    "A Kafka request larger than this closes its connection.",
)
AUTO_CREATE_TOPICS_ENABLE = _define(
    "auto.create.topics.enable", ConfigType.BOOLEAN, "true", boolean,
    "A Metadata request for a missing topic that allows auto-creation creates it with the "
    "cluster's num.partitions and default.replication.factor.",
    valid_values="true or false",
)
# The group coordinator (broker/group, docs/consumer-groups.md): Kafka's keys and defaults.
OFFSETS_TOPIC_NUM_PARTITIONS = _define_int(
    "offsets.topic.num.partitions", 50, 1,
    "Partitions of __consumer_offsets, fixed when the topic is created on first use: a "
    "group lives on partition abs(hash(group.id)) % this, so it must never change.",
)
OFFSETS_TOPIC_REPLICATION_FACTOR = _define_int(
    "offsets.topic.replication.factor", 3, 1,
    "Replication factor of __consumer_offsets. Not capped: while fewer brokers are "
    "registered and unfenced the topic cannot be created and consumers see "
    "COORDINATOR_NOT_AVAILABLE (set 1 for a one-broker cluster).",
    hi=32767,
)
OFFSETS_TOPIC_SEGMENT_BYTES = _define_int(
    "offsets.topic.segment.bytes", 104857600, 14,
    "Segment size of __consumer_offsets (a topic config set when it is created).",
)
OFFSETS_COMMIT_TIMEOUT_MS = _define_int(
    "offsets.commit.timeout.ms", 5000, 1,
    "How long a group or offset write may wait for every ISR member before the client gets "
    "COORDINATOR_NOT_AVAILABLE (REQUEST_TIMED_OUT on the append).",
)
OFFSET_METADATA_MAX_BYTES = _define_int(
    "offset.metadata.max.bytes", 4096, 0,
    "Longest metadata string a committed offset may carry (OFFSET_METADATA_TOO_LARGE above).",
)
OFFSETS_RETENTION_MINUTES = _define_int(
    "offsets.retention.minutes", 10080, 1,
    "Committed offsets of a group Empty this long (of a simple group: not committed for this "
    "long) are deleted, and the group with them when nothing is left.",
)
OFFSETS_RETENTION_CHECK_INTERVAL_MS = _define_int(
    "offsets.retention.check.interval.ms", 600000, 1,
    "How often a coordinator looks for expired committed offsets.",
)
GROUP_INITIAL_REBALANCE_DELAY_MS = _define_int(
    "group.initial.rebalance.delay.ms", 3000, 0,
    "A group leaving Empty waits this long for more members before its first generation, "
    "again while members keep arriving, within the rebalance timeout (KIP-134).",
)
GROUP_MIN_SESSION_TIMEOUT_MS = _define_int(
    "group.min.session.timeout.ms", 6000, 0,
    "Shortest session.timeout.ms a member may join with (INVALID_SESSION_TIMEOUT below).",
)
GROUP_MAX_SESSION_TIMEOUT_MS = _define_int(
    "group.max.session.timeout.ms", 1800000, 0,
    "Longest session.timeout.ms a member may join with (INVALID_SESSION_TIMEOUT above).",
)
GROUP_MAX_SIZE = _define_int(
    "group.max.size", 2147483647, 1,
    "Most members a group may have; one more gets GROUP_MAX_SIZE_REACHED.",
)


def _parse_assignors(raw: str) -> tuple[str, ...]:
    from broker.group.consumer_protocol.assignors import assignor_name

    names = tuple(assignor_name(entry) for entry in split_entries(raw))
    if not names:
        raise ValueError("must name at least one assignor ('uniform', 'range')")
    return names


GROUP_CONSUMER_SESSION_TIMEOUT_MS = _define_int(
    "group.consumer.session.timeout.ms", 45000, 1,
    "A consumer-protocol (KIP-848) member that sends no heartbeat for this long is removed "
    "and its partitions go to the others.",
)
GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS = _define_int(
    "group.consumer.heartbeat.interval.ms", 5000, 1,
    "How often consumer-protocol members heartbeat (the coordinator tells them); a partition "
    "released by one member reaches the next on its next heartbeat.",
)
GROUP_CONSUMER_ASSIGNORS = _define(
    "group.consumer.assignors", ConfigType.LIST, "uniform,range", _parse_assignors,
    "The server-side assignors of consumer-protocol groups, the first the default "
    "(a member may ask for another by group.remote.assignor).",
    valid_values="uniform, range, or their Kafka class names",
)
GROUP_CONSUMER_MAX_SIZE = _define_int(
    "group.consumer.max.size", 2147483647, 1,
    "Most members a consumer-protocol group may have; one more gets GROUP_MAX_SIZE_REACHED.",
)
LOG_RETENTION_CHECK_INTERVAL_MS = _define_int(
    "log.retention.check.interval.ms", 300000, 1,
    "How often a broker deletes partition log segments past retention.ms or retention.bytes.",
    hi=LONG_MAX,
)
LOG_CLEANER_ENABLE = _define(
    "log.cleaner.enable", ConfigType.BOOLEAN, "true", boolean,
    "Whether the broker compacts the logs of topics whose cleanup.policy holds compact.",
    valid_values="true or false",
)
LOG_CLEANER_THREADS = _define_int(
    "log.cleaner.threads", 1, 1, "How many logs the broker compacts at once.")
NUM_RECOVERY_THREADS_PER_DATA_DIR = _define_int(
    "num.recovery.threads.per.data.dir", 2, 1,
    "How many partition logs per log dir a broker opens (recovers) at once at start.")
LOG_CLEANER_BACKOFF_MS = _define_int(
    "log.cleaner.backoff.ms", 15000, 0,
    "How long the log cleaner waits between looks for a log to compact.", hi=LONG_MAX,
)
LOG_CLEANER_DEDUPE_BUFFER_SIZE = _define_int(
    "log.cleaner.dedupe.buffer.size", 134217728, 1024,
    "The memory of the cleaner's offset maps, shared by its threads (24 bytes a key).",
    hi=LONG_MAX,
)
REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS = _define_int(
    "replica.high.watermark.checkpoint.interval.ms", 5000, 1,
    "How often a broker writes every partition's high watermark to "
    "replication-offset-checkpoint.",
    hi=LONG_MAX,
)
LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS = _define_int(
    "log.flush.offset.checkpoint.interval.ms", 60000, 0,
    "How often a broker writes the recovery point of every partition log.",
)
BROKER_RACK: ConfigKey[str | None] = _define(
    "broker.rack", ConfigType.STRING, None, _parse_rack,
    "The rack of this broker, used by the controller's rack-aware replica placement.",
    valid_values="a rack name",
)
METADATA_MAX_IDLE_INTERVAL_MS = _define_int(
    "metadata.max.idle.interval.ms", 500, 0,
    "The active controller appends a NoOp record every this many ms, so followers and "
    "brokers see the high watermark advance; 0 disables it.",
)
METADATA_MAX_RETENTION_BYTES = _define_int(
    "metadata.max.retention.bytes", 104857600, -1,
    "Delete the oldest snapshots and log segments once log + snapshots exceed this size "
    "(a soft limit: the newest snapshot is always kept).",
    hi=LONG_MAX, note="-1 = no limit",
)
METADATA_MAX_RETENTION_MS = _define_int(
    "metadata.max.retention.ms", 604800000, -1,
    "Delete snapshots (and the log before them) older than this, keeping the newest.",
    hi=LONG_MAX, note="-1 = no limit",
)
METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS = _define_int(
    "metadata.log.max.record.bytes.between.snapshots", 20971520, 1,
    "Take a snapshot once this many bytes of records were appended since the last one.",
    hi=LONG_MAX,
)
METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS = _define_int(
    "metadata.log.max.snapshot.interval.ms", 3600000, 0,
    "Take a snapshot at least this often if anything was committed; 0 disables the "
    "time-based trigger.",
    hi=LONG_MAX,
)
_METRICS_PORT_DESCRIPTION, _parse_metrics_port = integer(0, 65535, "0 = ephemeral")
METRICS_PORT: ConfigKey[int | None] = _define(
    "metrics.port", ConfigType.INT, None, _parse_metrics_port,
    "Serve Prometheus metrics over HTTP on this port, on the controller listener's host "
    "(the first listener's on a broker). Absent = no metrics endpoint.",
    valid_values=_METRICS_PORT_DESCRIPTION,
)
TEST_HOOKS_ENABLE = _define(
    "internal.test.hooks.enable", ConfigType.BOOLEAN, "false", boolean,
    "Enable the transport's fault-injection and raw-append test hooks. Never in production.",
    valid_values="true or false", internal=True,
)
TEST_FAULTS_DIR: ConfigKey[str | None] = _define(
    "internal.test.faults.dir", ConfigType.STRING, None, _parse_dir,
    "A directory the node watches for injected faults (files blocked, disk-full, "
    "fsync-delay-ms, clock-offset-ms; see docs/chaos.md). For the chaos tool and tests only.",
    valid_values="a directory", internal=True,
)
SSL_KEYSTORE_TYPE = _define(
    "ssl.keystore.type", ConfigType.STRING, "PEM", _parse_pem_type,
    "Format of the keystore and truststore files.",
    valid_values="PEM",
)
SSL_KEYSTORE_LOCATION: ConfigKey[str | None] = _define(
    "ssl.keystore.location", ConfigType.STRING, None, _parse_dir,
    "This node's private key and certificate chain (one PEM file), for SSL listeners and for "
    "the clients it opens to SSL listeners of other nodes.",
    valid_values="a PEM file",
)
SSL_TRUSTSTORE_TYPE = _define(
    "ssl.truststore.type", ConfigType.STRING, "PEM", _parse_pem_type,
    "Format of the truststore file.",
    valid_values="PEM",
)
SSL_TRUSTSTORE_LOCATION: ConfigKey[str | None] = _define(
    "ssl.truststore.location", ConfigType.STRING, None, _parse_dir,
    "The CA certificates that peers' and clients' certificates must chain to.",
    valid_values="a PEM file",
)
SSL_CLIENT_AUTH = _define(
    "ssl.client.auth", ConfigType.STRING, "none", _parse_client_auth,
    "Whether SSL listeners ask clients for a certificate: required makes them mutual TLS.",
    valid_values="none, requested, required",
)
SSL_PRINCIPAL_MAPPING_RULES: ConfigKey[PrincipalMapper] = _define(
    "ssl.principal.mapping.rules", ConfigType.STRING, "DEFAULT", parse_mapping_rules,
    "How a client certificate's subject DN (RFC 2253, as Java prints it) becomes its "
    "principal's name, on every listener (KIP-371): the first rule whose regex matches the "
    "whole DN wins; a certificate no rule matches is refused. DEFAULT keeps the DN.",
    valid_values="DEFAULT or RULE:regex/replacement/[L|U], comma-separated",
)
SSL_KEY_PASSWORD = _define(
    "ssl.key.password", ConfigType.PASSWORD, None, _reject_key_password,
    "Kafka's password of an encrypted private key; not supported.",
    valid_values="(not supported)",
)
AUTHORIZER_CLASS_NAME = _define(
    "authorizer.class.name", ConfigType.STRING, "", _stripped,
    "Set (to any name, e.g. Kafka's org.apache.kafka.metadata.authorizer.StandardAuthorizer) "
    "to authorize every request with Kafka's StandardAuthorizer: super.users may do "
    "everything, others what the ACLs in the metadata log allow (kraft-admin acls).",
    valid_values="a class name or empty",
)
SUPER_USERS = _define(
    "super.users", ConfigType.STRING, "", _stripped,
    "Principals allowed every operation, separated by semicolons, e.g. "
    "User:CN=controller-1,O=example;User:CN=admin,O=example. Controllers and brokers belong "
    "here.",
    valid_values="User:PRINCIPAL;...",
)
AUTHORIZER_ACL_FILE: ConfigKey[str | None] = _define(
    "authorizer.acl.file", ConfigType.STRING, None, _reject_acl_file,
    "No longer read: ACLs are metadata records (KIP-801). Import an old file once with "
    "kraft-admin acls --add --from-file FILE.",
    valid_values="(not supported)",
)
ALLOW_EVERYONE_IF_NO_ACL_FOUND = _define(
    "allow.everyone.if.no.acl.found", ConfigType.BOOLEAN, "false", boolean,
    "With an authorizer: whether a resource with no ACL at all is open to everyone (Kafka's "
    "rule: one ACL on a resource, for anybody, closes it to everyone else).",
    valid_values="true or false",
)

# The Kafka listeners' SASL and connection-limit keys (server/config_security.py) and the
# transaction coordinator's (server/config_txn.py).
for _key in (*SECURITY_KEYS.values(), *TXN_KEYS.values()):
    REGISTRY.define(_key.name, _key.type, _key.default, _key.parse, _key.doc,
                    valid_values=_key.valid_values)
