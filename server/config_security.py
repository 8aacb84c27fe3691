"""The node config's keys for who may connect to the Kafka listeners, and how much they may
hold: SASL (kafka-security.md §3), the client quotas' window (§5) and connection limits (§6),
with Kafka's names and defaults.

server/config_keys.py registers these keys with the rest (SECURITY_KEYS) and
server/config_rules.py calls `check` among its cross-key rules. PLAIN checks passwords
against the listener's JAAS config as Kafka's PlainServerCallbackHandler does:
`listener.name.<listener>.plain.sasl.jaas.config` with `user_<name>="<password>"` options (a
copied Kafka config works unchanged); SCRAM checks against the credentials in the metadata
log. SASL serves clients only: controllers, the gRPC listeners and replication between
brokers use PLAINTEXT or SSL.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from broker.kafka.sasl.jaas import JaasConfigError, plain_users
from broker.kafka.sasl.mechanisms import PLAIN, SUPPORTED_MECHANISMS
from broker.kafka.sasl.settings import SaslSettings
from broker.quotas import QuotaWindow
from kraft.security.tls import CLIENT_AUTH_VALUES
from metadata.config_def import INT_MAX, LONG_MAX, ConfigDef, ConfigKey, ConfigType, integer

if TYPE_CHECKING:
    from server.config import NodeConfig

SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_LISTENER_KEY = re.compile(
    r"listener\.name\.([a-z0-9_]+)\.(?:plain\.sasl\.jaas\.config|sasl\.enabled\.mechanisms"
    r"|ssl\.client\.auth)")


class SecurityConfigError(ValueError):
    """A rule broken; str() is the one-line message, `key` the key to fix."""

    def __init__(self, message: str, key: str) -> None:
        super().__init__(message)
        self.key = key


SECURITY_KEYS = ConfigDef()


def _define_int(name: str, default: int, lo: int, doc: str, *, hi: int = INT_MAX,
                note: str = "") -> ConfigKey[int]:
    description, parse = integer(lo, hi, note)
    type_ = ConfigType.LONG if hi == LONG_MAX else ConfigType.INT
    return SECURITY_KEYS.define(name, type_, str(default), parse, doc, valid_values=description)


def _mechanisms(raw: str) -> tuple[str, ...]:
    names = tuple(name.strip() for name in raw.split(",") if name.strip())
    if len(set(names)) != len(names):
        raise ValueError("a mechanism is listed twice")
    return names


def _overrides(raw: str) -> Mapping[str, int]:
    """`host:n,...` (Kafka's max.connections.per.ip.overrides; an IPv6 host's colons stay)."""
    overrides: dict[str, int] = {}
    for entry in (item.strip() for item in raw.split(",")):
        if not entry:
            continue
        host, colon, count = entry.rpartition(":")
        if not colon or not host or not count.isdigit() or int(count) > INT_MAX:
            raise ValueError(f'entry "{entry}" must be host:count with a count >= 0')
        overrides[host.strip("[]")] = int(count)
    return MappingProxyType(overrides)


SASL_ENABLED_MECHANISMS = SECURITY_KEYS.define(
    "sasl.enabled.mechanisms", ConfigType.LIST, "GSSAPI", _mechanisms,
    "The SASL mechanisms the SASL_PLAINTEXT and SASL_SSL listeners accept, in the order "
    "SaslHandshake lists them (listener.name.<listener>.sasl.enabled.mechanisms sets one "
    "listener's). Supported: SCRAM-SHA-512, SCRAM-SHA-256 (users in the metadata log) and PLAIN "
    "(users in listener.name.<listener>.plain.sasl.jaas.config). Kafka's default GSSAPI "
    "(Kerberos) is not supported, so a SASL listener needs this set.",
    valid_values="SCRAM-SHA-512, SCRAM-SHA-256, PLAIN",
)
SASL_SERVER_MAX_RECEIVE_SIZE = _define_int(
    "sasl.server.max.receive.size", 524288, 1,
    "The largest frame a client may send before it has authenticated; a larger one fails the "
    "authentication.")
CONNECTION_FAILED_AUTHENTICATION_DELAY_MS = _define_int(
    "connection.failed.authentication.delay.ms", 100, 0,
    "How long a failed SASL authentication waits before its answer is sent and the connection "
    "closed (slows down password guessing).")
CONNECTIONS_MAX_REAUTH_MS = _define_int(
    "connections.max.reauth.ms", 0, 0,
    "With a value > 0, a SASL session lasts this long (SaslAuthenticate tells the client): it "
    "must re-authenticate on the same connection (KIP-368) or be disconnected at its next "
    "request. 0: sessions never expire.", hi=LONG_MAX)
MAX_CONNECTIONS = _define_int(
    "max.connections", INT_MAX, 0,
    "The most client connections the broker's Kafka listeners hold at once; at the limit they "
    "stop accepting until one closes. The inter-broker listener is exempt.")
MAX_CONNECTIONS_PER_IP = _define_int(
    "max.connections.per.ip", INT_MAX, 0,
    "The most Kafka connections from one address; more are closed as soon as they are "
    "accepted. 0 needs max.connections.per.ip.overrides.")
MAX_CONNECTIONS_PER_IP_OVERRIDES = SECURITY_KEYS.define(
    "max.connections.per.ip.overrides", ConfigType.STRING, "", _overrides,
    "Per-address exceptions to max.connections.per.ip, e.g. 10.0.0.5:200,admin-host:50 (host "
    "names are resolved once, at start).",
    valid_values="host:count,...",
)
CONNECTIONS_MAX_IDLE_MS = _define_int(
    "connections.max.idle.ms", 600000, -1,
    "A Kafka connection with no request for this long, and none being answered, is closed. "
    "-1: never.", hi=LONG_MAX)
QUEUED_MAX_REQUEST_BYTES = _define_int(
    "queued.max.request.bytes", -1, -1,
    "The request bytes the broker holds at once, received and not yet answered, across all "
    "connections; with none left the listeners stop reading until a request is answered. <= 0: "
    "no limit (Kafka's default). Must be >= socket.request.max.bytes when set.", hi=LONG_MAX)
SOCKET_REQUEST_BODY_TIMEOUT_MS = _define_int(
    "socket.request.body.timeout.ms", 30000, 1,
    "Not a Kafka key: once a request's size is read, its whole body must arrive within this "
    "long or the connection is closed (a half-sent request holds no memory for long). The "
    "default is a client's request.timeout.ms, after which it gave up anyway.")

QUOTA_WINDOW_NUM = _define_int(
    "quota.window.num", 11, 1,
    "The samples the client quotas' rates are measured over (producer_byte_rate, "
    "consumer_byte_rate, request_percentage).")
QUOTA_WINDOW_SIZE_SECONDS = _define_int(
    "quota.window.size.seconds", 1, 1,
    "The time span of each sample of the client quotas' rates; also the longest throttle the "
    "request quota gives.")


def quota_window(config: NodeConfig) -> QuotaWindow:
    values = config.values
    return QuotaWindow(values["quota.window.num"], values["quota.window.size.seconds"] * 1000)


@dataclass(frozen=True)
class ConnectionLimits:
    """What one client may hold on a broker's Kafka listeners (the keys above)."""

    max_connections: int
    max_connections_per_ip: int
    max_connections_per_ip_overrides: Mapping[str, int]
    queued_max_request_bytes: int
    connections_max_idle_ms: int
    socket_request_body_timeout_ms: int


