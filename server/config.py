"""Role configuration: Kafka's key names, defaults and validation rules, parsed into a NodeConfig.

Every supported key is declared once in REGISTRY below, with the project's one definition
machinery (metadata.config_def: name, type, default, parser, doc), and NodeConfig's typed
attributes are those keys themselves. `parse_config` parses the keys in registry order, then
checks the cross-key rules Kafka's `KafkaConfig.validateValues` checks. The first problem
raises a `ConfigError` whose str() is one line naming the key and saying what to do. Keys
nobody declared are warnings: Kafka keys that have no effect here (IGNORED_KAFKA_KEYS), the
dynamic broker configs (metadata.config_keys, set with kraft-admin), and unknown ones.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kraft.properties import PropertiesError, read_entries
from kraft.security.principal_mapping import PrincipalMapper, parse_mapping_rules
from kraft.security.tls import CLIENT_AUTH_VALUES, TlsConfig
from metadata.authorizer.standard import StandardAuthorizer, parse_super_users
from metadata.config_def import (
    INT_MAX,
    LONG_MAX,
    ConfigDef,
    ConfigKey,
    ConfigType,
    boolean,
    integer,
    split_list,
)
from metadata.config_keys import BROKER_CONFIGS
from server import config_security
from server.config_security import SECURITY_KEYS, TLS_PROTOCOLS, SecurityConfigError

ROLE_BROKER = "broker"
ROLE_CONTROLLER = "controller"
_ROLES = (ROLE_BROKER, ROLE_CONTROLLER)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")

_LISTENER_NAME = re.compile(r"[A-Z0-9_]+")
_HOST = re.compile(r"[0-9A-Za-z._%-]+")
_IPV6_HOST = re.compile(r"[0-9A-Za-z.:%_-]+")
_WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


class ConfigError(ValueError):
    """Invalid configuration. str() is one line: what is wrong and what to do about it.
    `key` is the offending key when there is one; `line` is set for syntax errors, whose
    message already names the file."""

    def __init__(
        self, message: str, *, key: str | None = None, source: str = "", line: int | None = None
    ) -> None:
        super().__init__(message.replace("\r", " ").replace("\n", " "))
        self.key = key
        self.source = source
        self.line = line


# -- endpoints -------------------------------------------------------------------------------


def _format_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


@dataclass(frozen=True, order=True)
class Endpoint:
    """A host and port; IPv6 hosts are stored bare and printed in brackets."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"{_format_host(self.host)}:{self.port}"


@dataclass(frozen=True)
class Listener:
    """A named listener: `NAME://host:port`. An empty host binds every interface."""

    name: str
    host: str
    port: int

    @property
    def endpoint(self) -> Endpoint:
        return Endpoint(self.host, self.port)

    def __str__(self) -> str:
        return f"{self.name}://{_format_host(self.host)}:{self.port}"


# -- value parsers: each takes the raw string and raises ValueError(reason) --------------------


def _split_list(raw: str) -> list[str]:
    """Kafka's LIST type; an empty entry (`a,,b`) is an error here."""
    items = split_list(raw)
    if "" in items:
        raise ValueError("it has an empty entry; remove the stray comma")
    return items


def _parse_port(text: str, entry: str, lo: int) -> int:
    if not text.isascii() or not text.isdigit():
        raise ValueError(f'the port of "{entry}" must be a number between {lo} and 65535')
    port = int(text)
    if not lo <= port <= 65535:
        raise ValueError(f'the port of "{entry}" must be between {lo} and 65535, not {port}')
    return port


def _parse_host_port(text: str, entry: str, *, min_port: int, host_required: bool) -> Endpoint:
    """`host:port`, `[ipv6]:port`, or (when the host is optional) `:port`."""
    if text.startswith("["):
        close = text.find("]")
        if close < 0:
            raise ValueError(f'"{entry}" has a "[" without a matching "]"')
        host, rest = text[1:close], text[close + 1 :]
        if not rest.startswith(":"):
            raise ValueError(f'"{entry}" must have a :port after the "]"')
        if not _IPV6_HOST.fullmatch(host):
            raise ValueError(f'"{entry}" has an invalid IPv6 address [{host}]')
        return Endpoint(host, _parse_port(rest[1:], entry, min_port))
    host, colon, port = text.rpartition(":")
    if not colon:
        raise ValueError(f'"{entry}" has no :port')
    if ":" in host:
        raise ValueError(f'"{entry}": write an IPv6 address in brackets, e.g. [::1]:{port}')
    if host and not _HOST.fullmatch(host):
        raise ValueError(f'"{entry}" has an invalid host name "{host}"')
    if not host and host_required:
        raise ValueError(f'"{entry}" has no host')
    return Endpoint(host, _parse_port(port, entry, min_port))


