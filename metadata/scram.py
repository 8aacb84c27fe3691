"""SCRAM credentials as metadata (KIP-554): the mechanisms, the credential a node keeps per user
and mechanism, the lookup a SASL server calls, the key derivation of RFC 5802, and the
controller's rules for AlterUserScramCredentials and DescribeUserScramCredentials.

A credential holds what a SCRAM server needs to check a login — salt, StoredKey, ServerKey,
iterations — never the password. The image keeps them as user -> mechanism -> credential
(MetadataImage.scram), built by replaying UserScramCredentialRecord (11) and
RemoveUserScramCredentialRecord (22).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import TYPE_CHECKING

from kraft.errors import Errors
from metadata.configs import METADATA_VERSION
from metadata.errors import ControllerApiError, ControllerResult, check_user_op_size
from metadata.records import Record
from metadata.security_records import RemoveUserScramCredentialRecord, UserScramCredentialRecord

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


# ---- the controller's rules (Kafka's ScramControlManager) and the description ----

SCRAM_METADATA_VERSION = 11  # 3.5-IV2: the first metadata.version with SCRAM records
_TWICE = "A user credential cannot be altered twice in the same request"
_DESCRIBE_MISSING = "Attempt to describe a user credential that does not exist: "
_DESCRIBE_TWICE = ("Cannot describe SCRAM credentials for the same user twice in a single "
                   "request: ")


@dataclass(frozen=True, slots=True)
class ScramDeletion:
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True, repr=False)
class ScramUpsertion:
    """What AlterUserScramCredentials carries: the client salts and hashes the password; the
    controller derives the keys (never sees the password)."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return (f"ScramUpsertion(name={self.name!r}, mechanism={self.mechanism}, "
                f"iterations={self.iterations})")


@dataclass(frozen=True, slots=True)
class ScramAlterResult:
    user: str
    error: ControllerApiError | None


@dataclass(frozen=True, slots=True)
class ScramDescription:
    """One user's answer: (mechanism, iterations) per credential, or the error."""

    user: str
    error: ControllerApiError | None
    credentials: tuple[tuple[int, int], ...] = ()


def _name_and_mechanism_error(name: str, mechanism: int) -> ControllerApiError | None:
    if not name:
        return ControllerApiError(Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if ScramMechanism.of_code(mechanism) is ScramMechanism.UNKNOWN:
        return ControllerApiError(Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def _upsertion_error(upsertion: ScramUpsertion) -> ControllerApiError | None:
    error = _name_and_mechanism_error(upsertion.name, upsertion.mechanism)
    if error is not None:
        return error
    if upsertion.iterations < MIN_ITERATIONS:
        return ControllerApiError(Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if upsertion.iterations > MAX_ITERATIONS:
        return ControllerApiError(Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    # Beyond Kafka, which stores any bytes: a credential no login could ever match.
    mechanism = ScramMechanism(upsertion.mechanism)
    if not upsertion.salt:
        return ControllerApiError(Errors.UNACCEPTABLE_CREDENTIAL, "The salt must not be empty")
    size = hashlib.new(mechanism.hash_name).digest_size
    if len(upsertion.salted_password) != size:
        return ControllerApiError(
            Errors.UNACCEPTABLE_CREDENTIAL, f"The salted password of {mechanism.mechanism_name} "
            f"is {size} bytes, not {len(upsertion.salted_password)}")
    return None


def alter_user_scram_credentials(
    image: MetadataImage, deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> ControllerResult[tuple[ScramAlterResult, ...]]:
    """Kafka's alterCredentials: one result per user named (its deletions answered first,
    then its upsertions, then the refused users, each group in request order); a user named
    twice is DUPLICATE_RESOURCE and nothing of it is written. The records are one batch."""
    errors: dict[str, ControllerApiError] = {}
    deleting: dict[str, ScramDeletion] = {}
    upserting: dict[str, ScramUpsertion] = {}
    unsupported = image.features.get(METADATA_VERSION, 0) < SCRAM_METADATA_VERSION

    def refuse(name: str, error: ControllerApiError) -> None:
        deleting.pop(name, None)
        upserting.pop(name, None)
        errors[name] = error

    for deletion in deletions:
        name = deletion.name
        if name in errors:
            continue
        if name in deleting:
            refuse(name, ControllerApiError(Errors.DUPLICATE_RESOURCE, _TWICE))
        elif unsupported:
            refuse(name, ControllerApiError(
                Errors.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM"))
        else:
            error = _name_and_mechanism_error(name, deletion.mechanism)
            if error is None and scram_credential(image, name, deletion.mechanism) is None:
                error = ControllerApiError(
                    Errors.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist")
            if error is not None:
                refuse(name, error)
            else:
                deleting[name] = deletion
    for upsertion in upsertions:
        name = upsertion.name
        if name in errors:
            continue
        if name in deleting or name in upserting:
            refuse(name, ControllerApiError(Errors.DUPLICATE_RESOURCE, _TWICE))
        elif unsupported:
            refuse(name, ControllerApiError(
                Errors.UNSUPPORTED_VERSION, "The current metadata.version does not support SCRAM"))
        else:
            error = _upsertion_error(upsertion)
            if error is not None:
                refuse(name, error)
            else:
                upserting[name] = upsertion
    records: list[Record] = [RemoveUserScramCredentialRecord(d.name, d.mechanism)
                             for d in deleting.values()]
    for u in upserting.values():
        mechanism = ScramMechanism(u.mechanism)
        credential = credential_from_salted_password(mechanism, u.salt, u.salted_password,
                                                     u.iterations)
        records.append(UserScramCredentialRecord(
            u.name, u.mechanism, credential.salt, credential.stored_key, credential.server_key,
            credential.iterations))
    check_user_op_size(records)
    results = [ScramAlterResult(name, None) for name in (*deleting, *upserting)]
    results.extend(ScramAlterResult(name, error) for name, error in errors.items())
    return ControllerResult(tuple(records), tuple(results), atomic=True)


def describe_user_scram_credentials(image: MetadataImage,
                                    users: Sequence[str] | None) -> list[ScramDescription]:
    """Kafka's ScramImage.describe: every user with a credential when `users` is empty or
    None (sorted), else each user named once (in request order): its mechanisms and
    iterations, RESOURCE_NOT_FOUND, or DUPLICATE_RESOURCE when named twice."""
    named: dict[str, bool] = {}  # user -> named more than once
    for user in (users or sorted(image.scram)):
        named[user] = user in named
    answers = []
    for user, twice in named.items():
        if twice:
            answers.append(ScramDescription(user, ControllerApiError(
                Errors.DUPLICATE_RESOURCE, _DESCRIBE_TWICE + user)))
            continue
        credentials = image.scram.get(user, {})
        if not credentials:
            answers.append(ScramDescription(user, ControllerApiError(
                Errors.RESOURCE_NOT_FOUND, _DESCRIBE_MISSING + user)))
            continue
        answers.append(ScramDescription(user, None, tuple(
            (mechanism, credentials[mechanism].iterations) for mechanism in sorted(credentials))))
    return answers
