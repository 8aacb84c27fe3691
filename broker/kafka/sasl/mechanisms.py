"""What every SASL mechanism server is, and how it fails (Kafka's javax.security.sasl.SaslServer
with SaslAuthenticationException / SaslException)."""

from __future__ import annotations

from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SUPPORTED_MECHANISMS = (SCRAM_SHA_512, SCRAM_SHA_256, PLAIN)


class SaslAuthenticationFailed(Exception):
    """A failure whose message is sent to the client as it is (Kafka's
    SaslAuthenticationException): it must not tell whether the user exists."""


class SaslCredentialsInvalid(Exception):
    """A failure whose reason is only logged: the client gets the one generic message (Kafka's
    SaslException), so nothing it learns tells a missing user from a wrong password."""


class SaslServer(Protocol):
    """One authentication exchange of one mechanism on one connection."""

    @property
    def mechanism(self) -> str: ...

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str:
        """The user name once complete: the principal is User:<authorization_id>."""
        ...

    def evaluate(self, token: bytes) -> bytes:
        """The next challenge (empty when there is none) for the client's token; raises
        SaslAuthenticationFailed or SaslCredentialsInvalid."""
        ...
