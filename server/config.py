"""Role configuration: Kafka's key names, defaults and validation rules, parsed into a NodeConfig.

Every supported key is declared once in the registry below (name, type, default, parser,
doc); `parse_config` parses the keys in registry order, then checks the cross-key rules
Kafka's `KafkaConfig.validateValues` checks. The first problem raises a `ConfigError` whose
str() is one line naming the key and saying what to do. Keys nobody declared are warnings.
"""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kraft.properties import PropertiesError, read_entries
from kraft.security.authorizer import (
    AclFileError,
    Authorizer,
    load_acl_file,
    parse_super_users,
)
from kraft.security.tls import TlsConfig

ROLE_BROKER = "broker"
ROLE_CONTROLLER = "controller"
_ROLES = (ROLE_BROKER, ROLE_CONTROLLER)
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SUPPORTED_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL")

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
_INTEGER = re.compile(r"[+-]?[0-9]+")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")
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
    """Kafka's LIST type: comma-separated, trimmed; an empty value is an empty list."""
    text = raw.strip()
    if not text:
        return []
    items = _LIST_SEPARATOR.split(text)
    if "" in items:
        raise ValueError("it has an empty entry; remove the stray comma")
    return items


def _integer(lo: int, hi: int, note: str = "") -> tuple[str, Callable[[str], int]]:
    """(description, parser) of an integer in [lo, hi]; hi at the type's limit reads `>= lo`."""
    unbounded = hi in (_INT_MAX, _LONG_MAX)
    description = f"an integer >= {lo}" if unbounded else f"an integer between {lo} and {hi}"
    if note:
        description += f" ({note})"

    def parse(raw: str) -> int:
        text = raw.strip()
        if not _INTEGER.fullmatch(text):
            raise ValueError(f"must be {description}")
        value = int(text)
        if value > hi and unbounded:  # only the type's limit was exceeded: name it
            raise ValueError(f"must be an integer between {lo} and {hi}")
        if not lo <= value <= hi:
            raise ValueError(f"must be {description}")
        return value

    return description, parse


def _parse_bool(raw: str) -> bool:
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise ValueError("must be true or false")
    return text == "true"


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
        if node_id > _INT_MAX:
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


# -- the registry ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigKey:
    """One supported key. `default` is the raw default string (None: no value);
    `parse` turns a raw string into the typed value or raises ValueError(reason)."""

    name: str
    type: str
    default: str | None
    parse: Callable[[str], Any]
    valid_values: str
    doc: str
    required: bool = False
    internal: bool = False


REGISTRY: dict[str, ConfigKey] = {}


def define(
    name: str,
    type_: str,
    default: str | None,
    parse: Callable[[str], Any],
    valid_values: str,
    doc: str,
    *,
    required: bool = False,
    internal: bool = False,
) -> ConfigKey:
    """Declare a supported key. Add a typed NodeConfig field for it if code reads it often;
    otherwise `NodeConfig.value(name)` returns the parsed value."""
    if name in REGISTRY:
        raise ValueError(f"configuration key {name} is defined twice")
    key = ConfigKey(name, type_, default, parse, valid_values, doc, required, internal)
    REGISTRY[name] = key
    return key


def _define_int(
    name: str, default: int, lo: int, doc: str, *, hi: int = _INT_MAX, note: str = "", **kw: bool
) -> None:
    type_ = "long" if hi == _LONG_MAX else "int"
    description, parse = _integer(lo, hi, note)
    define(name, type_, str(default), parse, description, doc, **kw)


