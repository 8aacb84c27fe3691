"""The SCRAM server (broker/kafka/sasl/scram.py) against RFC 7677's exchange and kafka-python's
own SCRAM client, and every way Kafka's ScramSaslServer refuses a login."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pytest
from kafka.net.sasl.scram import ScramClient  # type: ignore[import-untyped]

from broker.kafka.sasl.mechanisms import SaslAuthenticationFailed, SaslCredentialsInvalid
from broker.kafka.sasl.scram import (
    ScramSaslServer,
    parse_client_first,
    server_nonce,
    username_of,
)
from metadata.scram import ScramCredential, ScramMechanism, credential_from_password

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3 (user "user", password "pencil").
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_CLIENT_NONCE = "rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_NONCE = RFC_CLIENT_NONCE + RFC_SERVER_NONCE
RFC_FINAL = f"c=biws,r={RFC_NONCE},p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=".encode()


class Store:
    """A test double of the image's lookup: records who was asked."""

    def __init__(self, **users: ScramCredential) -> None:
        self.users = users
        self.asked: list[tuple[str, ScramMechanism]] = []

    def __call__(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        self.asked.append((user, mechanism))
        return self.users.get(user)


def rfc_server() -> ScramSaslServer:
    credential = credential_from_password(SHA256, "pencil", RFC_SALT, 4096)
    return ScramSaslServer(SHA256, Store(user=credential), nonce=lambda: RFC_SERVER_NONCE)


def test_rfc_7677_exchange_byte_for_byte() -> None:
    server = rfc_server()
    first = server.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    assert first == f"r={RFC_NONCE},s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".encode()
    assert not server.complete
    assert server.evaluate(RFC_FINAL) == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.authorization_id == "user"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_kafka_python_client_logs_in_and_verifies_the_server(mechanism: ScramMechanism) -> None:
    store = Store(alice=credential_from_password(mechanism, "s3cr3t", b"salty", 4096))
    server = ScramSaslServer(mechanism, store)
    client = ScramClient("alice", "s3cr3t", mechanism.mechanism_name)
    client.process_server_first_message(server.evaluate(client.first_message()))
    client.process_server_final_message(server.evaluate(client.final_message()))  # checks v=
    assert server.authorization_id == "alice"
    assert store.asked == [("alice", mechanism)]


def test_no_pbkdf2_runs_on_the_broker_for_a_login(monkeypatch: pytest.MonkeyPatch) -> None:
    credential = credential_from_password(SHA512, "pw", b"salt", 4096)
    client = ScramClient("bob", "pw", "SCRAM-SHA-512")
    server = ScramSaslServer(SHA512, Store(bob=credential))
    first = server.evaluate(client.first_message())
    client.process_server_first_message(first)  # the client's PBKDF2

    def forbidden(*_: object) -> bytes:
        raise AssertionError("PBKDF2 on the broker")

    monkeypatch.setattr(hashlib, "pbkdf2_hmac", forbidden)
    server.evaluate(client.final_message())
    assert server.complete


def login(server: ScramSaslServer, user: str, password: str) -> None:
    client = ScramClient(user, password, server.mechanism)
    client.process_server_first_message(server.evaluate(client.first_message()))
    server.evaluate(client.final_message())


def test_a_wrong_password_and_a_missing_user_fail_the_same_generic_way() -> None:
    store = Store(alice=credential_from_password(SHA512, "right", b"salt", 4096))
    with pytest.raises(SaslCredentialsInvalid, match="Invalid client credentials"):
        login(ScramSaslServer(SHA512, store), "alice", "wrong")
    with pytest.raises(SaslCredentialsInvalid, match="Invalid user credentials"):
        login(ScramSaslServer(SHA512, store), "mallory", "right")


def test_a_credential_below_4096_iterations_cannot_log_in() -> None:
    store = Store(old=credential_from_password(SHA256, "pw", b"salt", 4095))
    with pytest.raises(SaslCredentialsInvalid, match="Iterations 4095 is less than the minimum"):
        login(ScramSaslServer(SHA256, store), "old", "pw")


def test_the_authzid_must_be_the_user() -> None:
    store = Store(alice=credential_from_password(SHA256, "pw", b"salt", 4096))
    server = ScramSaslServer(SHA256, store)
    assert server.evaluate(b"n,a=alice,n=alice,r=abc").startswith(b"r=abc")
    with pytest.raises(SaslAuthenticationFailed, match="authorization id that is different"):
        ScramSaslServer(SHA256, store).evaluate(b"n,a=root,n=alice,r=abc")


def test_saslname_escapes_and_kafka_username_rules() -> None:
    assert username_of("a=2Cb=3Dc") == "a,b=c"
    assert username_of("=3D2C") == "=2C"  # not a comma: the escapes are read once
    store = Store()
    with pytest.raises(SaslCredentialsInvalid):
        ScramSaslServer(SHA256, store).evaluate(b"n,,n=a=2Cb=3Dc,r=x")
    assert store.asked == [("a,b=c", SHA256)]


@pytest.mark.parametrize("message", [
    b"y,,n=alice,r=abc",  # channel binding supported by the client: Kafka takes `n` only
    b"p=tls-unique,,n=alice,r=abc",
    b"n,,n=al\xc3\xa9,r=abc",  # a non-ASCII saslname
    b"n,,n=a=2,r=abc",  # a bare '='
    b"n,,n=,r=abc",  # an empty name
    b"n,,n=alice,r=a,b",  # a comma in the nonce
    b"n,,n=alice",
    b"",
    b"\xff\xfe",
])
def test_malformed_client_first_messages_fail_generically(message: bytes) -> None:
    store = Store(alice=credential_from_password(SHA256, "pw", b"salt", 4096))
    with pytest.raises(SaslCredentialsInvalid):
        ScramSaslServer(SHA256, store).evaluate(message)
    assert store.asked == []


def test_extensions_are_kept_in_the_auth_message_and_reserved_mext_is_dropped() -> None:
    first = parse_client_first(b"n,,m=ignored,n=u,r=abc,foo=bar,x=1=2")
    assert first.bare == "n=u,r=abc,foo=bar,x=1=2"
    assert first.extensions == (("foo", "bar"), ("x", "1=2"))


def test_a_delegation_token_login_fails() -> None:
    store = Store(alice=credential_from_password(SHA256, "pw", b"salt", 4096))
    with pytest.raises(SaslCredentialsInvalid, match="Token Authentication failed"):
        ScramSaslServer(SHA256, store).evaluate(b"n,,n=alice,r=abc,tokenauth=TRUE")


def test_the_final_message_must_carry_the_servers_nonce_and_a_full_proof() -> None:
    credential = credential_from_password(SHA256, "pencil", RFC_SALT, 4096)
    cases = [
        RFC_FINAL.replace(RFC_SERVER_NONCE.encode(), b"other"),  # another nonce
        RFC_FINAL.replace(b"r=" + RFC_CLIENT_NONCE.encode(), b"r=x" + RFC_CLIENT_NONCE.encode()),
        f"c=biws,r={RFC_NONCE},p=AAAA".encode(),  # a 3-byte proof
        f"c=biws,r={RFC_NONCE},p=abc".encode(),  # not base64
        f"c=biws,r={RFC_NONCE}".encode(),  # no proof
    ]
    for final in cases:
        server = ScramSaslServer(SHA256, Store(user=credential), nonce=lambda: RFC_SERVER_NONCE)
        server.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
        with pytest.raises(SaslCredentialsInvalid):
            server.evaluate(final)
        assert not server.complete


def test_a_valid_proof_over_another_nonce_is_refused() -> None:
    """The proof covers whatever nonce the client sends back; only the nonce check stops a
    client that answers with a nonce the server did not issue (a replayed exchange)."""
    salted = hashlib.pbkdf2_hmac("sha256", b"pencil", RFC_SALT, 4096)
    server = rfc_server()
    server_first = server.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode()).decode()
    without_proof = f"c=biws,r={RFC_CLIENT_NONCE}replayed"
    auth = f"n=user,r={RFC_CLIENT_NONCE},{server_first},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    signature = hmac.digest(hashlib.sha256(client_key).digest(), auth, "sha256")
    proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
    with pytest.raises(SaslCredentialsInvalid, match="Invalid client nonce"):
        server.evaluate(f"{without_proof},p={base64.b64encode(proof).decode()}".encode())


def test_nothing_is_evaluated_after_the_end() -> None:
    server = rfc_server()
    server.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())
    server.evaluate(RFC_FINAL)
    with pytest.raises(SaslCredentialsInvalid):
        server.evaluate(RFC_FINAL)
    failed = rfc_server()
    with pytest.raises(SaslCredentialsInvalid):
        failed.evaluate(b"garbage")
    with pytest.raises(SaslCredentialsInvalid):  # no second first message after a failure
        failed.evaluate(f"n,,n=user,r={RFC_CLIENT_NONCE}".encode())


def test_server_nonces_are_printable_random_base36() -> None:
    nonces = {server_nonce() for _ in range(100)}
    assert len(nonces) == 100
    assert all(set(n) <= set("0123456789abcdefghijklmnopqrstuvwxyz") for n in nonces)