def _parse_roles(raw: str) -> frozenset[str]:
    roles = _split_list(raw)
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


def parse_voters(raw: str) -> dict[int, Endpoint]:
    """`controller.quorum.voters`: `id@host:port,...` -> {id: Endpoint}, in the given order."""
    voters: dict[int, Endpoint] = {}
    for entry in _split_list(raw):
        voter_id, at, address = entry.partition("@")
        if not at:
            raise ValueError(
                f'entry "{entry}" must be in the form {{id}}@{{host}}:{{port}}, '
                "e.g. 1@127.0.0.1:9093"
            )
        if not voter_id.isascii() or not voter_id.isdigit():
            raise ValueError(f'failed to parse voter ID as a non-negative integer from "{entry}"')
        node_id = int(voter_id)
        if node_id > INT_MAX:
            raise ValueError(f'voter ID {node_id} in "{entry}" is too large')
        if node_id in voters:
            raise ValueError(f"voter ID {node_id} appears more than once")
        try:
            endpoint = _parse_host_port(address, entry, min_port=1, host_required=True)
        except ValueError as err:
            raise ValueError(f"{err} (each entry should be {{id}}@{{host}}:{{port}})") from None
        for other_id, other in voters.items():
            if other == endpoint:
                raise ValueError(f"voters {other_id} and {node_id} have the same address {other}")
        voters[node_id] = endpoint
    return voters


def parse_endpoints(raw: str) -> tuple[Endpoint, ...]:
    """`controller.quorum.bootstrap.servers`: `host:port,...`."""
    endpoints: list[Endpoint] = []
    for entry in _split_list(raw):
        endpoint = _parse_host_port(entry, entry, min_port=1, host_required=True)
        if endpoint in endpoints:
            raise ValueError(f"{endpoint} appears more than once")
        endpoints.append(endpoint)
    return tuple(endpoints)


def _listener_name(name: str, entry: str) -> str:
    # Kafka normalises listener names to upper case (ListenerName.normalised).
    normalised = name.upper()
    if not _LISTENER_NAME.fullmatch(normalised):
        raise ValueError(
            f'the listener name "{name}" in "{entry}" may contain only letters, digits and '
            "underscores (e.g. CONTROLLER)"
        )
    return normalised


def _listeners(raw: str, *, distinct_ports: bool) -> dict[str, Listener]:
    listeners: dict[str, Listener] = {}
    for entry in _split_list(raw):
        name, sep, address = entry.partition("://")
        if not sep:
            raise ValueError(
                f'entry "{entry}" must be in the form NAME://host:port, '
                "e.g. CONTROLLER://127.0.0.1:9093"
            )
        name = _listener_name(name, entry)
        endpoint = _parse_host_port(address, entry, min_port=0, host_required=False)
        listener = Listener(name, endpoint.host, endpoint.port)
        if name in listeners:
            raise ValueError(f"the listener name {name} appears more than once")
        for other in listeners.values():
            # Port 0 asks the OS for a free port, so two of them never clash.
            if distinct_ports and listener.port != 0 and other.port == listener.port:
                raise ValueError(
                    f"{other} and {listener} use the same port; each listener needs its own port"
                )
        listeners[name] = listener
    return listeners


def parse_listeners(raw: str) -> dict[str, Listener]:
    """`listeners`: `NAME://host:port,...` -> {NAME: Listener}; names and ports distinct."""
    return _listeners(raw, distinct_ports=True)


def _parse_advertised_listeners(raw: str) -> dict[str, Listener]:
    # Kafka allows advertised ports to repeat (hosts behind different load balancers).
    return _listeners(raw, distinct_ports=False)


def _parse_listener_names(raw: str) -> tuple[str, ...]:
    names = tuple(_listener_name(name, raw) for name in _split_list(raw))
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"duplicate listener names: {', '.join(duplicates)}")
    return names


def _parse_protocol_map(raw: str) -> dict[str, str]:
    protocols: dict[str, str] = {}
    for entry in _split_list(raw):
        name, colon, protocol = entry.partition(":")
        if not colon:
            raise ValueError(f'entry "{entry}" must be in the form NAME:PROTOCOL')
        name = _listener_name(name.strip(), entry)
        protocol = protocol.strip().upper()
        if protocol not in SECURITY_PROTOCOLS:
            raise ValueError(
                f'"{entry}" names an unknown security protocol; use one of '
                + ", ".join(SECURITY_PROTOCOLS)
            )
        if name in protocols:
            raise ValueError(f"the listener name {name} appears more than once")
        protocols[name] = protocol
    return protocols


