"""One SASL listener's settings, apart from the handshake state machine (authenticator.py) so
the config loader can build them without importing the Kafka front."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from broker.kafka.sasl.mechanisms import PLAIN, SaslServer
from broker.kafka.sasl.plain import PlainSaslServer
from broker.kafka.sasl.scram import CredentialLookup, ScramSaslServer, mechanism_of

DEFAULT_MAX_RECEIVE_SIZE = 524288  # sasl.server.max.receive.size
DEFAULT_FAILED_AUTHENTICATION_DELAY_MS = 100  # connection.failed.authentication.delay.ms


def _no_credentials(_user: str, _mechanism: Any) -> None:
    return None


@dataclass(frozen=True)
class SaslSettings:
    """One SASL listener's settings: sasl.enabled.mechanisms (in the order the handshake
    lists them), PLAIN's users from the listener's JAAS config, the SCRAM credentials of the
    metadata image, and Kafka's limits."""

    mechanisms: tuple[str, ...]
    plain_users: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    scram_credentials: CredentialLookup = _no_credentials
    max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE
    reauth_ms: int = 0  # connections.max.reauth.ms; 0: sessions never expire
    failed_authentication_delay_ms: int = DEFAULT_FAILED_AUTHENTICATION_DELAY_MS

    def new_server(self, mechanism: str) -> SaslServer:
        if mechanism == PLAIN:
            return PlainSaslServer(self.plain_users)
        return ScramSaslServer(mechanism_of(mechanism), self.scram_credentials)
