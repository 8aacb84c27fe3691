"""SASL/PLAIN as Kafka's PlainSaslServer, and the JAAS text its users come from
(broker/kafka/sasl/plain.py, jaas.py)."""

from __future__ import annotations

import pytest

from broker.kafka.sasl.jaas import JaasConfigError, parse_jaas_config, plain_users
from broker.kafka.sasl.mechanisms import SaslAuthenticationFailed, SaslCredentialsInvalid
from broker.kafka.sasl.plain import PlainSaslServer

USERS = {"alice": "alice-secret", "bob": "p\u00e4ss"}
INVALID = "Authentication failed: Invalid username or password"


def test_a_valid_login_names_the_user() -> None:
    server = PlainSaslServer(USERS)
    assert server.evaluate(b"\0alice\0alice-secret") == b""
    assert server.complete and server.authorization_id == "alice"
    server = PlainSaslServer(USERS)
    server.evaluate("bob\0bob\0p\u00e4ss".encode())  # authzid = user; UTF-8
    assert server.authorization_id == "bob"


@pytest.mark.parametrize("token, message", [
    (b"\0alice\0wrong", INVALID),
    (b"\0mallory\0alice-secret", INVALID),  # no user enumeration: the same words
    (b"\0\0x", "Authentication failed: username not specified"),
    (b"\0alice\0", "Authentication failed: password not specified"),
    (b"root\0alice\0alice-secret",
     "Authentication failed: Client requested an authorization id that is different from "
     "username"),
])
def test_refusals_carry_kafkas_messages(token: bytes, message: str) -> None:
    server = PlainSaslServer(USERS)
    with pytest.raises(SaslAuthenticationFailed) as info:
        server.evaluate(token)
    assert str(info.value) == message
    assert not server.complete


@pytest.mark.parametrize("token, count", [
    (b"alice-secret", 1), (b"\0alice", 2), (b"a\0b\0c\0d", 4), (b"a\0b\0c\0d\0e", 4)])
def test_anything_but_three_tokens_is_malformed(token: bytes, count: int) -> None:
    with pytest.raises(SaslCredentialsInvalid, match=f"expected 3 tokens, got {count}"):
        PlainSaslServer(USERS).evaluate(token)


def test_a_second_token_is_refused() -> None:
    server = PlainSaslServer(USERS)
    server.evaluate(b"\0alice\0alice-secret")
    with pytest.raises(SaslCredentialsInvalid):
        server.evaluate(b"\0alice\0alice-secret")


JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
        '    username="admin" password="admin-secret"  // the broker\'s own, unused here\n'
        '    /* users: */ user_admin="admin-secret" user_alice=\'al"ice\\\\\' user_=x;')


def test_jaas_users_as_kafkas_plain_login_module_lists_them() -> None:
    assert dict(plain_users(JAAS)) == {"admin": "admin-secret", "alice": 'al"ice\\'}
    (entry,) = parse_jaas_config(JAAS)
    assert entry.flag == "required" and entry.options["username"] == "admin"


@pytest.mark.parametrize("text, message", [
    ("", "Login module not specified in JAAS config"),
    ("org.Module", "Login module control flag not specified in JAAS config"),
    ("org.Module mandatory;", "Invalid login module control flag 'mandatory' in JAAS config"),
    ("org.Module required user_a;", "Value not specified for key 'user_a' in JAAS config"),
    ("org.Module required user_a=;", "Value not specified for key 'user_a' in JAAS config"),
    ('org.Module required user_a="x"', "JAAS config entry not terminated by semi-colon"),
    ('org.Module required user_a="x;', "Unterminated quoted string in JAAS config"),
    ("org.Module required /* x", "Unterminated comment in JAAS config"),
    ("a required; b required;", "contains 2 login modules, should be 1 module"),
    ("org.apache.kafka.common.security.scram.ScramLoginModule required;",
     "PLAIN needs org.apache.kafka.common.security.plain.PlainLoginModule"),
])
def test_bad_jaas_text_is_refused_with_one_line(text: str, message: str) -> None:
    with pytest.raises(JaasConfigError, match=message.replace("(", r"\(")):
        plain_users(text)