def _parse_dirs(raw: str) -> tuple[str, ...]:
    dirs = tuple(_split_list(raw))
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
    "advertised.listeners", ConfigType.LIST, None, _parse_advertised_listeners,
    "The addresses other nodes and clients should use, when they differ from `listeners`. "
    "Controller listeners not listed here are advertised as in `listeners`.",
    valid_values="NAME://host:port,...",
)
CONTROLLER_LISTENER_NAMES: ConfigKey[tuple[str, ...] | None] = _define(
    "controller.listener.names", ConfigType.LIST, None, _parse_listener_names,
    "The listener(s) used for controller traffic; each must be a name in `listeners` on a "
    "controller. Required.",
    valid_values="listener names",
)
LISTENER_SECURITY_PROTOCOL_MAP = _define(
    "listener.security.protocol.map", ConfigType.LIST,
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    _parse_protocol_map,
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
BROKER_LIVENESS_RECONNECT_BACKOFF_MS = _define_int(
    "broker.liveness.reconnect.backoff.ms", 100, 1,
    "After a second failed attempt to reopen its liveness stream, a broker waits this long "
    "before the next one, doubling up to 1 s.",
)
GRPC_LISTENER_NAMES: ConfigKey[tuple[str, ...] | None] = _define(
    "grpc.listener.names", ConfigType.LIST, None, _parse_listener_names,
    "Broker listeners that serve this project's gRPC services (the broker metadata service, "
    "the Admin API that kraft-admin uses, DescribeQuorum) instead of Kafka's wire protocol. "
    "Every other broker listener speaks Kafka's protocol to Kafka clients and other brokers.",
    valid_values="listener names",
)
INTER_BROKER_LISTENER_NAME: ConfigKey[str | None] = _define(
    "inter.broker.listener.name", ConfigType.STRING, None,
    lambda raw: _listener_name(raw.strip(), raw),
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

# The Kafka listeners' SASL and connection-limit keys (server/config_security.py).
for _key in SECURITY_KEYS.values():
    REGISTRY.define(_key.name, _key.type, _key.default, _key.parse, _key.doc,
                    valid_values=_key.valid_values)

# Kafka keys a node accepts and ignores: they tune parts of Kafka this project does not have,
# so a copied Kafka config still loads. Each one present is a warning, with the reason when
# there is more to say than that. (Dynamic broker configs such as num.partitions are set with
# kraft-admin, not here: metadata/config_keys.py, and a warning says so.)
IGNORED_KAFKA_KEYS: Mapping[str, str] = MappingProxyType({
    "auto.create.topics.enable": "",
    "controller.quorum.append.linger.ms": "the active controller does not linger: appends "
    "made in one event-loop turn share a batch, and group commit batches the rest",
    "delete.topic.enable": "",
    "eligible.leader.replicas.enable": "",
    "log.flush.interval.messages": "",
    "log.flush.interval.ms": "",
    "log.retention.hours": "",
    "metadata.log.segment.ms": "metadata log segments roll by size only "
    "(metadata.log.segment.bytes)",
    "num.io.threads": "",
    "num.network.threads": "",
    "share.coordinator.state.topic.min.isr": "",
    "share.coordinator.state.topic.replication.factor": "",
    "socket.receive.buffer.bytes": "",
    "socket.send.buffer.bytes": "",
    "transaction.state.log.min.isr": "",
    "transaction.state.log.replication.factor": "",
})
IGNORED_KAFKA_PREFIXES: tuple[str, ...] = ("ssl.", "sasl.", "listener.name.")

# Kafka keys that ask for something we do not do; accepting them silently would mislead.
REJECTED_KAFKA_KEYS: Mapping[str, str] = MappingProxyType({
    "zookeeper.connect": "ZooKeeper mode is not supported: remove zookeeper.connect and run "
    "in KRaft mode (process.roles, controller.quorum.voters).",
    "zookeeper.metadata.migration.enable": "ZooKeeper migration is not supported: remove "
    "zookeeper.metadata.migration.enable.",
    "control.plane.listener.name": "control.plane.listener.name is not supported in KRaft "
    "mode: remove it and use controller.listener.names.",
    "controller.quorum.auto.join.enable": "Auto-join of controllers (KIP-1186) is not "
    "supported: remove controller.quorum.auto.join.enable and add a controller with "
    "kraft-admin quorum add-controller.",
})


# -- NodeConfig ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeConfig:
    """A validated role configuration. Paths are as written (relative ones resolve against
    the working directory). `values` holds the parsed value of every registered key.

    The fields are what the cross-key rules derive from several keys; every other typed
    attribute is a registry key itself (metadata.config_def.ConfigKey is a descriptor that
    reads its parsed value from `values`), so its type and value come from the definition."""

    source: str
    advertised_listeners: dict[str, Listener]
    controller_listener_names: tuple[str, ...]
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    warnings: tuple[str, ...] = ()
    raw: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict, repr=False)

    process_roles = PROCESS_ROLES
    node_id = NODE_ID
    voters = QUORUM_VOTERS
    bootstrap_servers = QUORUM_BOOTSTRAP_SERVERS
    election_timeout_ms = QUORUM_ELECTION_TIMEOUT_MS
    fetch_timeout_ms = QUORUM_FETCH_TIMEOUT_MS
    election_backoff_max_ms = QUORUM_ELECTION_BACKOFF_MAX_MS
    request_timeout_ms = QUORUM_REQUEST_TIMEOUT_MS
    retry_backoff_ms = QUORUM_RETRY_BACKOFF_MS
    listeners = LISTENERS
    metadata_log_segment_bytes = METADATA_LOG_SEGMENT_BYTES
    metadata_log_segment_min_bytes = METADATA_LOG_SEGMENT_MIN_BYTES
    broker_session_timeout_ms = BROKER_SESSION_TIMEOUT_MS
    broker_heartbeat_interval_ms = BROKER_HEARTBEAT_INTERVAL_MS
    initial_broker_registration_timeout_ms = INITIAL_BROKER_REGISTRATION_TIMEOUT_MS
    broker_rack = BROKER_RACK
    grpc_listener_names = GRPC_LISTENER_NAMES
    broker_liveness_grace_ms = BROKER_LIVENESS_GRACE_MS
    broker_liveness_reconnect_backoff_ms = BROKER_LIVENESS_RECONNECT_BACKOFF_MS
    inter_broker_listener_name_setting = INTER_BROKER_LISTENER_NAME
    replica_lag_time_max_ms = REPLICA_LAG_TIME_MAX_MS
    replica_fetch_max_bytes = REPLICA_FETCH_MAX_BYTES
    replica_fetch_response_max_bytes = REPLICA_FETCH_RESPONSE_MAX_BYTES
    replica_fetch_wait_max_ms = REPLICA_FETCH_WAIT_MAX_MS
    replica_fetch_backoff_ms = REPLICA_FETCH_BACKOFF_MS
    fetch_max_bytes = FETCH_MAX_BYTES
    max_incremental_fetch_session_cache_slots = MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS
    socket_request_max_bytes = SOCKET_REQUEST_MAX_BYTES
    auto_create_topics_enable = AUTO_CREATE_TOPICS_ENABLE
    offsets_topic_num_partitions = OFFSETS_TOPIC_NUM_PARTITIONS
    offsets_topic_replication_factor = OFFSETS_TOPIC_REPLICATION_FACTOR
    offsets_topic_segment_bytes = OFFSETS_TOPIC_SEGMENT_BYTES
    offsets_commit_timeout_ms = OFFSETS_COMMIT_TIMEOUT_MS
    offset_metadata_max_bytes = OFFSET_METADATA_MAX_BYTES
    offsets_retention_minutes = OFFSETS_RETENTION_MINUTES
    offsets_retention_check_interval_ms = OFFSETS_RETENTION_CHECK_INTERVAL_MS
    group_initial_rebalance_delay_ms = GROUP_INITIAL_REBALANCE_DELAY_MS
    group_min_session_timeout_ms = GROUP_MIN_SESSION_TIMEOUT_MS
    group_max_session_timeout_ms = GROUP_MAX_SESSION_TIMEOUT_MS
    group_max_size = GROUP_MAX_SIZE
    log_retention_check_interval_ms = LOG_RETENTION_CHECK_INTERVAL_MS
    log_cleaner_enable = LOG_CLEANER_ENABLE
    log_cleaner_threads = LOG_CLEANER_THREADS
    log_cleaner_backoff_ms = LOG_CLEANER_BACKOFF_MS
    num_recovery_threads_per_data_dir = NUM_RECOVERY_THREADS_PER_DATA_DIR
    log_cleaner_dedupe_buffer_size = LOG_CLEANER_DEDUPE_BUFFER_SIZE
    replica_high_watermark_checkpoint_interval_ms = REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS
    log_flush_offset_checkpoint_interval_ms = LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS
    metadata_max_idle_interval_ms = METADATA_MAX_IDLE_INTERVAL_MS
    metadata_max_retention_bytes = METADATA_MAX_RETENTION_BYTES
    metadata_max_retention_ms = METADATA_MAX_RETENTION_MS
    metadata_log_max_record_bytes_between_snapshots = (
        METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS)
    metadata_log_max_snapshot_interval_ms = METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS
    metrics_port = METRICS_PORT
    test_hooks_enabled = TEST_HOOKS_ENABLE
    test_faults_dir = TEST_FAULTS_DIR
    listener_security_protocols = LISTENER_SECURITY_PROTOCOL_MAP
    ssl_keystore_location = SSL_KEYSTORE_LOCATION
    ssl_truststore_location = SSL_TRUSTSTORE_LOCATION
    ssl_client_auth = SSL_CLIENT_AUTH
    ssl_principal_mapping_rules = SSL_PRINCIPAL_MAPPING_RULES
    authorizer_class_name = AUTHORIZER_CLASS_NAME
    super_users = SUPER_USERS
    authorizer_acl_file = AUTHORIZER_ACL_FILE
    allow_everyone_if_no_acl_found = ALLOW_EVERYONE_IF_NO_ACL_FOUND

    @property
    def kafka_listener_names(self) -> tuple[str, ...]:
        """Broker listeners speaking Kafka's protocol: neither controller nor gRPC ones."""
        skip = {*self.controller_listener_names, *(self.grpc_listener_names or ())}
        return tuple(name for name in self.listeners if name not in skip)

    @property
    def inter_broker_listener_name(self) -> str | None:
        names = self.kafka_listener_names
        return self.inter_broker_listener_name_setting or (names[0] if names else None)

    @property
    def is_controller(self) -> bool:
        return ROLE_CONTROLLER in self.process_roles

    @property
    def is_broker(self) -> bool:
        return ROLE_BROKER in self.process_roles

    def listener_protocol(self, name: str) -> str:
        """As listener.security.protocol.map says (validated at load)."""
        protocol = self.listener_security_protocols.get(name)
        return protocol or (name if name in SECURITY_PROTOCOLS else "PLAINTEXT")

    def tls_for(self, listener_name: str) -> TlsConfig | None:
        """The TLS settings of a listener, or of the clients dialing it; None without TLS."""
        protocol = self.listener_protocol(listener_name)
        if protocol not in TLS_PROTOCOLS:
            return None
        keystore, truststore = self.ssl_keystore_location, self.ssl_truststore_location
        assert keystore is not None and truststore is not None  # required with SSL at load
        return TlsConfig(keystore, truststore, config_security.listener_client_auth(
            self.raw, listener_name, protocol, self.ssl_client_auth))

    @property
    def controller_tls(self) -> TlsConfig | None:
        """How this node dials the controllers (Raft, lifecycle, forwarded admin writes)."""
        return self.tls_for(self.controller_listener_names[0])

    def authorizer(self) -> StandardAuthorizer | None:
        """A new StandardAuthorizer (not yet loaded: an AclPublisher feeds it the image's
        ACLs), or None unless authorizer.class.name is set. One per process."""
        if not self.authorizer_class_name:
            return None
        return StandardAuthorizer(parse_super_users(self.super_users),
                                  self.allow_everyone_if_no_acl_found)

    @property
    def controller_listener(self) -> Listener | None:
        """The listener of the first controller listener name; None on a broker-only node,
        whose `listeners` must not contain controller listeners."""
        for name in self.controller_listener_names:
            if name in self.listeners:
                return self.listeners[name]
        return None

    @property
    def storage_dirs(self) -> tuple[str, ...]:
        """The directories `kraft-storage format` formats: the log dirs plus the metadata
        log dir when it is not one of them."""
        normal = {os.path.normpath(path) for path in self.log_dirs}
        if os.path.normpath(self.metadata_log_dir) in normal:
            return self.log_dirs
        return (*self.log_dirs, self.metadata_log_dir)

    @property
    def metrics_address(self) -> Endpoint | None:
        """Where to serve Prometheus metrics, or None when `metrics.port` is absent."""
        if self.metrics_port is None:
            return None
        listener = self.controller_listener or next(iter(self.listeners.values()), None)
        return Endpoint(listener.host if listener else "", self.metrics_port)

    def value(self, name: str) -> Any:
        """The parsed value of a registered key by name (None when unset without a default);
        code reads the typed attributes."""
        if name not in REGISTRY:
            raise KeyError(f"{name} is not a registered configuration key")
        return self.values[name]


def load_config(path: str | os.PathLike[str]) -> NodeConfig:
    """Read and validate a role config file. Raises ConfigError (one line) on any problem;
    duplicate keys are warnings (the last value wins, as in Java)."""
    source = os.fspath(path)
    try:
        entries = read_entries(source)
    except PropertiesError as err:
        raise ConfigError(str(err), source=source, line=err.line) from None
    except FileNotFoundError:
        message = f"The configuration file {source} does not exist."
        raise ConfigError(message, source=source) from None
    except OSError as err:
        raise ConfigError(
            f"Cannot read the configuration file {source}: {err.strerror}.", source=source
        ) from None
    props: dict[str, str] = {}
    first_line: dict[str, int] = {}
    duplicates: list[str] = []
    for entry in entries:
        if entry.key in first_line:
            duplicates.append(
                f"The configuration {entry.key} is set more than once in {source} (lines "
                f"{first_line[entry.key]} and {entry.line}); the value on line {entry.line} wins."
            )
        else:
            first_line[entry.key] = entry.line
        props[entry.key] = entry.value
    config = parse_config(props, source)
    return dataclasses.replace(config, warnings=(*duplicates, *config.warnings))


def parse_config(props: Mapping[str, str], source: str = "<properties>") -> NodeConfig:
    """Validate `props` (key -> raw string) into a NodeConfig; raises ConfigError."""
    raw = dict(props)
    for key, reason in REJECTED_KAFKA_KEYS.items():
        if key in raw and _is_set(raw[key]):
            raise ConfigError(reason, key=key, source=source)
    values = _parse_registered(raw, source)
    return _Validator(raw, values, source).build()


def _is_set(raw: str) -> bool:
    # `controller.quorum.auto.join.enable=false` and an empty zookeeper.connect are harmless.
    text = raw.strip().lower()
    return text not in ("", "false")


def _show(raw: str) -> str:
    text = raw.strip().replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return text if text else '""'


def _parse_registered(raw: Mapping[str, str], source: str) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key in REGISTRY.values():
        text = raw.get(key.name, key.default)
        if key.name == "node.id" and text is None:
            text = raw.get("broker.id")  # Kafka: broker.id fills an absent node.id
        if text is None:
            if key.required:
                raise ConfigError(
                    f'Missing required configuration "{key.name}" which has no default value.',
                    key=key.name,
                    source=source,
                )
            values[key.name] = None
            continue
        try:
            values[key.name] = key.parse(text)
        except ValueError as err:
            name = key.name
            if name == "node.id" and "node.id" not in raw:
                name = "broker.id"
            raise ConfigError(
                f"Invalid value {_show(text)} for configuration {name}: {err}.",
                key=name,
                source=source,
            ) from None
    return values


class _Validator:
    """The cross-key rules, checked in a fixed order so the first problem is reported."""

    def __init__(self, raw: dict[str, str], values: dict[str, Any], source: str) -> None:
        self.raw = raw
        self.values = values
        self.source = source
        self.warnings: list[str] = []
        self.roles: frozenset[str] = values["process.roles"]
        self.node_id: int = values["node.id"]
        self.voters: dict[int, Endpoint] = values["controller.quorum.voters"]
        self.listeners: dict[str, Listener] = values["listeners"]
        self.controller_names: tuple[str, ...] = values["controller.listener.names"] or ()

    def fail(self, message: str, key: str) -> ConfigError:
        return ConfigError(message, key=key, source=self.source)

    def build(self) -> NodeConfig:
        self.check_node_id()
        self.check_quorum()
        self.check_listeners()
        advertised = self.advertised_listeners()
        self.check_broker_listeners()
        self.check_security_protocols()
        self.check_voter_address()
        log_dirs = self.values["log.dirs"] or self.values["log.dir"]
        self.check_segment_bytes()
        self.warn_about_keys()
        return NodeConfig(
            source=self.source,
            advertised_listeners=advertised,
            controller_listener_names=self.controller_names,
            log_dirs=log_dirs,
            metadata_log_dir=self.values["metadata.log.dir"] or log_dirs[0],
            warnings=tuple(self.warnings),
            raw=self.raw,
            values=self.values,
        )

    def voters_text(self) -> str:
        return ",".join(f"{node_id}@{endpoint}" for node_id, endpoint in self.voters.items())

    def check_node_id(self) -> None:
        broker_id = self.values["broker.id"]
        if broker_id is not None and broker_id != self.node_id:
            raise self.fail(
                f"You must set node.id to the same value as broker.id (node.id={self.node_id}, "
                f"broker.id={broker_id}); remove broker.id, it is the old name of node.id.",
                "broker.id",
            )

    def check_quorum(self) -> None:
        bootstrap = self.values["controller.quorum.bootstrap.servers"]
        if not self.voters and not bootstrap:
            raise self.fail(
                "Either controller.quorum.voters must list the controllers as id@host:port,... "
                "or controller.quorum.bootstrap.servers must list them as host:port,...; "
                "both are empty.",
                "controller.quorum.voters",
            )
        if ROLE_CONTROLLER in self.roles:
            # Without static voters the set comes from the storage's bootstrap snapshot or
            # the log (KIP-853); kraft-storage format refuses such a controller without
            # --standalone, --initial-controllers or --no-initial-controllers.
            if self.voters and self.node_id not in self.voters:
                raise self.fail(
                    f"The node.id {self.node_id} must be one of the voters in "
                    f"controller.quorum.voters ({self.voters_text()}) when process.roles "
                    "contains 'controller'.",
                    "node.id",
                )
        elif self.node_id in self.voters:
            raise self.fail(
                f"The node.id {self.node_id} must not be one of the voters in "
                f"controller.quorum.voters ({self.voters_text()}) when process.roles=broker: "
                "give the broker an id no controller uses.",
                "node.id",
            )

    def check_listeners(self) -> None:
        names = self.controller_names
        listeners_text = ",".join(str(listener) for listener in self.listeners.values())
        if not names:
            raise self.fail(
                'Missing required configuration "controller.listener.names" which has no '
                "default value: name the listener used for controller traffic, e.g. "
                "controller.listener.names=CONTROLLER.",
                "controller.listener.names",
            )
        if ROLE_CONTROLLER in self.roles:
            for name in names:
                if name not in self.listeners:
                    raise self.fail(
                        f"The controller listener name {name} from controller.listener.names "
                        f"must be one of the listeners ({listeners_text}): add "
                        f"{name}://host:port to listeners.",
                        "controller.listener.names",
                    )
            if ROLE_BROKER not in self.roles:
                extra = [str(lsn) for lsn in self.listeners.values() if lsn.name not in names]
                if extra:
                    raise self.fail(
                        "The listeners config must only contain KRaft controller listeners "
                        "from controller.listener.names when process.roles=controller: remove "
                        f"{', '.join(extra)} from listeners.",
                        "listeners",
                    )
        else:
            for name in names:
                if name in self.listeners:
                    raise self.fail(
                        f"The controller listener name {name} must not appear in listeners "
                        "when process.roles=broker: a broker reaches the controllers through "
                        "controller.quorum.voters or controller.quorum.bootstrap.servers; "
                        f"remove {self.listeners[name]} from listeners.",
                        "listeners",
                    )

    def check_broker_listeners(self) -> None:
        grpc_names: tuple[str, ...] = self.values["grpc.listener.names"] or ()
        for name in grpc_names:
            if name not in self.listeners or name in self.controller_names:
                raise self.fail(
                    f"The gRPC listener name {name} from grpc.listener.names must be a broker "
                    f"listener: add {name}://host:port to listeners (and not to "
                    "controller.listener.names).",
                    "grpc.listener.names",
                )
        if ROLE_BROKER not in self.roles:
            return
        kafka = [n for n in self.listeners
                 if n not in self.controller_names and n not in grpc_names]
        inter_broker: str | None = self.values["inter.broker.listener.name"]
        if inter_broker is not None and inter_broker not in kafka:
            raise self.fail(
                f"inter.broker.listener.name={inter_broker} must name one of this broker's "
                f"Kafka-protocol listeners ({', '.join(kafka) or 'none'}).",
                "inter.broker.listener.name",
            )
        if not kafka:
            raise self.fail(
                "A broker needs a Kafka-protocol listener for clients and replication: add "
                "e.g. PLAINTEXT://host:9092 to listeners (listeners named in "
                "grpc.listener.names serve gRPC only).",
                "listeners",
            )

    def advertised_listeners(self) -> dict[str, Listener]:
        explicit: dict[str, Listener] | None = self.values["advertised.listeners"]
        if explicit is None:
            advertised = dict(self.listeners)
        else:
            for name, listener in explicit.items():
                if name not in self.listeners:
                    raise self.fail(
                        f"The advertised listener {listener} has no listener named {name} in "
                        "listeners: advertised.listeners may only use names from listeners.",
                        "advertised.listeners",
                    )
            # As Kafka: controller listeners not advertised explicitly fall back to listeners.
            advertised = {
                name: explicit.get(name, listener)
                for name, listener in self.listeners.items()
                if name in explicit or name in self.controller_names
            }
        if ROLE_CONTROLLER in self.roles:
            for name in self.controller_names:
                listener = advertised[name]
                if not listener.host or listener.host in _WILDCARD_HOSTS or listener.port == 0:
                    voter = self.voters.get(self.node_id)
                    fix = (f"{name}://{voter} (this node's voter entry is "
                           f"{self.node_id}@{voter})" if voter is not None
                           else f"{name}://<host>:<port> (the address the voter set will "
                           "hold for this controller)")
                    raise self.fail(
                        f"The advertised controller listener {listener} needs a host and a "
                        f"non-zero port other nodes can connect to: set advertised.listeners="
                        f"{fix} or put the host and port in listeners.",
                        "advertised.listeners",
                    )
        names = self.controller_names
        broker_listeners = [lsn for lsn in advertised.values() if lsn.name not in names]
        if ROLE_BROKER not in self.roles:
            return advertised
        for listener in broker_listeners:
            if listener.host in ("0.0.0.0", "::"):
                raise self.fail(
                    f"The advertised listener {listener} uses the non-routable meta-address "
                    f"{listener.host}: set advertised.listeners={listener.name}://<host>:"
                    f"{listener.port} with an address clients can reach.",
                    "advertised.listeners",
                )
        if not broker_listeners:
            raise self.fail(
                "There must be at least one broker advertised listener. Perhaps all listeners "
                "appear in controller.listener.names? Add e.g. PLAINTEXT://host:9092 to "
                "listeners.",
                "listeners",
            )
        return advertised

    def check_security_protocols(self) -> None:
        protocols: dict[str, str] = self.values["listener.security.protocol.map"]
        resolved: dict[str, str] = {}
        for name, listener in self.listeners.items():
            protocol = protocols.get(name)
            if protocol is None and name in SECURITY_PROTOCOLS:
                protocol = name
            if protocol is None and name in self.controller_names:
                protocol = "PLAINTEXT"  # Kafka's KRaft default for controller listeners
            if protocol is None:
                raise self.fail(
                    f"No security protocol is defined for the listener {listener}: add "
                    f"{name}:PLAINTEXT to listener.security.protocol.map.",
                    "listener.security.protocol.map",
                )
            resolved[name] = protocol
        for name in self.controller_names:  # a broker-only node dials them with this protocol
            resolved.setdefault(name, protocols.get(name, "PLAINTEXT"))
        try:  # SASL, TLS files, connection limits (server/config_security.py)
            config_security.check(self.values, self.raw, resolved, self.controller_names,
                                  ROLE_BROKER in self.roles)
        except SecurityConfigError as exc:
            raise self.fail(str(exc), exc.key) from None

    def check_voter_address(self) -> None:
        """Other controllers dial our voter entry, so a controller must listen on it."""
        if ROLE_CONTROLLER not in self.roles or self.node_id not in self.voters:
            return  # a dynamic voter's entry is its advertised listener itself
        voter = self.voters[self.node_id]
        own = [self.listeners[name] for name in self.controller_names]

        def same_host(listener: Listener) -> bool:
            return listener.host in _WILDCARD_HOSTS or listener.host.lower() == voter.host.lower()

        if any(same_host(lsn) and lsn.port == voter.port for lsn in own):
            return
        same = [lsn for lsn in own if same_host(lsn)]
        if same:
            raise self.fail(
                f"The controller listener {same[0]} does not listen on this node's voter "
                f"entry {self.node_id}@{voter} in controller.quorum.voters: the other "
                f"controllers connect to port {voter.port}, so use that port in listeners "
                "(or fix the voter entry).",
                "listeners",
            )
        self.warnings.append(
            f"This node's voter entry {self.node_id}@{voter} and its controller listener "
            f"{own[0]} name different hosts; the other controllers connect to {voter}, so make "
            "sure that address reaches this node."
        )

    def check_segment_bytes(self) -> None:
        segment = self.values["metadata.log.segment.bytes"]
        minimum = self.values["metadata.log.segment.min.bytes"]
        if segment < minimum:
            raise self.fail(
                f"Invalid value {segment} for configuration metadata.log.segment.bytes: must be "
                f">= metadata.log.segment.min.bytes ({minimum}).",
                "metadata.log.segment.bytes",
            )

    def warn_about_keys(self) -> None:
        known = [name for name, key in REGISTRY.items() if not key.internal]
        for key, value in self.raw.items():
            if key in REGISTRY or key in REJECTED_KAFKA_KEYS \
                    or config_security.is_listener_key(key):
                continue
            if key in BROKER_CONFIGS:
                shown = f"[{value.strip()}]" if "," in value else value.strip()
                self.warnings.append(
                    f"The configuration '{key}' is a dynamic broker config here and is "
                    "ignored in the node's file: set it for the cluster with kraft-admin "
                    "configs alter --entity-type brokers --entity-default --add-config "
                    f"{key}={shown}"
                )
                continue
            if key in IGNORED_KAFKA_KEYS or key.startswith(IGNORED_KAFKA_PREFIXES):
                reason = IGNORED_KAFKA_KEYS.get(key)
                self.warnings.append(
                    f"The Kafka configuration '{key}' has no effect in this implementation "
                    + (f"and is ignored: {reason}." if reason else "and is ignored.")
                )
                continue
            guess = difflib.get_close_matches(key, known, n=1)
            hint = f" Did you mean '{guess[0]}'?" if guess else ""
            self.warnings.append(
                f"The configuration '{key}' was supplied but isn't a known config; it is "
                f"ignored.{hint}"
            )
        if self.values["internal.test.hooks.enable"]:
            self.warnings.append(
                "internal.test.hooks.enable=true: the transport's fault-injection and "
                "raw-append test hooks are enabled. Never use this in production."
            )