define(
    "process.roles", "list", None, _parse_roles, "controller, broker, or both",
    "The roles of this node: `controller` (votes in the metadata quorum), `broker`, or "
    "`broker,controller` (combined mode).",
    required=True,
)
_NODE_ID_DESCRIPTION, _parse_node_id = _integer(0, _INT_MAX)
define(
    "node.id", "int", None, _parse_node_id, _NODE_ID_DESCRIPTION,
    "The id of this node. A controller's id must be one of the voters.",
    required=True,
)
define(
    "broker.id", "int", None, _parse_node_id, _NODE_ID_DESCRIPTION,
    "Kafka's older name for `node.id`: used when `node.id` is absent; if both are set they "
    "must be equal.",
)
define(
    "controller.quorum.voters", "list", "", parse_voters, "id@host:port,... (ids unique)",
    "The static voter set, identical on every node: each controller's id and the address "
    "the other nodes reach it at. Required for a controller.",
)
define(
    "controller.quorum.bootstrap.servers", "list", "", parse_endpoints, "host:port,...",
    "Controllers a broker may contact to discover the quorum leader (KIP-853 name). A "
    "controller still needs `controller.quorum.voters`: dynamic membership is not supported.",
)
_define_int(
    "controller.quorum.election.timeout.ms", 1000, 1,
    "Base election timeout T: a candidate or a voter without a leader waits a random time "
    "in [T, 2T) before starting an election.",
)
_define_int(
    "controller.quorum.fetch.timeout.ms", 2000, 1,
    "A follower that has not fetched successfully from the leader for this long becomes a "
    "candidate; the leader resigns after 1.5x this without hearing from a majority.",
)
_define_int(
    "controller.quorum.election.backoff.max.ms", 1000, 1,
    "Cap of the exponential backoff between failed elections.",
)
_define_int(
    "controller.quorum.request.timeout.ms", 2000, 1,
    "How long a Raft request may wait for its response before it is treated as failed.",
)
_define_int(
    "controller.quorum.retry.backoff.ms", 20, 0,
    "Wait before retrying a request to a node after an error.",
)
_define_int(
    "controller.quorum.append.linger.ms", 25, 0,
    "How long the leader accumulates appended records before flushing them as one batch.",
)
define(
    "listeners", "list", "PLAINTEXT://:9092", parse_listeners,
    "NAME://host:port,... (port 0 = ephemeral)",
    "The addresses this node binds. An empty host binds every interface.",
)
define(
    "advertised.listeners", "list", None, _parse_advertised_listeners, "NAME://host:port,...",
    "The addresses other nodes and clients should use, when they differ from `listeners`. "
    "Controller listeners not listed here are advertised as in `listeners`.",
)
define(
    "controller.listener.names", "list", None, _parse_listener_names, "listener names",
    "The listener(s) used for controller traffic; each must be a name in `listeners` on a "
    "controller. Required.",
)
define(
    "listener.security.protocol.map", "list",
    "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
    _parse_protocol_map, "NAME:PROTOCOL,...",
    "Security protocol of each listener: PLAINTEXT or SSL (TLS, mutual with "
    "ssl.client.auth=required); controller listener names missing from the map are PLAINTEXT. "
    "A broker-only node dials the controllers with the protocol its controller listener name "
    "maps to.",
)
define(
    "log.dirs", "list", None, _parse_dirs, "directories",
    "Directories holding this node's data, each with its `meta.properties`. Overrides "
    "`log.dir`. Relative paths are resolved against the process's working directory.",
)
define(
    "log.dir", "list", "/tmp/kraft-combined-logs", _parse_dirs, "directories",
    "Used when `log.dirs` is not set.",
)
define(
    "metadata.log.dir", "string", None, _parse_dir, "a directory",
    "Where the metadata log and snapshots live; defaults to the first log directory.",
)
_define_int(
    "metadata.log.segment.bytes", 1073741824, 12,
    "Maximum size of one metadata log segment; must be >= metadata.log.segment.min.bytes.",
)
_define_int(
    "metadata.log.segment.min.bytes", 8388608, 12,
    "Lower bound for metadata.log.segment.bytes; lowered by tests to exercise rolling.",
    internal=True,
)
_define_int(
    "metadata.log.segment.ms", 604800000, 1,
    "Roll a new metadata log segment after this long even if it is not full.",
    hi=_LONG_MAX,
)
_define_int(
    "broker.session.timeout.ms", 9000, 1,
    "The active controller fences a broker it has not heard a heartbeat from for this long.",
)
_define_int(
    "broker.heartbeat.interval.ms", 2000, 1,
    "How often a broker sends a heartbeat to the active controller.",
)
_define_int(
    "initial.broker.registration.timeout.ms", 60000, 1,
    "How long a starting broker keeps trying to register with the active controller before "
    "it gives up and exits.",
)
define(
    "broker.rack", "string", None, _parse_rack, "a rack name",
    "The rack of this broker, used by the controller's rack-aware replica placement.",
)
_define_int(
    "metadata.max.idle.interval.ms", 500, 0,
    "The active controller appends a NoOp record when nothing was written for this long, "
    "so followers see the high watermark advance; 0 disables it.",
)
_define_int(
    "metadata.max.retention.bytes", 104857600, -1,
    "Delete the oldest snapshots and log segments once log + snapshots exceed this size "
    "(a soft limit: the newest snapshot is always kept).",
    hi=_LONG_MAX, note="-1 = no limit",
)
_define_int(
    "metadata.max.retention.ms", 604800000, -1,
    "Delete snapshots (and the log before them) older than this, keeping the newest.",
    hi=_LONG_MAX, note="-1 = no limit",
)
_define_int(
    "metadata.log.max.record.bytes.between.snapshots", 20971520, 1,
    "Take a snapshot once this many bytes of records were appended since the last one.",
    hi=_LONG_MAX,
)
_define_int(
    "metadata.log.max.snapshot.interval.ms", 3600000, 0,
    "Take a snapshot at least this often if anything was committed; 0 disables the "
    "time-based trigger.",
    hi=_LONG_MAX,
)
_METRICS_PORT_DESCRIPTION, _parse_metrics_port = _integer(0, 65535, "0 = ephemeral")
define(
    "metrics.port", "int", None, _parse_metrics_port, _METRICS_PORT_DESCRIPTION,
    "Serve Prometheus metrics over HTTP on this port, on the controller listener's host "
    "(the first listener's on a broker). Absent = no metrics endpoint.",
)
define(
    "internal.test.hooks.enable", "boolean", "false", _parse_bool, "true or false",
    "Enable the transport's fault-injection and raw-append test hooks. Never in production.",
    internal=True,
)

