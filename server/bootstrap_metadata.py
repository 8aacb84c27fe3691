"""The records a new cluster's log begins with beyond metadata.version: SCRAM credentials
bootstrapped at format time (KIP-900), as Kafka's `kafka-storage.sh format --add-scram`.

`kraft-storage format --add-scram 'SCRAM-SHA-512=[name=admin,password=secret]'` (repeatable)
writes `bootstrap.checkpoint` into the metadata log directory, as Kafka does: a snapshot-format
file holding the metadata.version record and one UserScramCredentialRecord per argument (keys
derived here; the password is never written). The first active controller of a new cluster
appends these records in its first batch (QuorumController's bootstrap), so every node replays
them from the log; a controller started on a log that already has metadata ignores the file.

The argument's syntax and checks are Kafka's ScramParser: `MECHANISM=[k=v,...]`, split on `,`
(no escaping), a value's surrounding `"` stripped; keys `name` (required), `password` or
`saltedpassword` (base64, needs `salt`), `salt` (base64; default the UTF-8 bytes of a random
base-36 string, as Kafka's ScramFormatter), `iterations` (4096..16384, default 4096).
"""

from __future__ import annotations

import base64
import binascii
import os
import secrets

from kraft.log.base import CorruptRecordError
from kraft.log.meta_properties import StorageError
from kraft.log.snapshots import (
    BOOTSTRAP_SNAPSHOT_ID,
    MemorySnapshotStore,
    SnapshotBuilder,
    read_snapshot_records,
)
from metadata.configs import METADATA_VERSION, SUPPORTED_FEATURES
from metadata.records import (
    FeatureLevelRecord,
    Record,
    RecordDecodeError,
    decode_record,
    encode_record,
)
from metadata.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    credential_from_salted_password,
    salted_password,
)
from metadata.security_records import UserScramCredentialRecord
from server.config import NodeConfig

BOOTSTRAP_CHECKPOINT = "bootstrap.checkpoint"  # Kafka's file name, in the metadata log dir
DEFAULT_ITERATIONS = 4096


def bootstrap_checkpoint_path(config: NodeConfig) -> str:
    return os.path.join(config.metadata_log_dir, BOOTSTRAP_CHECKPOINT)


def random_salt() -> bytes:
    """Kafka's ScramFormatter.secureRandomBytes: a random 130-bit number in base 36, UTF-8."""
    value = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    text = ""
    while True:
        value, digit = divmod(value, 36)
        text = digits[digit] + text
        if value == 0:
            return text.encode()


def _split_mechanism(argument: str) -> tuple[ScramMechanism, str]:
    text = argument.strip()
    mechanism_name, equals, config = text.partition("=")
    if not equals:
        raise StorageError(f"Failed to find equals sign in SCRAM argument '{text}'")
    mechanism = ScramMechanism.from_name(mechanism_name)
    if mechanism is ScramMechanism.UNKNOWN:
        raise StorageError(f"The add-scram mechanism {mechanism_name} is not supported.")
    if not config.startswith("["):
        raise StorageError("Expected configuration string to start with [")
    if not config.endswith("]"):
        raise StorageError("Expected configuration string to end with ]")
    return mechanism, config[1:-1]


def _components(config: str) -> dict[str, str]:
    components: dict[str, str] = {}
    for component in config.split(","):
        key, equals, value = component.partition("=")
        if not equals:
            raise StorageError(f"No equals sign found in SCRAM component: {component}")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        components[key] = value
    return components


def _base64(what: str, text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise StorageError(f"Failed to decode given {what}: {text}") from None


def parse_add_scram(argument: str) -> UserScramCredentialRecord:
    """One --add-scram argument as the record it bootstraps (Kafka's ScramParser)."""
    mechanism, config = _split_mechanism(argument)
    components = _components(config)
    name = components.pop("name", None)
    if name is None:
        raise StorageError("You must supply 'name' to add-scram")
    salt_text = components.pop("salt", None)
    salt = None if salt_text is None else _base64("salt", salt_text)
    iterations_text = components.pop("iterations", None)
    iterations = DEFAULT_ITERATIONS
    if iterations_text is not None:
        try:
            iterations = int(iterations_text)
        except ValueError:
            raise StorageError(f"Failed to parse iterations count: {iterations_text}") from None
    password = components.pop("password", None)
    salted_text = components.pop("saltedpassword", None)
    salted = None
    if password is None:
        if salted_text is None:
            raise StorageError("You must supply one of 'password' or 'saltedpassword' to "
                               "add-scram")
        if salt is None:
            raise StorageError("You must supply 'salt' with 'saltedpassword' to add-scram")
        salted = _base64("saltedPassword", salted_text)
    if components:
        raise StorageError(f"Unknown SCRAM configurations: {', '.join(sorted(components))}")
    if iterations < MIN_ITERATIONS:
        raise StorageError(f"The 'iterations' value must be >= {MIN_ITERATIONS} for add-scram "
                           f"using {mechanism.mechanism_name}")
    if iterations > MAX_ITERATIONS:
        raise StorageError(f"The 'iterations' value must be <= {MAX_ITERATIONS} for add-scram "
                           f"using {mechanism.mechanism_name}")
    if salt is None:
        salt = random_salt()
    if salted is None:
        assert password is not None
        salted = salted_password(mechanism, password.encode(), salt, iterations)
    credential = credential_from_salted_password(mechanism, salt, salted, iterations)
    return UserScramCredentialRecord(name, int(mechanism), credential.salt,
                                     credential.stored_key, credential.server_key, iterations)


def write_bootstrap_checkpoint(config: NodeConfig, records: list[Record]) -> str:
    """Write (durably, replacing any earlier one) `bootstrap.checkpoint` holding
    metadata.version and `records`; return its path."""
    level = SUPPORTED_FEATURES[METADATA_VERSION][1]
    encoded = [encode_record(FeatureLevelRecord(METADATA_VERSION, level)),
               *(encode_record(r) for r in records)]
    store = MemorySnapshotStore()
    builder = SnapshotBuilder(store, BOOTSTRAP_SNAPSHOT_ID, 0)
    builder.append(encoded)
    builder.freeze()
    path = bootstrap_checkpoint_path(config)
    part = path + ".part"
    try:
        with open(part, "wb") as file:
            file.write(store.read_all(BOOTSTRAP_SNAPSHOT_ID))
            file.flush()
            os.fsync(file.fileno())
        os.replace(part, path)
        directory = os.open(config.metadata_log_dir, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    except OSError as err:
        raise StorageError(f"Cannot write {path}: {err.strerror}.") from None
    return path


def read_bootstrap_records(config: NodeConfig) -> tuple[Record, ...]:
    """The records of `bootstrap.checkpoint` a new cluster's log begins with, but for
    metadata.version (the controller writes the level it runs); none without the file."""
    path = bootstrap_checkpoint_path(config)
    if not os.path.exists(path):
        return ()
    try:
        records = [decode_record(data) for data in read_snapshot_records(path)]
    except (CorruptRecordError, RecordDecodeError, OSError) as err:
        raise StorageError(f"The bootstrap metadata {path} cannot be read: {err}") from None
    return tuple(r for r in records
                 if not (isinstance(r, FeatureLevelRecord) and r.name == METADATA_VERSION))
