"""SCRAM credentials as metadata (KIP-554): the mechanisms, the credential a node keeps per user
and mechanism, the lookup a SASL server calls, and the key derivation of RFC 5802.

A credential holds what a SCRAM server needs to check a login — salt, StoredKey, ServerKey,
iterations — never the password. The image keeps them as user -> mechanism -> credential
(MetadataImage.scram), built by replaying UserScramCredentialRecord (11) and
RemoveUserScramCredentialRecord (22).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from metadata.image import MetadataImage

MIN_ITERATIONS = 4096  # Kafka's ScramMechanism.minIterations
MAX_ITERATIONS = 16384  # Kafka's ScramMechanism.maxIterations (AlterUserScramCredentials' bound)


class ScramMechanism(IntEnum):
    """Kafka's ScramMechanism codes (the records' and the wire's int8)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """"SCRAM-SHA-256" / "SCRAM-SHA-512", as sasl.mechanism and kafka-configs.sh name it."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        """The hashlib name of the mechanism's hash function."""
        if self is ScramMechanism.UNKNOWN:
            raise ValueError("the UNKNOWN SCRAM mechanism has no hash function")
        return "sha256" if self is ScramMechanism.SCRAM_SHA_256 else "sha512"

    @classmethod
    def from_name(cls, name: str) -> ScramMechanism:
        """The mechanism a name such as "SCRAM-SHA-512" names, or UNKNOWN."""
        for mechanism in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if mechanism.mechanism_name == name:
                return mechanism
        return cls.UNKNOWN

    @classmethod
    def of_code(cls, code: int) -> ScramMechanism:
        """The mechanism of an int8 code; codes Kafka does not define read as UNKNOWN."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What a SCRAM server checks a login against (Kafka's ScramCredential)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # keys stay out of logs and tracebacks
        return f"ScramCredential(iterations={self.iterations}, <keys redacted>)"


def scram_credential(image: MetadataImage, user: str,
                     mechanism: ScramMechanism | int) -> ScramCredential | None:
    """The committed credential of `user` for `mechanism`, or None if there is none."""
    by_mechanism = image.scram.get(user)
    return None if by_mechanism is None else by_mechanism.get(int(mechanism))


# ---- RFC 5802 key derivation ----

def salted_password(mechanism: ScramMechanism, password: bytes, salt: bytes,
                    iterations: int) -> bytes:
    """SaltedPassword = Hi(password, salt, i): PBKDF2-HMAC with the mechanism's hash."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password, salt, iterations)


def client_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    return hmac.digest(salted, b"Client Key", mechanism.hash_name)


def stored_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    """StoredKey = H(ClientKey)."""
    return hashlib.new(mechanism.hash_name, client_key(mechanism, salted)).digest()


def server_key(mechanism: ScramMechanism, salted: bytes) -> bytes:
    """ServerKey = HMAC(SaltedPassword, "Server Key")."""
    return hmac.digest(salted, b"Server Key", mechanism.hash_name)


def credential_from_salted_password(mechanism: ScramMechanism, salt: bytes, salted: bytes,
                                    iterations: int) -> ScramCredential:
    """The credential the controller stores for an upsert's salt and salted password
    (Kafka's ScramCredentialData built by ScramControlManager / ScramFormatter)."""
    return ScramCredential(salt, stored_key(mechanism, salted), server_key(mechanism, salted),
                           iterations)


def credential_from_password(mechanism: ScramMechanism, password: str, salt: bytes,
                             iterations: int) -> ScramCredential:
    """The credential of a clear password (UTF-8, no SASLprep, as Kafka)."""
    salted = salted_password(mechanism, password.encode(), salt, iterations)
    return credential_from_salted_password(mechanism, salt, salted, iterations)
