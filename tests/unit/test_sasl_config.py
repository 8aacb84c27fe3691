"""The SASL and connection-limit keys (server/config_security.py) as a broker's config file
sets them, with Kafka's names, defaults and rules, and the one-line messages."""

from __future__ import annotations

import pytest

from server.config import ConfigError, NodeConfig, parse_config
from server.config_security import connection_limits, sasl_for

JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        'user_alice="alice-pw" user_bob="bob-pw";')
BROKER = {
    "process.roles": "broker",
    "node.id": "4",
    "controller.quorum.voters": "1@127.0.0.1:9093",
    "controller.listener.names": "CONTROLLER",
    "listeners": "REPLICATION://127.0.0.1:9092,CLIENT://127.0.0.1:9094,OTHER://127.0.0.1:9095",
    "inter.broker.listener.name": "REPLICATION",
    "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,REPLICATION:PLAINTEXT,"
                                      "CLIENT:SASL_SSL,OTHER:SASL_PLAINTEXT",
    "ssl.keystore.location": "/k.pem",
    "ssl.truststore.location": "/ca.pem",
    "sasl.enabled.mechanisms": "SCRAM-SHA-512,PLAIN",
    "listener.name.client.plain.sasl.jaas.config": JAAS,
    "listener.name.other.plain.sasl.jaas.config": JAAS,
    "log.dirs": "/data/b4",
}


def config(**overrides: str | None) -> NodeConfig:
    props = dict(BROKER)
    for name, value in overrides.items():
        key = name.replace("__", ".")
        if value is None:
            props.pop(key, None)
        else:
            props[key] = value
    return parse_config(props, "broker.properties")


def error(**overrides: str | None) -> str:
    with pytest.raises(ConfigError) as info:
        config(**overrides)
    assert "\n" not in str(info.value)
    return str(info.value)


def test_sasl_listeners_get_their_settings_and_tls() -> None:
    cfg = config(connections__max__reauth__ms="60000",
                 listener__name__other__sasl__enabled__mechanisms="SCRAM-SHA-256")
    assert cfg.warnings == ()  # the listener-prefixed keys are known
    client = sasl_for(cfg, "CLIENT")
    assert client is not None and client.mechanisms == ("SCRAM-SHA-512", "PLAIN")
    assert dict(client.plain_users) == {"alice": "alice-pw", "bob": "bob-pw"}
    assert client.reauth_ms == 60000 and client.max_receive_size == 524288
    assert client.failed_authentication_delay_ms == 100
    other = sasl_for(cfg, "OTHER")
    assert other is not None and other.mechanisms == ("SCRAM-SHA-256",)
    assert sasl_for(cfg, "REPLICATION") is None
    assert cfg.tls_for("CLIENT") is not None  # SASL_SSL
    assert cfg.tls_for("OTHER") is None  # SASL_PLAINTEXT


def test_kafkas_default_gssapi_is_refused_on_a_sasl_listener() -> None:
    assert error(sasl__enabled__mechanisms=None) == (
        "The SASL mechanism GSSAPI (sasl.enabled.mechanisms) is not supported on listener "
        "CLIENT: use SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN.")
    assert "has no mechanism enabled" in error(sasl__enabled__mechanisms="")
    # Without a SASL listener the key is not looked at (Kafka's default stays harmless).
    config(sasl__enabled__mechanisms=None, listeners="REPLICATION://127.0.0.1:9092")


def test_plain_needs_the_listeners_jaas_config() -> None:
    message = error(listener__name__client__plain__sasl__jaas__config=None)
    assert message.startswith("PLAIN is enabled on listener CLIENT but "
                              "listener.name.client.plain.sasl.jaas.config is not set")
    assert error(listener__name__client__plain__sasl__jaas__config="x required user_a=;") == (
        "Invalid value for configuration listener.name.client.plain.sasl.jaas.config: Value not "
        "specified for key 'user_a' in JAAS config.")
    config(sasl__enabled__mechanisms="SCRAM-SHA-512",
           listener__name__client__plain__sasl__jaas__config=None,
           listener__name__other__plain__sasl__jaas__config=None)


