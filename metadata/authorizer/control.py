"""The controller's ACL rules (Kafka's AclControlManager), pure functions of the image.

`create_acls` answers each binding in order: INVALID_REQUEST with Kafka's message when the
binding is malformed (the others go on), success otherwise; a binding the image (or an earlier
entry of the same request) already holds is a success with no record, and each new one gets a
fresh random Uuid that no binding in the image uses. `delete_acls` answers each filter with the
bindings it matched, and writes one RemoveAccessControlEntryRecord per binding, however many
filters matched it. A request's records are one atomic batch of at most
MAX_RECORDS_PER_USER_OP. `describe_acls` is a read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from metadata.authorizer.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_error,
    record_of,
)
from metadata.errors import ControllerApiError, ControllerResult, check_user_op_size
from metadata.image import MetadataImage
from metadata.records import Record, RemoveAccessControlEntryRecord

_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)


def enum_of(enum: type[_E], code: int) -> _E:
    """Kafka's fromCode: a code the enum does not know reads as UNKNOWN."""
    try:
        return enum(code)
    except ValueError:
        return enum(0)


@dataclass(frozen=True, slots=True)
class AclDeleteResult:
    """One filter's answer: the bindings it deleted, or why it was refused."""

    error: ControllerApiError | None
    deleted: tuple[AclBinding, ...] = ()


def filter_refusal(acl_filter: AclBindingFilter) -> str | None:
    """Kafka's AclControlManager.validateFilter, with its messages: deleting by a filter with
    an UNKNOWN code is refused."""
    f = acl_filter
    if f.resource_type == ResourceType.UNKNOWN or f.pattern_type == PatternType.UNKNOWN:
        return "Unknown patternFilter."
    if f.operation == AclOperation.UNKNOWN or f.permission_type == AclPermissionType.UNKNOWN:
        return "Unknown entryFilter."
    return None


def create_acls(
    image: MetadataImage, bindings: Sequence[AclBinding],
    new_id: Callable[[], str] = random_uuid,
) -> ControllerResult[tuple[ControllerApiError | None, ...]]:
    """Per binding, in order: None (created or already there) or INVALID_REQUEST."""
    existing = set(image.acls.values())
    used_ids = set(image.acls)
    results: list[ControllerApiError | None] = []
    records: list[Record] = []
    for binding in bindings:
        why = binding_error(binding)
        if why is not None:
            results.append(ControllerApiError(Errors.INVALID_REQUEST, why))
            continue
        if binding not in existing:
            existing.add(binding)
            acl_id = new_id()
            while acl_id in used_ids:  # Kafka's newAclId: never an id in use
                acl_id = new_id()
            used_ids.add(acl_id)
            records.append(record_of(acl_id, binding))
        results.append(None)
    check_user_op_size(records)
    return ControllerResult(tuple(records), tuple(results), atomic=True)


def delete_acls(
    image: MetadataImage, filters: Sequence[AclBindingFilter]
) -> ControllerResult[tuple[AclDeleteResult, ...]]:
    """Per filter, in order: the bindings it matched (each deleted once), or
    INVALID_REQUEST for a filter with UNKNOWN codes."""
    results: list[AclDeleteResult] = []
    removed: dict[str, None] = {}  # ids in the order first matched
    for acl_filter in filters:
        why = filter_refusal(acl_filter)
        if why is not None:
            results.append(AclDeleteResult(ControllerApiError(Errors.INVALID_REQUEST, why)))
            continue
        matched = [(acl_id, b) for acl_id, b in image.acls.items() if acl_filter.matches(b)]
        removed.update(dict.fromkeys(acl_id for acl_id, _ in matched))
        results.append(AclDeleteResult(None, tuple(b for _, b in matched)))
    records: list[Record] = [RemoveAccessControlEntryRecord(acl_id) for acl_id in removed]
    check_user_op_size(records)
    return ControllerResult(tuple(records), tuple(results), atomic=True)


def describe_acls(image: MetadataImage, acl_filter: AclBindingFilter) -> list[AclBinding]:
    """The image's bindings the filter selects, ordered by resource then entry."""
    return sorted_bindings(b for b in image.acls.values() if acl_filter.matches(b))


def sorted_bindings(bindings: Iterable[AclBinding]) -> list[AclBinding]:
    return sorted(bindings, key=lambda b: (
        b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
        b.permission_type))
