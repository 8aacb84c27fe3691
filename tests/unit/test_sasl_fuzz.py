"""The SASL front fed anything (broker/kafka/sasl): whatever the bytes, before or during an
exchange, the state machine answers with a Step (never an exception), and the mechanisms'
parsers fail only with their own errors. Joins the Kafka decoder's fuzzing
(tests/unit/test_kafka_codec.py, whose valid frames include SaslHandshake and
SaslAuthenticate)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.kafka.sasl.authenticator import SaslAuthenticator, Step
from broker.kafka.sasl.jaas import JaasConfigError, plain_users
from broker.kafka.sasl.mechanisms import SaslAuthenticationFailed, SaslCredentialsInvalid
from broker.kafka.sasl.plain import PlainSaslServer
from broker.kafka.sasl.scram import ScramSaslServer
from broker.kafka.sasl.settings import SaslSettings
from metadata.scram import ScramMechanism
from tests.unit.test_kafka_codec import VALID
from tests.unit.test_sasl_authenticator import USERS, handshake, lookup

SETTINGS = SaslSettings(("SCRAM-SHA-512", "PLAIN"), USERS, lookup, reauth_ms=1000)
FRAMES = st.one_of(st.binary(max_size=300), st.sampled_from(VALID),
                   st.sampled_from(VALID).flatmap(
                       lambda f: st.integers(0, len(f)).map(lambda cut: f[:cut])))


@settings(max_examples=500, deadline=None)
@given(prefix=st.sampled_from([[], [handshake("PLAIN")], [handshake("SCRAM-SHA-512")],
                               [handshake("PLAIN", 0)], [handshake("SCRAM-SHA-512", 0)]]),
       frames=st.lists(FRAMES, min_size=1, max_size=4))
def test_any_frames_before_and_during_an_exchange(prefix: list[bytes],
                                                  frames: list[bytes]) -> None:
    sasl = SaslAuthenticator(SETTINGS, lambda: 0.0)
    for frame in [*prefix, *frames]:
        step = sasl.receive(frame)
        assert isinstance(step, Step)
        if step.close is not None:
            break  # the connection ends here


@settings(max_examples=800, deadline=None)
@given(first=st.binary(max_size=120), final=st.binary(max_size=200),
       mechanism=st.sampled_from([ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512]))
def test_scram_messages(first: bytes, final: bytes, mechanism: ScramMechanism) -> None:
    server = ScramSaslServer(mechanism, lookup)
    try:
        server.evaluate(first)
        server.evaluate(final)
    except (SaslCredentialsInvalid, SaslAuthenticationFailed):
        pass


@settings(max_examples=500, deadline=None)
@given(token=st.binary(max_size=80))
def test_plain_tokens(token: bytes) -> None:
    try:
        PlainSaslServer(USERS).evaluate(token)
    except (SaslCredentialsInvalid, SaslAuthenticationFailed):
        pass


@settings(max_examples=500, deadline=None)
@given(text=st.text(max_size=80))
def test_jaas_text(text: str) -> None:
    try:
        plain_users(text)
    except JaasConfigError:
        pass
