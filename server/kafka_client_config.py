"""`--command-config FILE` for the commands that speak Kafka's protocol to a broker's Kafka
listener (`kraft-admin groups`), as Kafka's tools and librdkafka read it:

  security.protocol=PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
  ssl.truststore.location=CA.pem, ssl.keystore.location=KEY_AND_CHAIN.pem (PEM only; the
      keystore is needed for SSL, optional for SASL_SSL where the login is the password)
  sasl.mechanism=PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
  sasl.username=U and sasl.password=P (librdkafka's), or Kafka's
  sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required
      username="U" password="P";   (plain.PlainLoginModule for PLAIN)

Every mistake is one line naming the file and the key (KafkaClientConfigError)."""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from broker.kafka.sasl.client import SaslClient, sasl_client
from broker.kafka.sasl.jaas import PLAIN_LOGIN_MODULE, JaasConfigError, parse_jaas_config
from broker.kafka.sasl.mechanisms import PLAIN, SCRAM_SHA_256, SCRAM_SHA_512
from broker.kafka.tls import client_ssl_context
from kraft.properties import PropertiesError, load_properties
from kraft.security.tls import TlsConfig, TlsConfigError

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
SASL_KEYS = ("sasl.mechanism", "sasl.username", "sasl.password", "sasl.jaas.config")
KNOWN_KEYS = frozenset({
    "security.protocol", "ssl.keystore.location", "ssl.keystore.type",
    "ssl.truststore.location", "ssl.truststore.type", *SASL_KEYS,
})


class KafkaClientConfigError(ValueError):
    """One line: the file, the key, what to write instead."""


@dataclass(frozen=True)
class SaslLogin:
    mechanism: str
    username: str
    password: str = field(repr=False)

    def exchange(self) -> SaslClient:
        return sasl_client(self.mechanism, self.username, self.password)


@dataclass(frozen=True)
class KafkaClientConfig:
    ssl_context: ssl.SSLContext | None = None
    sasl: SaslLogin | None = None

    @property
    def sasl_exchange(self) -> Callable[[], SaslClient] | None:
        """KafkaClient's `sasl`: a fresh exchange per connection, or None."""
        return None if self.sasl is None else self.sasl.exchange


def load_kafka_client_config(path: str | None) -> KafkaClientConfig:
    if path is None:
        return KafkaClientConfig()
    fail = functools.partial(_fail, path)
    try:
        props = {k: v.strip() for k, v in load_properties(path).items()}
    except (OSError, PropertiesError) as exc:
        raise fail(str(exc)) from None
    unknown = sorted(set(props) - KNOWN_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]}; known keys: {', '.join(sorted(KNOWN_KEYS))}")
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise fail(f"security.protocol={protocol}: use {', '.join(PROTOCOLS)}")
    sasl = _sasl_login(props, protocol, fail) if protocol.startswith("SASL_") else None
    if sasl is None:
        given = [key for key in SASL_KEYS if key in props]
        if given:
            raise fail(f"{given[0]} is set but security.protocol={protocol}: use "
                       f"{'SASL_SSL' if protocol == 'SSL' else 'SASL_PLAINTEXT'} to log in")
    context = _ssl_context(props, protocol, fail) if protocol.endswith("SSL") else None
    return KafkaClientConfig(context, sasl)


def _fail(path: str, message: str) -> KafkaClientConfigError:
    return KafkaClientConfigError(f"--command-config {path}: {message}")


def _sasl_login(props: Mapping[str, str], protocol: str,
                fail: Callable[[str], KafkaClientConfigError]) -> SaslLogin:
    mechanism = props.get("sasl.mechanism", "").upper()
    if not mechanism:
        raise fail(f"security.protocol={protocol} needs sasl.mechanism: "
                   f"{', '.join(MECHANISMS)} (Kafka's default GSSAPI is not supported)")
    if mechanism not in MECHANISMS:
        raise fail(f"sasl.mechanism={mechanism}: use {', '.join(MECHANISMS)}")
    has_pair = "sasl.username" in props or "sasl.password" in props
    if "sasl.jaas.config" in props:
        if has_pair:
            raise fail("give sasl.jaas.config or sasl.username and sasl.password, not both")
        username, password = _jaas_login(props["sasl.jaas.config"], mechanism, fail)
    else:
        for key in ("sasl.username", "sasl.password"):
            if key not in props:
                raise fail(f"sasl.mechanism={mechanism} needs {key} (or sasl.jaas.config)")
        username, password = props["sasl.username"], props["sasl.password"]
    if not username:
        raise fail("the SASL username is empty")
    return SaslLogin(mechanism, username, password)


def _jaas_login(text: str, mechanism: str,
                fail: Callable[[str], KafkaClientConfigError]) -> tuple[str, str]:
    module = PLAIN_LOGIN_MODULE if mechanism == PLAIN else SCRAM_LOGIN_MODULE
    try:
        entries = parse_jaas_config(text)
    except JaasConfigError as exc:
        raise fail(f"sasl.jaas.config: {exc}") from None
    if len(entries) != 1:
        raise fail(f"sasl.jaas.config has {len(entries)} login modules; give one: {module}")
    (entry,) = entries
    if entry.login_module != module:
        raise fail(f"sasl.mechanism={mechanism} needs {module} in sasl.jaas.config, "
                   f"not {entry.login_module}")
    for option in ("username", "password"):
        if option not in entry.options:
            raise fail(f'sasl.jaas.config has no {option}="..." option')
    return entry.options["username"], entry.options["password"]


def _ssl_context(props: Mapping[str, str], protocol: str,
                 fail: Callable[[str], KafkaClientConfigError]) -> ssl.SSLContext:
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if props.get(key, "PEM").upper() != "PEM":
            raise fail(f"{key} must be PEM")
    truststore = props.get("ssl.truststore.location", "")
    keystore = props.get("ssl.keystore.location", "")
    if not truststore:
        raise fail(f"security.protocol={protocol} needs ssl.truststore.location (the CA, PEM)")
    if protocol == "SSL" and not keystore:
        raise fail("security.protocol=SSL needs ssl.keystore.location (the client's key and "
                   "certificate chain, PEM)")
    try:
        if keystore:
            return client_ssl_context(TlsConfig(keystore, truststore))
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
        context.load_verify_locations(
            cadata=TlsConfig("", truststore).trusted().decode("ascii"))
        return context
    except (TlsConfigError, ssl.SSLError) as exc:
        raise fail(str(exc)) from None
