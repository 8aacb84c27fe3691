"""The node config's rules across keys, as Kafka's `KafkaConfig.validateValues` checks them,
in a fixed order so the first problem is the one reported, and what a node does with keys
nobody declared: Kafka keys with no effect here (IGNORED_KAFKA_KEYS) and the dynamic broker
configs (metadata.config_keys) are warnings, Kafka keys asking for what this project does not
do (REJECTED_KAFKA_KEYS) are errors. A problem is a `ConfigError` whose str() is one line.
server/config.py's parse_config runs them and builds the NodeConfig from what they derive.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from metadata.config_keys import BROKER_CONFIGS
from server import config_security
from server.config_keys import REGISTRY, ROLE_BROKER, ROLE_CONTROLLER
from server.config_listeners import SECURITY_PROTOCOLS, WILDCARD_HOSTS, Endpoint, Listener
from server.config_security import SecurityConfigError


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


@dataclass(frozen=True)
class DerivedSettings:
    """What the rules derive from several keys: NodeConfig's fields besides the keys."""

    advertised_listeners: dict[str, Listener]
    controller_listener_names: tuple[str, ...]
    log_dirs: tuple[str, ...]
    metadata_log_dir: str
    warnings: tuple[str, ...]


class Validator:
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

    def check(self) -> DerivedSettings:
        self.check_node_id()
        self.check_quorum()
        self.check_listeners()
        advertised = self.advertised_listeners()
        self.check_broker_listeners()
        self.check_security_protocols()
        self.check_voter_address()
        log_dirs = self.values["log.dirs"] or self.values["log.dir"]
        self.check_segment_bytes()
        self.check_consumer_group_timeouts()
        self.warn_about_keys()
        return DerivedSettings(
            advertised_listeners=advertised,
            controller_listener_names=self.controller_names,
            log_dirs=log_dirs,
            metadata_log_dir=self.values["metadata.log.dir"] or log_dirs[0],
            warnings=tuple(self.warnings),
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
                if not listener.host or listener.host in WILDCARD_HOSTS or listener.port == 0:
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
            return listener.host in WILDCARD_HOSTS or listener.host.lower() == voter.host.lower()

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

    def check_consumer_group_timeouts(self) -> None:
        """Kafka's GroupCoordinatorConfig rule: a consumer-protocol member must heartbeat
        within its session."""
        heartbeat = self.values["group.consumer.heartbeat.interval.ms"]
        session = self.values["group.consumer.session.timeout.ms"]
        if heartbeat >= session:
            raise self.fail(
                f"group.consumer.heartbeat.interval.ms ({heartbeat}) must be less than "
                f"group.consumer.session.timeout.ms ({session}).",
                "group.consumer.heartbeat.interval.ms",
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
