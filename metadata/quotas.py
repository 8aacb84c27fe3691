"""Client quotas as metadata (KIP-546): the controller's rules for AlterClientQuotas (Kafka's
ClientQuotaControlManager) and the description DescribeClientQuotas answers from an image
(Kafka's ClientQuotasImage.describe).

An entity is a user, a client id, both, or an IP, each part naming one (a name) or the default
entity of its type (None). Its keys are Kafka's QuotaConfigs: the byte rates (whole numbers),
request_percentage and controller_mutation_rate for users and client ids,
connection_creation_rate for IPs. Enforcing them is the broker's (broker/quotas/).
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from kraft.errors import Errors
from metadata.errors import ControllerApiError, ControllerResult, check_user_op_size
from metadata.image import MetadataImage
from metadata.records import Record
from metadata.security_records import ClientQuotaRecord, EntityData, QuotaEntity, quota_entity

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"
ENTITY_TYPES = (USER, CLIENT_ID, IP)

_INT_MAX = 2**31 - 1
_LONG_MAX = 2**63 - 1
# key -> the largest whole number it takes, or None for a double (Kafka's QuotaConfigs).
USER_CLIENT_KEYS: Mapping[str, int | None] = {
    "producer_byte_rate": _LONG_MAX, "consumer_byte_rate": _LONG_MAX,
    "request_percentage": None, "controller_mutation_rate": None,
}
IP_KEYS: Mapping[str, int | None] = {"connection_creation_rate": _INT_MAX}

# The parts of an entity as a request gives them: (type, name or None), in request order.
EntityParts = tuple[tuple[str, str | None], ...]


class MatchType(IntEnum):
    """DescribeClientQuotas' component match types."""

    EXACT = 0  # the entity of that name
    DEFAULT = 1  # the default entity of the type
    SPECIFIED = 2  # any entity of the type, the default included


@dataclass(frozen=True, slots=True)
class QuotaOp:
    key: str
    value: float | None  # None: remove the key


@dataclass(frozen=True, slots=True)
class QuotaAlteration:
    entity: EntityParts
    ops: tuple[QuotaOp, ...]


@dataclass(frozen=True, slots=True)
class QuotaFilterComponent:
    entity_type: str
    match_type: int
    match: str | None = None


def entity_text(entity: Iterable[tuple[str, str | None]]) -> str:
    """An entity as Kafka's ClientQuotaEntity prints it in messages."""
    parts = ", ".join(f"{kind}={'null' if name is None else name}" for kind, name in entity)
    return f"ClientQuotaEntity(entries={{{parts}}})"


def _invalid(message: str) -> ControllerApiError:
    return ControllerApiError(Errors.INVALID_REQUEST, message)


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _entity_keys(entity: EntityParts,
                 resolved_hosts: frozenset[str]) -> Mapping[str, int | None] | ControllerApiError:
    """The keys the entity takes, or why it is refused (Kafka's validateEntity, then
    configKeysForEntityType). An IP entity names an address, or a host name the caller
    resolved (`resolved_hosts`), since a rule does no I/O."""
    if not entity:
        return _invalid("Invalid empty client quota entity")
    seen: set[str] = set()
    for kind, name in entity:
        if kind in seen:
            return _invalid(f"Invalid client quota entity, duplicate entity entry {kind}")
        seen.add(kind)
        if kind not in ENTITY_TYPES:
            return _invalid(f"Unhandled client quota entity type: {kind}")
        if name is not None and not name:
            return _invalid(f"Empty {kind} not supported")
    if IP in seen:
        if len(seen) > 1:
            return _invalid("Invalid quota entity combination, IP entity should not be "
                            "combined with User or ClientId")
        ip = entity[0][1]
        if ip is not None and not is_ip_literal(ip) and ip not in resolved_hosts:
            return _invalid(f"{ip} is not a valid IP or resolvable host.")
        return IP_KEYS
    return USER_CLIENT_KEYS


def _value_error(keys: Mapping[str, int | None], key: str,
                 value: float) -> ControllerApiError | None:
    """Kafka's validateQuotaKeyValue."""
    if key not in keys:
        return _invalid(f"Invalid configuration key {key}")
    if not math.isfinite(value):  # beyond Kafka: a NaN or infinity is no rate
        return _invalid(f"Quota {key} must be a finite number")
    if value <= 0.0:
        return _invalid(f"Quota {key} must be greater than 0")
    largest = keys[key]
    if largest is None:
        return None
    if value > largest:
        kind = "an INT" if largest == _INT_MAX else "a LONG"
        return _invalid(f"Proposed value for {key} is too large for {kind}.")
    if abs(math.fmod(value, 1.0)) > 1e-6:
        return _invalid(f"{key} cannot be a fractional value.")
    return None