define(
    "internal.test.faults.dir", "string", None, _parse_dir, "a directory",
    "A directory the node watches for injected faults (files blocked, disk-full, "
    "fsync-delay-ms, clock-offset-ms; see docs/chaos.md). For the chaos tool and tests only.",
    internal=True,
)

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
    if value not in ("none", "requested", "required"):
        raise ValueError("must be none, requested or required")
    return value


def _reject_key_password(raw: str) -> str:
    raise ValueError(
        "encrypted private keys are not supported: store the key unencrypted in the PEM "
        "keystore with permissions 0600, and remove ssl.key.password"
    )


define(
    "ssl.keystore.type", "string", "PEM", _parse_pem_type, "PEM",
    "Format of the keystore and truststore files.",
)
define(
    "ssl.keystore.location", "string", None, _parse_dir, "a PEM file",
    "This node's private key and certificate chain (one PEM file), for SSL listeners and for "
    "the clients it opens to SSL listeners of other nodes.",
)
define(
    "ssl.truststore.type", "string", "PEM", _parse_pem_type, "PEM",
    "Format of the truststore file.",
)
define(
    "ssl.truststore.location", "string", None, _parse_dir, "a PEM file",
    "The CA certificates that peers' and clients' certificates must chain to.",
)
define(
    "ssl.client.auth", "string", "none", _parse_client_auth, "none, requested, required",
    "Whether SSL listeners ask clients for a certificate: required makes them mutual TLS.",
)
define(
    "ssl.key.password", "password", None, _reject_key_password, "(not supported)",
    "Kafka's password of an encrypted private key; not supported.",
)
define(
    "authorizer.class.name", "string", "", lambda raw: raw.strip(), "a class name or empty",
    "Set (to any name, e.g. Kafka's org.apache.kafka.metadata.authorizer.StandardAuthorizer) "
    "to authorize every request: super.users may do everything, others what "
    "authorizer.acl.file grants them.",
)
define(
    "super.users", "string", "", lambda raw: raw.strip(), "User:PRINCIPAL;...",
    "Principals allowed every operation, separated by semicolons, e.g. "
    "User:CN=controller-1,O=example;User:CN=admin,O=example. Controllers and brokers belong "
    "here.",
)
define(
    "authorizer.acl.file", "string", None, _parse_dir, "a JSON file",
    'Per-principal grants: {"acls": [{"principal": "User:CN=ops", "operations": ["Create", '
    '"AlterConfigs"]}]}; operations: Create, Delete, Alter, AlterConfigs, Describe, '
    "DescribeConfigs, ClusterAction, All.",
)
define(
    "allow.everyone.if.no.acl.found", "boolean", "false", _parse_bool, "true or false",
    "With an authorizer: true lets every principal read (Describe, DescribeConfigs); writes "
    "still need super.users or a grant.",
)

