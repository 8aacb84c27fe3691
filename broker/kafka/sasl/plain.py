"""SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer: one message `authzid NUL authcid NUL
passwd` (UTF-8), checked against the `user_<name>="<password>"` entries of the listener's
`listener.name.<listener>.plain.sasl.jaas.config` (Kafka's PlainServerCallbackHandler)."""

from __future__ import annotations

import hmac
from collections.abc import Mapping

from broker.kafka.sasl.mechanisms import PLAIN, SaslAuthenticationFailed, SaslCredentialsInvalid


def _tokens(message: str) -> list[str]:
    """Kafka's extractTokens: split on NUL, at most 4 pieces; anything but 3 is malformed."""
    tokens = message.split("\0", 3)
    if len(tokens) != 3:
        raise SaslCredentialsInvalid(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(tokens)}")
    return tokens


class PlainSaslServer:
    def __init__(self, users: Mapping[str, str]) -> None:
        self._users = users
        self._authorization_id: str | None = None

    @property
    def mechanism(self) -> str:
        return PLAIN

    @property
    def complete(self) -> bool:
        return self._authorization_id is not None

    @property
    def authorization_id(self) -> str:
        if self._authorization_id is None:
            raise RuntimeError("the PLAIN exchange has not completed")
        return self._authorization_id

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslCredentialsInvalid("a PLAIN token after the exchange completed")
        # Java decodes with replacement characters; so does this, and they match nothing.
        authzid, username, password = _tokens(token.decode("utf-8", errors="replace"))
        if not username:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self._users.get(username)
        # Constant time (Kafka's Utils.isEqualConstantTime); a missing user still compares.
        matches = hmac.compare_digest(password.encode(), (expected or "").encode())
        if expected is None or not matches:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username")
        self._authorization_id = username
        return b""