def connection_limits(config: NodeConfig) -> ConnectionLimits:
    values = config.values
    return ConnectionLimits(
        values["max.connections"], values["max.connections.per.ip"],
        values["max.connections.per.ip.overrides"], values["queued.max.request.bytes"],
        values["connections.max.idle.ms"], values["socket.request.body.timeout.ms"])


def is_listener_key(key: str) -> bool:
    """A listener-prefixed SASL key this module reads (so no unknown-key warning)."""
    return _LISTENER_KEY.fullmatch(key) is not None


def client_auth_key(listener: str) -> str:
    return f"listener.name.{listener.lower()}.ssl.client.auth"


def listener_client_auth(raw: Mapping[str, str], listener: str, protocol: str,
                         default: str) -> str:
    """Whether a TLS listener asks for client certificates: its
    listener.name.<l>.ssl.client.auth, else ssl.client.auth on SSL listeners and `none` on
    SASL_SSL ones (KIP-684: the broker-wide key does not reach SASL_SSL listeners)."""
    value = raw.get(client_auth_key(listener))
    if value is not None:
        return value.strip().lower()
    return "none" if protocol == "SASL_SSL" else default


def jaas_key(listener: str) -> str:
    return f"listener.name.{listener.lower()}.plain.sasl.jaas.config"


def _mechanisms_of(values: Mapping[str, Any], raw: Mapping[str, str],
                   listener: str) -> tuple[str, tuple[str, ...]]:
    """(the key that sets them, the mechanisms) for one listener."""
    key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    if key in raw:
        try:
            return key, _mechanisms(raw[key])
        except ValueError as exc:
            raise SecurityConfigError(f"Invalid value {raw[key]} for configuration {key}: "
                                      f"{exc}.", key) from None
    return "sasl.enabled.mechanisms", values["sasl.enabled.mechanisms"]