# Kafka keys we read and deliberately ignore: they tune parts of Kafka this project does not
# have (or not yet), so a copied Kafka config still loads. Each one present is a warning.
IGNORED_KAFKA_KEYS: frozenset[str] = frozenset(
    {
        "auto.create.topics.enable",
        "auto.leader.rebalance.enable",
        "default.replication.factor",
        "delete.topic.enable",
        "eligible.leader.replicas.enable",
        "group.initial.rebalance.delay.ms",
        "inter.broker.listener.name",
        "leader.imbalance.check.interval.seconds",
        "leader.imbalance.per.broker.percentage",
        "log.cleaner.enable",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.check.interval.ms",
        "log.retention.hours",
        "log.segment.bytes",
        "min.insync.replicas",
        "num.io.threads",
        "num.network.threads",
        "num.partitions",
        "num.recovery.threads.per.data.dir",
        "offsets.topic.replication.factor",
        "share.coordinator.state.topic.min.isr",
        "share.coordinator.state.topic.replication.factor",
        "socket.receive.buffer.bytes",
        "socket.request.max.bytes",
        "socket.send.buffer.bytes",
        "transaction.state.log.min.isr",
        "transaction.state.log.replication.factor",
        "unclean.leader.election.enable",
    }
)
IGNORED_KAFKA_PREFIXES: tuple[str, ...] = ("ssl.", "sasl.", "listener.name.")

# Kafka keys that ask for something we do not do; accepting them silently would mislead.
REJECTED_KAFKA_KEYS: dict[str, str] = {
    "zookeeper.connect": "ZooKeeper mode is not supported: remove zookeeper.connect and run "
    "in KRaft mode (process.roles, controller.quorum.voters).",
    "zookeeper.metadata.migration.enable": "ZooKeeper migration is not supported: remove "
    "zookeeper.metadata.migration.enable.",
    "control.plane.listener.name": "control.plane.listener.name is not supported in KRaft "
    "mode: remove it and use controller.listener.names.",
    "controller.quorum.auto.join.enable": "Dynamic quorum membership (KIP-853) is not "
    "supported: remove controller.quorum.auto.join.enable and list every controller in "
    "controller.quorum.voters.",
}


