"""The client side of SASL on the Kafka listener, as Kafka's SaslClientAuthenticator and its
PlainSaslClient / ScramSaslClient speak it: PLAIN (RFC 4616) and SCRAM-SHA-256/512 (RFC 5802,
RFC 7677; gs2 header `n,,`, no channel binding, no extensions). Sans-I/O: the first token,
then each server challenge in and the next token out; KafkaClient carries them in
SaslAuthenticate requests.

SCRAM's keys come from metadata/scram.py, the derivation the controller stores credentials
with, so a client and the broker's ScramSaslServer (scram.py) cannot disagree on it. The client
checks the server too: its nonce must extend ours, the iterations must reach Kafka's minimum,
and the server-final signature must be the one only the stored keys can make."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable
from typing import Protocol

from broker.kafka.sasl.mechanisms import PLAIN
from broker.kafka.sasl.scram import server_nonce
from metadata.scram import MIN_ITERATIONS, ScramMechanism, client_key, salted_password, server_key

# Kafka's ScramMessages.ServerFirstMessage / ServerFinalMessage, reserved `m=` and extensions
# allowed as Kafka allows them.
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_SERVER_FIRST = re.compile(
    rf"(?:m={_VALUE},)?r=(?P<nonce>[\x21-\x2b\x2d-\x7e]+),s=(?P<salt>[a-zA-Z0-9/+=]+),"
    rf"i=(?P<iterations>[0-9]+){_EXTENSIONS}")
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE})|v=(?P<signature>[a-zA-Z0-9/+=]+))"
                           rf"{_EXTENSIONS}")


class SaslClientError(Exception):
    """The server's side of the exchange cannot be trusted or understood; one line."""


class SaslClient(Protocol):
    """One authentication exchange of one mechanism on one connection."""

    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    def initial_response(self) -> bytes:
        """The first token, sent without a challenge."""
        ...

    def evaluate(self, challenge: bytes) -> bytes | None:
        """The next token for the server's `challenge`; None when the exchange is over
        (`complete`). Raises SaslClientError."""
        ...


class PlainSaslClient:
    """`\\0user\\0password` (no authorization id: the user's own), then an empty answer."""

    mechanism = PLAIN

    def __init__(self, username: str, password: str) -> None:
        self._token = b"\0" + username.encode() + b"\0" + password.encode()
        self._sent = False
        self._done = False

    @property
    def complete(self) -> bool:
        return self._done

    def initial_response(self) -> bytes:
        self._sent = True
        return self._token

    def evaluate(self, challenge: bytes) -> bytes | None:
        if not self._sent or self._done:
            raise SaslClientError("a PLAIN challenge out of turn")
        self._done = True
        return None


def saslname(username: str) -> str:
    """RFC 5802's saslname: `=` is `=3D`, `,` is `=2C` (scram.username_of reads it back)."""
    return username.replace("=", "=3D").replace(",", "=2C")


class ScramSaslClient:
    """client-first -> server-first -> client-final (with the proof) -> server-final (checked)."""

    def __init__(self, mechanism: ScramMechanism, username: str, password: str,
                 nonce: Callable[[], str] = server_nonce) -> None:
        if mechanism is ScramMechanism.UNKNOWN:
            raise ValueError("a SCRAM client needs SCRAM-SHA-256 or SCRAM-SHA-512")
        self._mechanism = mechanism
        self._password = password.encode()  # no SASLprep, as the stored keys (metadata/scram)
        self._nonce = nonce()  # the same random string as Kafka's ScramFormatter makes
        self._first_bare = f"n={saslname(username)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._done = False

    @property
    def mechanism(self) -> str:
        return self._mechanism.mechanism_name

    @property
    def complete(self) -> bool:
        return self._done

    def initial_response(self) -> bytes:
        return f"n,,{self._first_bare}".encode()

    def evaluate(self, challenge: bytes) -> bytes | None:
        if self._done:
            raise SaslClientError("a SCRAM challenge after the exchange ended")
        text = challenge.decode("utf-8", errors="replace")
        if self._server_signature is None:
            return self._client_final(text)
        self._check_server_final(text)
        self._done = True
        return None

    def _client_final(self, server_first: str) -> bytes:
        match = _SERVER_FIRST.fullmatch(server_first)
        if match is None:
            raise SaslClientError(f"invalid SCRAM server first message {server_first!r}")
        nonce, iterations = match["nonce"], int(match["iterations"])
        if not nonce.startswith(self._nonce) or nonce == self._nonce:
            raise SaslClientError("the SCRAM server nonce does not extend the client's")
        if iterations < MIN_ITERATIONS:
            raise SaslClientError(f"requested iterations {iterations} are less than the "
                                  f"minimum {MIN_ITERATIONS} for {self.mechanism}")
        try:
            salt = base64.b64decode(match["salt"], validate=True)
        except binascii.Error:
            raise SaslClientError("invalid salt in the SCRAM server first message") from None
        hash_name = self._mechanism.hash_name
        salted = salted_password(self._mechanism, self._password, salt, iterations)
        key = client_key(self._mechanism, salted)
        without_proof = f"c={base64.b64encode(b'n,,').decode()},r={nonce}"
        auth_message = f"{self._first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(hashlib.new(hash_name, key).digest(), auth_message, hash_name)
        proof = bytes(a ^ b for a, b in zip(key, signature, strict=True))
        self._server_signature = hmac.digest(server_key(self._mechanism, salted), auth_message,
                                             hash_name)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _check_server_final(self, server_final: str) -> None:
        match = _SERVER_FINAL.fullmatch(server_final)
        if match is None:
            raise SaslClientError(f"invalid SCRAM server final message {server_final!r}")
        if match["error"] is not None:
            raise SaslClientError(f"the SCRAM server refused: {match['error']}")
        assert self._server_signature is not None
        try:
            signature = base64.b64decode(match["signature"], validate=True)
        except binascii.Error:
            signature = b""
        if not hmac.compare_digest(signature, self._server_signature):
            raise SaslClientError("the SCRAM server signature is wrong: the server does not "
                                  "hold this user's keys")


def sasl_client(mechanism: str, username: str, password: str) -> SaslClient:
    """A fresh exchange for `mechanism` (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512)."""
    if mechanism == PLAIN:
        return PlainSaslClient(username, password)
    scram = ScramMechanism.from_name(mechanism)
    if scram is ScramMechanism.UNKNOWN:
        raise ValueError(f"unsupported SASL mechanism {mechanism}")
    return ScramSaslClient(scram, username, password)
