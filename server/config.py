"""Role configuration: a node's config file parsed into a NodeConfig, the entry point
(load_config, parse_config, NodeConfig, ConfigError).

The pieces: server/config_keys.py declares every supported key once in REGISTRY (name, type,
default, parser, doc; metadata.config_def), and NodeConfig's typed attributes are those keys
themselves; server/config_listeners.py parses listeners and addresses; server/config_rules.py
checks the cross-key rules Kafka's `KafkaConfig.validateValues` checks and warns about keys
nobody declared; server/config_security.py holds SASL, TLS and connection-limit keys and rules.
`parse_config` parses the keys in registry order, then checks the rules. The first problem
raises a `ConfigError` whose str() is one line naming the key and saying what to do.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kraft.properties import PropertiesError, read_entries
from kraft.security.tls import TlsConfig
from metadata.authorizer.standard import StandardAuthorizer, parse_super_users
from server import config_security
from server.config_keys import (
    ALLOW_EVERYONE_IF_NO_ACL_FOUND,
    AUTHORIZER_ACL_FILE,
    AUTHORIZER_CLASS_NAME,
    AUTO_CREATE_TOPICS_ENABLE,
    BROKER_HEARTBEAT_INTERVAL_MS,
    BROKER_LIVENESS_GRACE_MS,
    BROKER_LIVENESS_PROBE_ENABLE,
    BROKER_LIVENESS_RECONNECT_BACKOFF_MS,
    BROKER_RACK,
    BROKER_SESSION_TIMEOUT_MS,
    FETCH_MAX_BYTES,
    GROUP_CONSUMER_ASSIGNORS,
    GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS,
    GROUP_CONSUMER_MAX_SIZE,
    GROUP_CONSUMER_SESSION_TIMEOUT_MS,
    GROUP_INITIAL_REBALANCE_DELAY_MS,
    GROUP_MAX_SESSION_TIMEOUT_MS,
    GROUP_MAX_SIZE,
    GROUP_MIN_SESSION_TIMEOUT_MS,
    GRPC_LISTENER_NAMES,
    INITIAL_BROKER_REGISTRATION_TIMEOUT_MS,
    INTER_BROKER_LISTENER_NAME,
    LISTENER_SECURITY_PROTOCOL_MAP,
    LISTENERS,
    LOG_CLEANER_BACKOFF_MS,
    LOG_CLEANER_DEDUPE_BUFFER_SIZE,
    LOG_CLEANER_ENABLE,
    LOG_CLEANER_THREADS,
    LOG_FLUSH_OFFSET_CHECKPOINT_INTERVAL_MS,
    LOG_RETENTION_CHECK_INTERVAL_MS,
    MAX_INCREMENTAL_FETCH_SESSION_CACHE_SLOTS,
    METADATA_LOG_MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS,
    METADATA_LOG_MAX_SNAPSHOT_INTERVAL_MS,
    METADATA_LOG_SEGMENT_BYTES,
    METADATA_LOG_SEGMENT_MIN_BYTES,
    METADATA_MAX_IDLE_INTERVAL_MS,
    METADATA_MAX_RETENTION_BYTES,
    METADATA_MAX_RETENTION_MS,
    METRICS_PORT,
    NODE_ID,
    NUM_RECOVERY_THREADS_PER_DATA_DIR,
    OFFSET_METADATA_MAX_BYTES,
    OFFSETS_COMMIT_TIMEOUT_MS,
    OFFSETS_RETENTION_CHECK_INTERVAL_MS,
    OFFSETS_RETENTION_MINUTES,
    OFFSETS_TOPIC_NUM_PARTITIONS,
    OFFSETS_TOPIC_REPLICATION_FACTOR,
    OFFSETS_TOPIC_SEGMENT_BYTES,
    PROCESS_ROLES,
    QUORUM_BOOTSTRAP_SERVERS,
    QUORUM_ELECTION_BACKOFF_MAX_MS,
    QUORUM_ELECTION_TIMEOUT_MS,
    QUORUM_FETCH_TIMEOUT_MS,
    QUORUM_REQUEST_TIMEOUT_MS,
    QUORUM_RETRY_BACKOFF_MS,
    QUORUM_VOTERS,
    REGISTRY,
    REPLICA_FETCH_BACKOFF_MS,
    REPLICA_FETCH_MAX_BYTES,
    REPLICA_FETCH_RESPONSE_MAX_BYTES,
    REPLICA_FETCH_WAIT_MAX_MS,
    REPLICA_HIGH_WATERMARK_CHECKPOINT_INTERVAL_MS,
    REPLICA_LAG_TIME_MAX_MS,
    ROLE_BROKER,
    ROLE_CONTROLLER,
    SOCKET_REQUEST_MAX_BYTES,
    SSL_CLIENT_AUTH,
    SSL_KEYSTORE_LOCATION,
    SSL_PRINCIPAL_MAPPING_RULES,
    SSL_TRUSTSTORE_LOCATION,
    SUPER_USERS,
    TEST_FAULTS_DIR,
    TEST_HOOKS_ENABLE,
)
from server.config_listeners import SECURITY_PROTOCOLS, Endpoint, Listener
from server.config_rules import REJECTED_KAFKA_KEYS, ConfigError, Validator
from server.config_security import TLS_PROTOCOLS

# The public entry point: ConfigError is what load_config and parse_config raise.
__all__ = ["ConfigError", "NodeConfig", "load_config", "parse_config"]


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
    broker_liveness_probe_enable = BROKER_LIVENESS_PROBE_ENABLE
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
    group_consumer_session_timeout_ms = GROUP_CONSUMER_SESSION_TIMEOUT_MS
    group_consumer_heartbeat_interval_ms = GROUP_CONSUMER_HEARTBEAT_INTERVAL_MS
    group_consumer_assignors = GROUP_CONSUMER_ASSIGNORS
    group_consumer_max_size = GROUP_CONSUMER_MAX_SIZE
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
    derived = Validator(raw, values, source).check()
    return NodeConfig(
        source=source,
        advertised_listeners=derived.advertised_listeners,
        controller_listener_names=derived.controller_listener_names,
        log_dirs=derived.log_dirs,
        metadata_log_dir=derived.metadata_log_dir,
        warnings=derived.warnings,
        raw=raw,
        values=values,
    )


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