# -- NodeConfig ------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeConfig:
    """A validated role configuration. Paths are as written (relative ones resolve against
    the working directory). `values` holds the parsed value of every registered key."""

    source: str
    process_roles: frozenset[str]
    node_id: int
    voters: dict[int, Endpoint]
    bootstrap_servers: tuple[Endpoint, ...]
    listeners: dict[str, Listener]
    advertised_listeners: dict[str, Listener]
    controller_listener_names: tuple[str, ...]
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    election_timeout_ms: int
    fetch_timeout_ms: int
    election_backoff_max_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    append_linger_ms: int
    metadata_log_segment_bytes: int
    metadata_log_segment_min_bytes: int
    metadata_log_segment_ms: int
    metadata_max_idle_interval_ms: int
    metadata_max_retention_bytes: int
    metadata_max_retention_ms: int
    metadata_log_max_record_bytes_between_snapshots: int
    metadata_log_max_snapshot_interval_ms: int
    metrics_port: int | None
    test_hooks_enabled: bool
    warnings: tuple[str, ...] = ()
    raw: dict[str, str] = field(default_factory=dict)
    values: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def is_controller(self) -> bool:
        return ROLE_CONTROLLER in self.process_roles

    @property
    def is_broker(self) -> bool:
        return ROLE_BROKER in self.process_roles

    def listener_protocol(self, name: str) -> str:
        """PLAINTEXT or SSL, as listener.security.protocol.map says (validated at load)."""
        protocols: dict[str, str] = self.values["listener.security.protocol.map"]
        return protocols.get(name) or (name if name in SECURITY_PROTOCOLS else "PLAINTEXT")

    def tls_for(self, listener_name: str) -> TlsConfig | None:
        """The TLS settings of a listener, or of the clients dialing it; None for PLAINTEXT."""
        if self.listener_protocol(listener_name) != "SSL":
            return None
        return TlsConfig(
            self.values["ssl.keystore.location"], self.values["ssl.truststore.location"],
            self.values["ssl.client.auth"],
        )

    @property
    def controller_tls(self) -> TlsConfig | None:
        """How this node dials the controllers (Raft, lifecycle, forwarded admin writes)."""
        return self.tls_for(self.controller_listener_names[0])

    def authorizer(self) -> Authorizer | None:
        """None unless authorizer.class.name is set. Raises ConfigError for a bad ACL file."""
        if not self.values["authorizer.class.name"]:
            return None
        grants = {}
        acl_file = self.values["authorizer.acl.file"]
        if acl_file is not None:
            try:
                grants = load_acl_file(acl_file)
            except AclFileError as exc:
                raise ConfigError(str(exc), key="authorizer.acl.file", source=self.source) from exc
        return Authorizer(
            parse_super_users(self.values["super.users"]), grants,
            self.values["allow.everyone.if.no.acl.found"],
        )

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
        """The parsed value of a registered key (None when unset without a default)."""
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
        self.check_security_protocols()
        self.check_voter_address()
        log_dirs = self.values["log.dirs"] or self.values["log.dir"]
        self.check_segment_bytes()
        self.warn_about_keys()
        v = self.values
        return NodeConfig(
            source=self.source,
            process_roles=self.roles,
            node_id=self.node_id,
            voters=self.voters,
            bootstrap_servers=v["controller.quorum.bootstrap.servers"],
            listeners=self.listeners,
            advertised_listeners=advertised,
            controller_listener_names=self.controller_names,
            log_dirs=log_dirs,
            metadata_log_dir=v["metadata.log.dir"] or log_dirs[0],
            election_timeout_ms=v["controller.quorum.election.timeout.ms"],
            fetch_timeout_ms=v["controller.quorum.fetch.timeout.ms"],
            election_backoff_max_ms=v["controller.quorum.election.backoff.max.ms"],
            request_timeout_ms=v["controller.quorum.request.timeout.ms"],
            retry_backoff_ms=v["controller.quorum.retry.backoff.ms"],
            append_linger_ms=v["controller.quorum.append.linger.ms"],
            metadata_log_segment_bytes=v["metadata.log.segment.bytes"],
            metadata_log_segment_min_bytes=v["metadata.log.segment.min.bytes"],
            metadata_log_segment_ms=v["metadata.log.segment.ms"],
            metadata_max_idle_interval_ms=v["metadata.max.idle.interval.ms"],
            metadata_max_retention_bytes=v["metadata.max.retention.bytes"],
            metadata_max_retention_ms=v["metadata.max.retention.ms"],
            metadata_log_max_record_bytes_between_snapshots=v[
                "metadata.log.max.record.bytes.between.snapshots"
            ],
            metadata_log_max_snapshot_interval_ms=v["metadata.log.max.snapshot.interval.ms"],
            metrics_port=v["metrics.port"],
            test_hooks_enabled=v["internal.test.hooks.enable"],
            warnings=tuple(self.warnings),
            raw=self.raw,
            values=v,
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
            if not self.voters:
                raise self.fail(
                    "A controller needs controller.quorum.voters: only static quorums are "
                    "supported (no KIP-853 dynamic membership), so list every controller as "
                    "id@host:port in controller.quorum.voters; "
                    "controller.quorum.bootstrap.servers alone is not enough.",
                    "controller.quorum.voters",
                )
            if self.node_id not in self.voters:
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
                        f"controller.quorum.voters; remove {self.listeners[name]} from listeners.",
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
                    voter = self.voters[self.node_id]
                    raise self.fail(
                        f"The advertised controller listener {listener} needs a host and a "
                        "non-zero port other nodes can connect to: set advertised.listeners="
                        f"{name}://{voter} (this node's voter entry is "
                        f"{self.node_id}@{voter}) or put the host and port in listeners.",
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
            if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
                raise self.fail(
                    f"The listener {listener} uses security protocol {protocol}, but only "
                    f"PLAINTEXT and SSL are implemented (no SASL): map {name} to SSL or "
                    "PLAINTEXT in listener.security.protocol.map.",
                    "listener.security.protocol.map",
                )
        uses_ssl = any(
            protocols.get(name) == "SSL" or (name == "SSL" and name not in protocols)
            for name in [*self.listeners, *self.controller_names]
        )
        if uses_ssl:
            for key in ("ssl.keystore.location", "ssl.truststore.location"):
                if self.values[key] is None:
                    raise self.fail(
                        f"A listener uses SSL but {key} is not set: point it at a PEM file "
                        "(kraft-storage make-test-certs makes a test CA and keystores).",
                        key,
                    )

    def check_voter_address(self) -> None:
        """Other controllers dial our voter entry, so a controller must listen on it."""
        if ROLE_CONTROLLER not in self.roles:
            return
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
        for key in self.raw:
            if key in REGISTRY or key in REJECTED_KAFKA_KEYS:
                continue
            if key in IGNORED_KAFKA_KEYS or key.startswith(IGNORED_KAFKA_PREFIXES):
                self.warnings.append(
                    f"The Kafka configuration '{key}' has no effect in this implementation "
                    "and is ignored."
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