def _entity_records(image: MetadataImage, entity: EntityParts, ops: Sequence[QuotaOp],
                    resolved_hosts: frozenset[str]) -> list[Record] | ControllerApiError:
    keys = _entity_keys(entity, resolved_hosts)
    if isinstance(keys, ControllerApiError):
        return keys
    changes: dict[str, float | None] = {}
    for op in ops:
        if op.key in changes:
            return _invalid(f"Duplicate quota key {op.key} not updating quota for this "
                            f"entity {entity_text(entity)}")
        changes[op.key] = op.value
    current = image.client_quotas.get(quota_entity(entity), {})
    data = tuple(EntityData(kind, name) for kind, name in entity)
    records: list[Record] = []
    for key, value in changes.items():
        if value is None:  # a removal of an unset key writes nothing, as in Kafka
            if key in current:
                records.append(ClientQuotaRecord(data, key, 0.0, remove=True))
            continue
        error = _value_error(keys, key, value)
        if error is not None:
            return error
        if current.get(key) != value:  # only a change is written
            records.append(ClientQuotaRecord(data, key, value))
    return records


def alter_client_quotas(
    image: MetadataImage, alterations: Sequence[QuotaAlteration], *,
    validate_only: bool = False, resolved_hosts: frozenset[str] = frozenset(),
) -> ControllerResult[tuple[ControllerApiError | None, ...]]:
    """Per alteration, in order: None or INVALID_REQUEST with Kafka's message. A refused
    entity writes nothing; the others' records are one batch (none with validate_only).
    An entity named twice is refused every time (Kafka answers once per entity, and writes
    the first one's changes even as it reports the error; here nothing of it is written)."""
    counts: dict[QuotaEntity, int] = {}
    for alteration in alterations:
        key = quota_entity(alteration.entity)
        counts[key] = counts.get(key, 0) + 1
    results: list[ControllerApiError | None] = []
    records: list[Record] = []
    for alteration in alterations:
        if counts[quota_entity(alteration.entity)] > 1:
            results.append(_invalid(f"Ignoring duplicate entity {entity_text(alteration.entity)}"))
            continue
        outcome = _entity_records(image, alteration.entity, alteration.ops, resolved_hosts)
        if isinstance(outcome, ControllerApiError):
            results.append(outcome)
            continue
        records.extend(outcome)
        results.append(None)
    check_user_op_size(records)
    return ControllerResult(() if validate_only else tuple(records), tuple(results),
                            atomic=True)


def _components(components: Sequence[QuotaFilterComponent]
                ) -> tuple[dict[str, str | None], set[str]]:
    """(exact names by type, types matched by any name) of a filter; Kafka's refusals."""
    exact: dict[str, str | None] = {}
    typed: set[str] = set()
    for c in components:
        kind = c.entity_type
        if not kind:
            raise _invalid("Invalid empty entity type.")
        if kind in exact or kind in typed:
            raise _invalid(f"Entity type {kind} cannot appear more than once in the filter.")
        if kind not in ENTITY_TYPES:
            raise ControllerApiError(Errors.UNSUPPORTED_VERSION, f"Unsupported entity type {kind}")
        if c.match_type == MatchType.EXACT:
            if c.match is None:
                raise _invalid("Request specified MATCH_TYPE_EXACT, but set match string to "
                               "null.")
            exact[kind] = c.match
        elif c.match_type == MatchType.DEFAULT:
            if c.match is not None:
                raise _invalid("Request specified MATCH_TYPE_DEFAULT, but also specified a "
                               "match string.")
            exact[kind] = None
        elif c.match_type == MatchType.SPECIFIED:
            if c.match is not None:
                raise _invalid("Request specified MATCH_TYPE_SPECIFIED, but also specified a "
                               "match string.")
            typed.add(kind)
        else:
            raise _invalid(f"Unknown match type {c.match_type}")
    named = set(exact) | typed
    if IP in named and named & {USER, CLIENT_ID}:
        raise _invalid("Invalid entity filter component combination. IP filter component "
                       "should not be used with user or clientId filter component.")
    return exact, typed


def describe_client_quotas(
    image: MetadataImage, components: Sequence[QuotaFilterComponent], strict: bool,
) -> list[tuple[QuotaEntity, Mapping[str, float]]]:
    """The entities the filter matches with their quotas, sorted (Kafka's
    ClientQuotasImage.describe): every component must match one part of the entity (a name,
    the default, or any entity of the type); `strict` also wants no other part. No component
    matches everything, or nothing when strict. Raises ControllerApiError for a bad filter."""
    exact, typed = _components(components)
    matched = []
    for entity, values in image.client_quotas.items():
        parts = dict(entity)
        if all(kind in parts and parts[kind] == name for kind, name in exact.items()) \
                and all(kind in parts for kind in typed) \
                and (not strict or len(parts) == len(exact) + len(typed)):
            matched.append((entity, values))
    if strict and not exact and not typed:
        return []
    return sorted(matched, key=lambda item: [(t, n is not None, n or "") for t, n in item[0]])
