"""The security records that are not ACLs: SCRAM credentials (KIP-554) and client quotas
(KIP-546), with Kafka's api keys, fields and JSON names, and their protobuf bodies
(metadata/rpc/security_records.proto). metadata/records.py registers their codecs.

The JSON is what `kafka-dump-log --cluster-metadata-decoder` prints (bytes as base64, as
Kafka's JSON converters write them); views meant for people (kraft-snapshot) redact the salt
and keys (`redacted_json`).
"""

from __future__ import annotations

import base64
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from google.protobuf.message import Message

from metadata.record_types import MetadataRecordType
from metadata.rpc import security_records_pb2 as pb

REDACTED = "[redacted]"  # kafka-metadata-shell's mark for a secret it does not show

# (entity type, entity name or None for the default entity), sorted by type: a hashable key
# for one quota entity, e.g. (("client-id", None), ("user", "alice")).
QuotaEntity = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True, slots=True, repr=False)
class UserScramCredentialRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.USER_SCRAM_CREDENTIAL_RECORD
    name: str
    mechanism: int  # int8: metadata.scram.ScramMechanism
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:  # replay errors and logs print records: no keys in them
        return (f"UserScramCredentialRecord(name={self.name!r}, mechanism={self.mechanism}, "
                f"iterations={self.iterations}, salt, keys {REDACTED})")


@dataclass(frozen=True, slots=True)
class RemoveUserScramCredentialRecord:
    record_type: ClassVar[MetadataRecordType] = (
        MetadataRecordType.REMOVE_USER_SCRAM_CREDENTIAL_RECORD)
    name: str
    mechanism: int


@dataclass(frozen=True, slots=True)
class EntityData:
    entity_type: str  # "user", "client-id" or "ip"
    entity_name: str | None  # None: the default entity of the type


@dataclass(frozen=True, slots=True)
class ClientQuotaRecord:
    record_type: ClassVar[MetadataRecordType] = MetadataRecordType.CLIENT_QUOTA_RECORD
    entity: tuple[EntityData, ...]
    key: str
    value: float
    remove: bool = False

    @property
    def quota_entity(self) -> QuotaEntity:
        return quota_entity((e.entity_type, e.entity_name) for e in self.entity)


def quota_entity(parts: Any) -> QuotaEntity:
    """The entity key of (type, name) pairs, in any order."""
    return tuple(sorted(parts, key=lambda part: part[0]))


SecurityRecord = UserScramCredentialRecord | RemoveUserScramCredentialRecord | ClientQuotaRecord


# ---- validation of what the wire types allow (the replay checks the meaning) ----

def _check_int8(field: str, value: int) -> None:
    if not -128 <= value <= 127:
        raise ValueError(f"{field} {value} is outside [-128, 127]")


def _validate_scram(record: UserScramCredentialRecord | RemoveUserScramCredentialRecord) -> None:
    _check_int8("mechanism", record.mechanism)


def _validate_quota(record: ClientQuotaRecord) -> None:
    if not record.remove and not math.isfinite(record.value):
        raise ValueError(f"value {record.value} is not a finite number")


# ---- protobuf bodies ----

def _scram_to_pb(r: UserScramCredentialRecord) -> Message:
    return pb.UserScramCredentialRecord(
        name=r.name, mechanism=r.mechanism, salt=r.salt, stored_key=r.stored_key,
        server_key=r.server_key, iterations=r.iterations)


def _scram_from_pb(m: pb.UserScramCredentialRecord) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(m.name, m.mechanism, m.salt, m.stored_key, m.server_key,
                                     m.iterations)


def _quota_to_pb(r: ClientQuotaRecord) -> Message:
    return pb.ClientQuotaRecord(
        entity=[pb.ClientQuotaEntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in r.entity],
        key=r.key, value=0.0 if r.remove else r.value, remove=r.remove)


def _quota_from_pb(m: pb.ClientQuotaRecord) -> ClientQuotaRecord:
    entity = tuple(EntityData(e.entity_type, e.entity_name if e.HasField("entity_name") else None)
                   for e in m.entity)
    return ClientQuotaRecord(entity, m.key, m.value, m.remove)


# What records.py's codec table needs: (api key, body message, to body, from body, validation).
CodecSpec = tuple[MetadataRecordType, type[Message], Callable[[Any], Message],
                  Callable[[Any], Any], Callable[[Any], None]]
_T = MetadataRecordType
SECURITY_CODECS: tuple[CodecSpec, ...] = (
    (_T.USER_SCRAM_CREDENTIAL_RECORD, pb.UserScramCredentialRecord, _scram_to_pb,
     _scram_from_pb, _validate_scram),
    (_T.REMOVE_USER_SCRAM_CREDENTIAL_RECORD, pb.RemoveUserScramCredentialRecord,
     lambda r: pb.RemoveUserScramCredentialRecord(name=r.name, mechanism=r.mechanism),
     lambda m: RemoveUserScramCredentialRecord(m.name, m.mechanism), _validate_scram),
    (_T.CLIENT_QUOTA_RECORD, pb.ClientQuotaRecord, _quota_to_pb, _quota_from_pb,
     _validate_quota),
)


# ---- JSON ----

def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def security_record_json(record: SecurityRecord) -> dict[str, Any]:
    """The record's data as kafka-dump-log prints it (camelCase, bytes in base64)."""
    match record:
        case UserScramCredentialRecord():
            return {"name": record.name, "mechanism": record.mechanism,
                    "salt": _b64(record.salt), "storedKey": _b64(record.stored_key),
                    "serverKey": _b64(record.server_key), "iterations": record.iterations}
        case RemoveUserScramCredentialRecord():
            return {"name": record.name, "mechanism": record.mechanism}
        case ClientQuotaRecord():
            return {"entity": [{"entityType": e.entity_type, "entityName": e.entity_name}
                               for e in record.entity],
                    "key": record.key, "value": record.value, "remove": record.remove}
    raise TypeError(f"not a metadata record: {record!r}")


SECRET_FIELDS = ("salt", "storedKey", "serverKey")


def redacted_json(record_json: dict[str, Any]) -> dict[str, Any]:
    """A record's JSON (record_json.record_to_json) with a SCRAM credential's salt and keys
    replaced by REDACTED; any other record unchanged."""
    if record_json.get("type") != MetadataRecordType.USER_SCRAM_CREDENTIAL_RECORD.name:
        return record_json
    data = dict(record_json["data"])
    for field in SECRET_FIELDS:
        data[field] = REDACTED
    return {**record_json, "data": data}