def test_sasl_only_on_client_listeners() -> None:
    assert "but brokers replicate over PLAINTEXT or SSL only" in error(
        inter__broker__listener__name="CLIENT")
    assert error(listener__security__protocol__map="CONTROLLER:SASL_PLAINTEXT,"
                 "REPLICATION:PLAINTEXT,CLIENT:SASL_SSL,OTHER:PLAINTEXT").startswith(
        "The listener CONTROLLER uses SASL_PLAINTEXT, but SASL is implemented on the brokers' "
        "Kafka-protocol listeners only")


def test_sasl_ssl_needs_the_keystore() -> None:
    assert error(ssl__keystore__location=None).startswith(
        "A listener uses SSL but ssl.keystore.location is not set")


def test_connection_limit_keys_and_their_rules() -> None:
    cfg = connection_limits(config(
        max__connections="100", max__connections__per__ip="5",
        max__connections__per__ip__overrides="10.0.0.1:50, [::1]:7,host-a:0",
        connections__max__idle__ms="-1", queued__max__request__bytes="209715200",
        socket__request__body__timeout__ms="5000"))
    assert (cfg.max_connections, cfg.max_connections_per_ip) == (100, 5)
    assert dict(cfg.max_connections_per_ip_overrides) == {"10.0.0.1": 50, "::1": 7,
                                                          "host-a": 0}
    assert cfg.connections_max_idle_ms == -1 and cfg.queued_max_request_bytes == 209715200
    assert cfg.socket_request_body_timeout_ms == 5000
    defaults = connection_limits(config())
    assert (defaults.max_connections, defaults.max_connections_per_ip) == (2**31 - 1,) * 2
    assert defaults.connections_max_idle_ms == 600000
    assert defaults.queued_max_request_bytes == -1
    assert defaults.socket_request_body_timeout_ms == 30000
    assert error(max__connections__per__ip="0") == (
        "max.connections.per.ip can be set to zero only if max.connections.per.ip.overrides "
        "property is set.")
    config(max__connections__per__ip="0", max__connections__per__ip__overrides="127.0.0.1:5")
    assert error(queued__max__request__bytes="1000") == (
        "queued.max.request.bytes (1000) must be larger or equal to socket.request.max.bytes "
        "(104857600), or <= 0 for no limit.")
    assert "host:count" in error(max__connections__per__ip__overrides="10.0.0.1")
    assert "must be an integer >= 0" in error(max__connections="-1")


def test_sasl_ssl_takes_only_its_own_listeners_client_auth() -> None:
    """KIP-684: ssl.client.auth does not reach SASL_SSL listeners; the listener-prefixed key
    does (and overrides ssl.client.auth on an SSL listener)."""
    cfg = config(ssl__client__auth="required", listener__security__protocol__map=(
        "CONTROLLER:PLAINTEXT,REPLICATION:SSL,CLIENT:SASL_SSL,OTHER:SASL_SSL"),
        listener__name__other__ssl__client__auth="requested")
    assert cfg.warnings == ()
    client, other, replication = (cfg.tls_for(n) for n in ("CLIENT", "OTHER", "REPLICATION"))
    assert client is not None and client.client_auth == "none"
    assert other is not None and other.client_auth == "requested"
    assert replication is not None and replication.client_auth == "required"
    cfg = config(listener__security__protocol__map=(
        "CONTROLLER:PLAINTEXT,REPLICATION:SSL,CLIENT:SASL_SSL,OTHER:SASL_PLAINTEXT"),
        listener__name__replication__ssl__client__auth="required")
    replication = cfg.tls_for("REPLICATION")
    assert replication is not None and replication.client_auth == "required"
    assert error(listener__name__client__ssl__client__auth="always") == (
        "Invalid value always for configuration listener.name.client.ssl.client.auth: must be "
        "none, requested or required.")
