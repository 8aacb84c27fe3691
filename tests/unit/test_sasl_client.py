"""The SASL client of `kraft-admin groups` (broker/kafka/sasl/client.py): SCRAM against RFC
7677's exchange and against the broker's own ScramSaslServer, PLAIN against PlainSaslServer,
a server that cannot prove it holds the keys refused; and `--command-config`'s SASL keys
(server/kafka_client_config.py), each mistake one line."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.kafka.sasl.client import (
    PlainSaslClient,
    SaslClientError,
    ScramSaslClient,
    sasl_client,
    saslname,
)
from broker.kafka.sasl.mechanisms import SaslCredentialsInvalid
from broker.kafka.sasl.plain import PlainSaslServer
from broker.kafka.sasl.scram import ScramSaslServer, username_of
from kraft.security.certs import make_test_certs
from metadata.scram import ScramMechanism, credential_from_password
from server.kafka_client_config import (
    KafkaClientConfig,
    KafkaClientConfigError,
    load_kafka_client_config,
)

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
SALT = b"0123456789abcdef"


def test_scram_sha_256_matches_rfc_7677() -> None:
    client = ScramSaslClient(SHA256, "user", "pencil", nonce=lambda: "rOprNGfwEbeRWgbNEkqO")
    assert client.initial_response() == b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
    final = client.evaluate(b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                            b"s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096")
    assert final == (b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
                     b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
    assert client.evaluate(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=") is None
    assert client.complete


def exchange(client: ScramSaslClient, server: ScramSaslServer) -> None:
    token = client.initial_response()
    while token is not None:
        token = client.evaluate(server.evaluate(token))


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_scram_logs_in_to_the_brokers_server(mechanism: ScramMechanism) -> None:
    user = "al,ice=1"  # the saslname escapes round-trip
    credential = credential_from_password(mechanism, "s3cret", SALT, 4096)
    server = ScramSaslServer(mechanism, lambda u, m: credential if u == user else None)
    client = ScramSaslClient(mechanism, user, "s3cret")
    exchange(client, server)
    assert client.complete and server.complete and server.authorization_id == user
    assert username_of(saslname(user)) == user

    wrong = ScramSaslServer(mechanism, lambda u, m: credential)
    with pytest.raises(SaslCredentialsInvalid):
        exchange(ScramSaslClient(mechanism, user, "wrong"), wrong)


def test_a_server_without_the_keys_or_with_bad_messages_is_refused() -> None:
    server_first = b"r=abcXYZ,s=MDEyMzQ1Njc4OWFiY2RlZg==,i=4096"
    client = ScramSaslClient(SHA512, "alice", "pw", nonce=lambda: "abc")
    client.initial_response()
    client.evaluate(server_first)
    with pytest.raises(SaslClientError, match="server signature is wrong"):
        client.evaluate(b"v=AAAA")
    for challenge, message in [
        (b"r=zzzXYZ,s=MDEy,i=4096", "does not extend"),
        (b"r=abc,s=MDEy,i=4096", "does not extend"),  # no server part
        (b"r=abcXYZ,s=MDEy,i=4095", "less than the minimum 4096"),
        (b"garbage", "invalid SCRAM server first message"),
    ]:
        fresh = ScramSaslClient(SHA512, "alice", "pw", nonce=lambda: "abc")
        fresh.initial_response()
        with pytest.raises(SaslClientError, match=message):
            fresh.evaluate(challenge)
    refused = ScramSaslClient(SHA512, "alice", "pw", nonce=lambda: "abc")
    refused.initial_response()
    refused.evaluate(server_first)
    with pytest.raises(SaslClientError, match="refused: invalid-proof"):
        refused.evaluate(b"e=invalid-proof")


def test_plain_logs_in_to_the_brokers_server() -> None:
    server = PlainSaslServer({"bob": "bob-secret"})
    client = sasl_client("PLAIN", "bob", "bob-secret")
    assert isinstance(client, PlainSaslClient)
    assert client.evaluate(server.evaluate(client.initial_response())) is None
    assert client.complete and server.authorization_id == "bob"


# ---- --command-config ----

def load(tmp_path: Path, text: str) -> KafkaClientConfig:
    path = tmp_path / "client.properties"
    path.write_text(text)
    return load_kafka_client_config(str(path))


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(KafkaClientConfigError) as caught:
        load(tmp_path, text)
    message = str(caught.value)
    assert "\n" not in message
    return message.removeprefix(f"--command-config {tmp_path / 'client.properties'}: ")


def test_username_and_password_or_kafkas_jaas_config(tmp_path: Path) -> None:
    config = load(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                            "sasl.username=bob\nsasl.password=bob-secret\n")
    assert config.ssl_context is None
    sasl = config.sasl
    assert (sasl.mechanism, sasl.username, sasl.password) == ("PLAIN", "bob", "bob-secret")
    assert "bob-secret" not in repr(sasl)
    config = load(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                            "sasl.jaas.config=org.apache.kafka.common.security.scram."
                            'ScramLoginModule required username="alice" password="a\\\\\\"b";\n')
    sasl = config.sasl
    assert (sasl.mechanism, sasl.username, sasl.password) == ("SCRAM-SHA-256", "alice", 'a"b')
    assert isinstance(sasl.exchange(), ScramSaslClient)


def test_sasl_ssl_needs_only_the_truststore(tmp_path: Path) -> None:
    certs = make_test_certs(tmp_path / "certs", ["client"])
    config = load(tmp_path, "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                            f"sasl.username=a\nsasl.password=b\nssl.truststore.location="
                            f"{certs['ca']}\n")
    assert isinstance(config.ssl_context, ssl.SSLContext)
    assert error(tmp_path, "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n"
                           "sasl.username=a\nsasl.password=b\n") == (
        "security.protocol=SASL_SSL needs ssl.truststore.location (the CA, PEM)")


SCRAM_JAAS = ("sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
              'required username="alice" password="pw";\n')


@pytest.mark.parametrize(("text", "message"), [
    ("security.protocol=SASL_PLAINTEXT\n",
     "security.protocol=SASL_PLAINTEXT needs sasl.mechanism: PLAIN, SCRAM-SHA-256, "
     "SCRAM-SHA-512 (Kafka's default GSSAPI is not supported)"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=GSSAPI\n",
     "sasl.mechanism=GSSAPI: use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=a\n",
     "sasl.mechanism=PLAIN needs sasl.password (or sasl.jaas.config)"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n" + SCRAM_JAAS,
     "sasl.mechanism=PLAIN needs org.apache.kafka.common.security.plain.PlainLoginModule in "
     "sasl.jaas.config, not org.apache.kafka.common.security.scram.ScramLoginModule"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.username=a\n"
     + SCRAM_JAAS, "give sasl.jaas.config or sasl.username and sasl.password, not both"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
     "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\";\n",
     'sasl.jaas.config has no password="..." option'),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config="
     "org.apache.kafka.common.security.scram.ScramLoginModule required username=\"a\"\n",
     "sasl.jaas.config: JAAS config entry not terminated by semi-colon"),
    ("sasl.mechanism=PLAIN\nsasl.username=a\nsasl.password=b\n",
     "sasl.mechanism is set but security.protocol=PLAINTEXT: use SASL_PLAINTEXT to log in"),
    ("security.protocol=SASL\n",
     "security.protocol=SASL: use PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ("security.protocol=SASL_PLAINTEXT\nsasl.mechansim=PLAIN\n",
     "unknown key sasl.mechansim; known keys: sasl.jaas.config, sasl.mechanism, "
     "sasl.password, sasl.username, security.protocol, ssl.keystore.location, "
     "ssl.keystore.type, ssl.truststore.location, ssl.truststore.type"),
])
def test_each_mistake_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    assert error(tmp_path, text) == message
