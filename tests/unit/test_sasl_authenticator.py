"""The SASL handshake state machine (broker/kafka/sasl/authenticator.py), rule by rule as
Kafka's SaslServerAuthenticator and KafkaChannel apply them (kafka-security.md §3)."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from kafka.net.sasl.scram import ScramClient  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode

from broker.kafka.codec import build, encode_request, encode_response, request_module
from broker.kafka.sasl.authenticator import (
    SaslAuthenticator,
    SaslState,
    Step,
    illegal_state_response,
)
from broker.kafka.sasl.settings import DEFAULT_MAX_RECEIVE_SIZE, SaslSettings
from broker.kafka.versions import ApiKey
from metadata.scram import ScramCredential, ScramMechanism, credential_from_password

USERS = {"alice": "alice-pw", "bob": "bob-pw"}
CREDENTIALS = {(user, mechanism): credential_from_password(mechanism, password, b"salt", 4096)
               for user, password in USERS.items()
               for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)}
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")


def lookup(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
    return CREDENTIALS.get((user, mechanism))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def authenticator(reauth_ms: int = 0, clock: Clock | None = None) -> SaslAuthenticator:
    settings = SaslSettings(MECHANISMS, USERS, lookup, reauth_ms=reauth_ms)
    return SaslAuthenticator(settings, clock or Clock())


def frame(api_key: int, version: int, correlation_id: int = 7, **fields: Any) -> bytes:
    names: dict[int, str] = {ApiKey.API_VERSIONS: "ApiVersionsRequest", ApiKey.SASL_HANDSHAKE:
             "SaslHandshakeRequest", ApiKey.SASL_AUTHENTICATE: "SaslAuthenticateRequest",
             ApiKey.METADATA: "MetadataRequest", ApiKey.INIT_PRODUCER_ID:
             "InitProducerIdRequest"}
    body = build(request_module(api_key, version), names[api_key], **fields)
    return encode_request(correlation_id, "test", body)[4:]


def api_versions(version: int = 3, name: str = "client") -> bytes:
    return frame(ApiKey.API_VERSIONS, version, client_software_name=name,
                 client_software_version="1.0")


def handshake(mechanism: str, version: int = 1) -> bytes:
    return frame(ApiKey.SASL_HANDSHAKE, version, mechanism=mechanism)


def authenticate(auth_bytes: bytes, version: int = 2, correlation_id: int = 8) -> bytes:
    return frame(ApiKey.SASL_AUTHENTICATE, version, correlation_id, auth_bytes=auth_bytes)


def metadata() -> bytes:
    return frame(ApiKey.METADATA, 12, topics=None, allow_auto_topic_creation=False,
                 include_topic_authorized_operations=False)


def plain_login(sasl: SaslAuthenticator, user: str = "alice", password: str = "alice-pw",
                version: int = 2) -> Step:
    assert sasl.receive(handshake("PLAIN")).response.error_code == ErrorCode.none
    return sasl.receive(authenticate(f"\0{user}\0{password}".encode(), version))


def scram_login(sasl: SaslAuthenticator, user: str, password: str,
                mechanism: str = "SCRAM-SHA-512") -> Step:
    client = ScramClient(user, password, mechanism)
    sasl.receive(handshake(mechanism))
    first = sasl.receive(authenticate(client.first_message()))
    assert first.response.error_code == ErrorCode.none, first
    client.process_server_first_message(first.response.auth_bytes)
    return sasl.receive(authenticate(client.final_message()))


# ---- before authentication ----

@pytest.mark.parametrize("first", [metadata(), frame(ApiKey.INIT_PRODUCER_ID, 4,
                                   transactional_id=None,
                                   transaction_timeout=datetime.timedelta(seconds=1))])
def test_any_request_but_api_versions_and_handshake_closes_with_no_response(first: bytes) -> None:
    sasl = authenticator()
    step = sasl.receive(first)
    assert step.response is None and step.close is not None and not step.forward
    assert "wrong security protocol" in step.close  # the first request: Kafka's hint
    sasl = authenticator()
    sasl.receive(api_versions())
    step = sasl.receive(metadata())
    assert step.response is None and "during SASL authentication" in (step.close or "")


def test_garbage_first_frame_closes() -> None:
    step = authenticator().receive(b"\x16\x03\x01")  # a TLS ClientHello on SASL_PLAINTEXT
    assert step.close is not None and step.response is None


def test_api_versions_once_then_only_the_handshake() -> None:
    sasl = authenticator()
    step = sasl.receive(api_versions())
    assert step.correlation_id == 7 and step.response.error_code == ErrorCode.none
    keys = {key.api_key for key in step.response.api_keys}
    assert {ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE} <= keys
    assert sasl.state is SaslState.HANDSHAKE_REQUEST
    step = sasl.receive(api_versions())
    assert step.close is not None and step.response is None


def test_api_versions_may_be_retried_after_an_error_answer() -> None:
    sasl = authenticator()
    unsupported = encode_request(3, None, build(request_module(18, 0), "ApiVersionsRequest"))[4:]
    unsupported = unsupported[:2] + b"\x00\x09" + unsupported[4:]  # v9
    assert sasl.receive(unsupported).response.error_code == ErrorCode.unsupported_version
    assert sasl.receive(api_versions(name="bad name!")).response.error_code == \
        ErrorCode.invalid_request
    assert sasl.receive(api_versions()).response.error_code == ErrorCode.none
    assert plain_login(sasl).response.error_code == ErrorCode.none


def test_an_unknown_mechanism_answers_33_with_the_enabled_list_then_closes() -> None:
    sasl = authenticator()
    step = sasl.receive(handshake("GSSAPI"))
    assert step.response.error_code == ErrorCode.unsupported_sasl_mechanism
    assert step.response.mechanisms == MECHANISMS
    assert step.failed and step.close is not None and sasl.state is SaslState.FAILED


def test_handshake_v2_is_not_served() -> None:
    step = authenticator().receive(handshake("PLAIN")[:2] + b"\x00\x02" + handshake("PLAIN")[4:])
    assert step.close is not None and step.response is None


# ---- the exchange ----

def test_plain_login_over_sasl_authenticate_sets_the_principal() -> None:
    sasl = authenticator()
    step = plain_login(sasl)
    assert step.correlation_id == 8 and step.response.error_code == ErrorCode.none
    assert step.response.session_lifetime == datetime.timedelta(0)  # no re-authentication
    assert sasl.authenticated and sasl.principal == "User:alice" and sasl.mechanism == "PLAIN"
    assert sasl.receive(metadata()).forward


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "SCRAM-SHA-256"])
def test_scram_login(mechanism: str) -> None:
    sasl = authenticator()
    step = scram_login(sasl, "bob", "bob-pw", mechanism)
    assert step.response.error_code == ErrorCode.none
    assert step.response.auth_bytes.startswith(b"v=")
    assert sasl.principal == "User:bob"


def test_raw_tokens_after_handshake_v0() -> None:
    sasl = authenticator()
    assert sasl.receive(handshake("PLAIN", version=0)).response.error_code == ErrorCode.none
    step = sasl.receive(b"\0alice\0alice-pw")  # the token itself, no Kafka header
    assert step.raw == b"" and step.response is None and sasl.principal == "User:alice"
    sasl = authenticator()
    sasl.receive(handshake("SCRAM-SHA-256", version=0))
    client = ScramClient("bob", "bob-pw", "SCRAM-SHA-256")
    first = sasl.receive(client.first_message())
    assert first.raw is not None
    client.process_server_first_message(first.raw)
    final = sasl.receive(client.final_message())
    assert final.raw is not None and final.raw.startswith(b"v=") and sasl.authenticated


def test_a_raw_token_that_fails_closes_without_an_answer() -> None:
    sasl = authenticator()
    sasl.receive(handshake("PLAIN", version=0))
    step = sasl.receive(b"\0alice\0wrong")
    assert step.raw is None and step.response is None and step.failed and step.close


def test_wrong_password_fails_with_58_and_a_delayed_close() -> None:
    sasl = authenticator()
    step = plain_login(sasl, password="wrong")
    assert step.response.error_code == ErrorCode.sasl_authentication_failed
    assert step.response.error_message == "Authentication failed: Invalid username or password"
    assert step.failed and step.close is not None and not sasl.authenticated


def test_scram_missing_user_and_wrong_password_answer_the_same_message() -> None:
    answers = []
    for user, password in (("mallory", "x"), ("alice", "wrong")):
        step = scram_login_failing(authenticator(), user, password)
        assert step.response.error_code == ErrorCode.sasl_authentication_failed
        answers.append(step.response.error_message)
    assert answers[0] == answers[1] == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512")


def scram_login_failing(sasl: SaslAuthenticator, user: str, password: str) -> Step:
    client = ScramClient(user, password, "SCRAM-SHA-512")
    sasl.receive(handshake("SCRAM-SHA-512"))
    first = sasl.receive(authenticate(client.first_message()))
    if first.response.error_code != ErrorCode.none:
        return first
    client.process_server_first_message(first.response.auth_bytes)
    return sasl.receive(authenticate(client.final_message()))


def test_after_handshake_v1_another_request_gets_34_and_a_close() -> None:
    sasl = authenticator()
    sasl.receive(handshake("PLAIN"))
    step = sasl.receive(api_versions())
    assert step.response.error_code == ErrorCode.illegal_sasl_state
    assert step.close is not None
    sasl = authenticator()
    sasl.receive(handshake("PLAIN"))
    step = sasl.receive(metadata())  # Metadata has no top-level error code: closed unanswered
    assert step.response is None and step.close is not None


def test_illegal_state_answers_only_where_the_api_has_a_top_level_error_code() -> None:
    init = illegal_state_response(ApiKey.INIT_PRODUCER_ID, 4)
    assert init.error_code == ErrorCode.illegal_sasl_state and init.producer_id == -1
    assert encode_response(8, init)  # a frame the client can read
    assert illegal_state_response(ApiKey.METADATA, 12) is None
    assert illegal_state_response(ApiKey.PRODUCE, 9) is None


def test_unsupported_sasl_authenticate_version_closes() -> None:
    sasl = authenticator()
    sasl.receive(handshake("PLAIN"))
    bad = authenticate(b"\0alice\0alice-pw")
    step = sasl.receive(bad[:2] + b"\x00\x03" + bad[4:])
    assert step.close is not None and step.response is None


def test_frames_before_authentication_are_bounded_by_sasl_server_max_receive_size() -> None:
    sasl = authenticator()
    assert sasl.max_frame_bytes(100 << 20) == DEFAULT_MAX_RECEIVE_SIZE
    plain_login(sasl)
    assert sasl.max_frame_bytes(100 << 20) == 100 << 20


# ---- authenticated ----

def test_authenticated_sasl_requests_are_illegal_without_reauthentication() -> None:
    sasl = authenticator()
    plain_login(sasl)
    step = sasl.receive(authenticate(b"\0alice\0alice-pw"))
    assert step.response.error_code == ErrorCode.illegal_sasl_state
    assert step.response.error_message == \
        "SaslAuthenticate request received after successful authentication"
    assert step.close is None
    step = sasl.receive(handshake("PLAIN"))
    assert step.response.error_code == ErrorCode.illegal_sasl_state and step.close is None
    assert sasl.principal == "User:alice"


def test_session_lifetime_and_expiry() -> None:
    clock = Clock()
    sasl = authenticator(reauth_ms=60000, clock=clock)
    step = plain_login(sasl, version=1)
    assert step.response.session_lifetime == datetime.timedelta(seconds=60)
    clock.now += 59.9
    assert sasl.receive(metadata()).forward
    clock.now += 0.1
    step = sasl.receive(metadata())
    assert step.expired and step.close is not None and step.response is None


def test_reauthentication_keeps_mechanism_and_principal() -> None:
    clock = Clock()
    sasl = authenticator(reauth_ms=60000, clock=clock)
    scram_login(sasl, "alice", "alice-pw")
    clock.now += 61  # expired: a re-authentication is still let in
    step = scram_login(sasl, "alice", "alice-pw")
    assert step.response.error_code == ErrorCode.none
    assert step.response.session_lifetime == datetime.timedelta(seconds=60)
    assert sasl.receive(metadata()).forward  # a new session

    clock.now += 2
    step = scram_login_failing(sasl, "bob", "bob-pw")
    assert step.response.error_code == ErrorCode.sasl_authentication_failed
    assert step.response.error_message == (
        "Cannot change principals during re-authentication from User.alice: User.bob")
    assert step.failed and step.close is not None


def test_reauthentication_with_another_mechanism_fails_its_first_token() -> None:
    clock = Clock()
    sasl = authenticator(reauth_ms=60000, clock=clock)
    plain_login(sasl)
    clock.now += 5
    assert sasl.receive(handshake("SCRAM-SHA-256")).response.error_code == ErrorCode.none
    step = sasl.receive(authenticate(b"n,,n=alice,r=abc"))
    assert step.response.error_code == ErrorCode.sasl_authentication_failed
    assert step.response.error_message == (
        "SASL mechanism 'SCRAM-SHA-256' requested by client is not supported for "
        "re-authentication of mechanism 'PLAIN'")
    assert step.failed


def test_failed_reauthentication_says_re_authentication() -> None:
    clock = Clock()
    sasl = authenticator(reauth_ms=60000, clock=clock)
    scram_login(sasl, "alice", "alice-pw")
    clock.now += 5
    step = scram_login_failing(sasl, "alice", "nope")
    assert step.response.error_message == (
        "Authentication failed during re-authentication due to invalid credentials with SASL "
        "mechanism SCRAM-SHA-512")


def test_reauthentication_at_most_once_a_second() -> None:
    clock = Clock()
    sasl = authenticator(reauth_ms=60000, clock=clock)
    plain_login(sasl)
    clock.now += 5
    plain_login(sasl)
    clock.now += 0.5
    step = sasl.receive(handshake("PLAIN"))  # too soon: answered as a plain SaslHandshake
    assert step.response.error_code == ErrorCode.illegal_sasl_state and step.close is None
    clock.now += 0.5
    assert plain_login(sasl).response.error_code == ErrorCode.none