def sasl_for(config: NodeConfig, listener: str) -> SaslSettings | None:
    """A SASL listener's settings (checked at load by `check`) but the SCRAM credential
    lookup, which the broker adds (its metadata image); None for a listener without SASL."""
    if config.listener_protocol(listener) not in SASL_PROTOCOLS:
        return None
    values, raw = config.values, config.raw
    _, mechanisms = _mechanisms_of(values, raw, listener)
    users: Mapping[str, str] = MappingProxyType({})
    if PLAIN in mechanisms:
        users = plain_users(raw[jaas_key(listener)])
    return SaslSettings(
        mechanisms, users,
        max_receive_size=values["sasl.server.max.receive.size"],
        reauth_ms=values["connections.max.reauth.ms"],
        failed_authentication_delay_ms=values["connection.failed.authentication.delay.ms"])


def check(values: Mapping[str, Any], raw: Mapping[str, str], protocols: Mapping[str, str],
          controller_names: Collection[str], broker: bool) -> None:
    """The cross-key rules of these keys and of TLS. `protocols`: the protocol of every
    listener and controller listener name, as the node uses it."""
    grpc_names = values["grpc.listener.names"] or ()
    kafka = [name for name in protocols if broker and name in values["listeners"]
             and name not in controller_names and name not in grpc_names]
    inter_broker = values["inter.broker.listener.name"] or (kafka[0] if kafka else None)
    for name, protocol in protocols.items():
        key = client_auth_key(name)
        if key in raw and raw[key].strip().lower() not in CLIENT_AUTH_VALUES:
            raise SecurityConfigError(
                f"Invalid value {raw[key].strip()} for configuration {key}: must be none, "
                "requested or required.", key)
        if protocol not in SASL_PROTOCOLS:
            continue
        if name not in kafka:
            raise SecurityConfigError(
                f"The listener {name} uses {protocol}, but SASL is implemented on the brokers' "
                f"Kafka-protocol listeners only (controller and gRPC listeners use mutual TLS): "
                f"map {name} to SSL or PLAINTEXT in listener.security.protocol.map.",
                "listener.security.protocol.map")
        if name == inter_broker:
            raise SecurityConfigError(
                f"The inter-broker listener {name} uses {protocol}, but brokers replicate over "
                "PLAINTEXT or SSL only (no sasl.mechanism.inter.broker.protocol): add an SSL "
                "listener for replication and name it in inter.broker.listener.name.",
                "inter.broker.listener.name")
        _check_listener(values, raw, name)
    if any(protocol in TLS_PROTOCOLS for protocol in protocols.values()):
        for key in ("ssl.keystore.location", "ssl.truststore.location"):
            if values[key] is None:
                raise SecurityConfigError(
                    f"A listener uses SSL but {key} is not set: point it at a PEM file "
                    "(kraft-storage make-test-certs makes a test CA and keystores).", key)
    if values["max.connections.per.ip"] == 0 and not values["max.connections.per.ip.overrides"]:
        raise SecurityConfigError(
            "max.connections.per.ip can be set to zero only if "
            "max.connections.per.ip.overrides property is set.", "max.connections.per.ip")
    queued, largest = values["queued.max.request.bytes"], values["socket.request.max.bytes"]
    if 0 < queued < largest:
        raise SecurityConfigError(
            f"queued.max.request.bytes ({queued}) must be larger or equal to "
            f"socket.request.max.bytes ({largest}), or <= 0 for no limit.",
            "queued.max.request.bytes")


def _check_listener(values: Mapping[str, Any], raw: Mapping[str, str], name: str) -> None:
    key, mechanisms = _mechanisms_of(values, raw, name)
    if not mechanisms:
        raise SecurityConfigError(
            f"The SASL listener {name} has no mechanism enabled: set {key} to SCRAM-SHA-512, "
            "SCRAM-SHA-256 and/or PLAIN.", key)
    for mechanism in mechanisms:
        if mechanism not in SUPPORTED_MECHANISMS:
            raise SecurityConfigError(
                f"The SASL mechanism {mechanism} ({key}) is not supported on listener {name}: "
                "use SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN.", key)
    if PLAIN not in mechanisms:
        return
    jaas = jaas_key(name)
    if jaas not in raw:
        raise SecurityConfigError(
            f"PLAIN is enabled on listener {name} but {jaas} is not set: add {jaas}="
            f'{"org.apache.kafka.common.security.plain.PlainLoginModule"} required '
            'user_<name>="<password>" ...; (one user_ entry per user).', jaas)
    try:
        plain_users(raw[jaas])
    except JaasConfigError as exc:
        raise SecurityConfigError(f"Invalid value for configuration {jaas}: {exc}.",
                                  jaas) from None
