"""Kafka's ACL binding model (org.apache.kafka.common.acl / resource), with Kafka's int8 codes.

A binding says: `principal` from `host` is ALLOWed or DENYed `operation` on the resources a
pattern names (resource type + name, matched LITERALly or as a PREFIX). Filters select bindings
for DescribeAcls and DeleteAcls (ANY / MATCH / None = any). The codes are the wire's and the
metadata records' (AccessControlEntryRecord), so they never change.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

from metadata.records import AccessControlEntryRecord


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"  # the one CLUSTER resource's name
WILDCARD_RESOURCE = "*"  # a LITERAL "*" names every resource of its type
WILDCARD_HOST = "*"
ANONYMOUS = "User:ANONYMOUS"

# An ALLOW of one of these also allows DESCRIBE (Kafka's AclEntry / StandardAuthorizerData).
IMPLIES_DESCRIBE = frozenset({AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE,
                              AclOperation.ALTER})
IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.ALTER_CONFIGS})

# The operations Kafka allows per resource type (AclEntry.supportedOperations), for the
# authorized-operations bitfields of Metadata, DescribeCluster and DescribeGroups.
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({
        AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
        AclOperation.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({AclOperation.DESCRIBE, AclOperation.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({AclOperation.DESCRIBE}),
    ResourceType.USER: frozenset({AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS}),
}

MAX_TEXT_CHARS = 32_768


@dataclass(frozen=True, slots=True)
class AclBinding:
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str  # "User:alice", "User:*"
    host: str  # "*" or an address as Java prints it
    operation: AclOperation
    permission_type: AclPermissionType

    def describe(self) -> str:
        """One line, in kafka-acls.sh's words."""
        return (f"{self.principal} has {self.permission_type.name} permission for "
                f"operations: {self.operation.name} from hosts: {self.host} on "
                f"{self.resource_type.name}:{self.pattern_type.name}:{self.resource_name}")


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings. None strings and the ANY codes match anything; pattern MATCH selects
    every binding that applies to the literal `resource_name` (exact, `*` or a prefix)."""

    resource_type: ResourceType = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self._matches_pattern(binding) and self._matches_entry(binding)

    def _matches_pattern(self, binding: AclBinding) -> bool:
        # Kafka's ResourcePatternFilter.matches.
        if self.resource_type not in (ResourceType.ANY, binding.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, binding.pattern_type):
            return False
        name = self.resource_name
        if name is None:
            return True
        if self.pattern_type in (PatternType.ANY, binding.pattern_type):
            return name == binding.resource_name
        if binding.pattern_type == PatternType.LITERAL:
            return binding.resource_name in (name, WILDCARD_RESOURCE)
        return binding.pattern_type == PatternType.PREFIXED and name.startswith(
            binding.resource_name)

    def _matches_entry(self, binding: AclBinding) -> bool:
        # Kafka's AccessControlEntryFilter.matches.
        return ((self.principal is None or self.principal == binding.principal)
                and (self.host is None or self.host == binding.host)
                and self.operation in (AclOperation.ANY, binding.operation)
                and self.permission_type in (AclPermissionType.ANY, binding.permission_type))


def binding_of(record: AccessControlEntryRecord) -> AclBinding:
    """The binding a record holds. Codes outside the enums are read as UNKNOWN, which no
    decision matches, so a newer writer's value never widens access here."""
    return AclBinding(
        _code(ResourceType, record.resource_type), record.resource_name,
        _code(PatternType, record.pattern_type), record.principal, record.host,
        _code(AclOperation, record.operation), _code(AclPermissionType, record.permission_type))


def record_of(acl_id: str, binding: AclBinding) -> AccessControlEntryRecord:
    return AccessControlEntryRecord(
        acl_id, binding.resource_type, binding.resource_name, binding.pattern_type,
        binding.principal, binding.host, binding.operation, binding.permission_type)


_E = TypeVar("_E", ResourceType, PatternType, AclOperation, AclPermissionType)


def _code(enum: type[_E], value: int) -> _E:
    try:
        return enum(value)
    except ValueError:
        return enum(0)


def principal_type_and_name(principal: str) -> tuple[str, str] | None:
    """Kafka's SecurityUtils.parseKafkaPrincipal: `Type:name`, both non-empty."""
    kind, sep, name = principal.partition(":")
    if not sep or not kind or not name:
        return None
    return kind, name


def wildcard_of(principal: str) -> str:
    """The wildcard principal of `principal`'s type (`User:*` for a `User:`)."""
    kind, _, _ = principal.partition(":")
    return f"{kind}:*"


def binding_error(binding: AclBinding) -> str | None:
    """Why Kafka refuses to create this binding (INVALID_REQUEST), or None
    (AclControlManager.validateNewAcl)."""
    if binding.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {binding.resource_type.name}"
    if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {binding.pattern_type.name}"
    if binding.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {binding.operation.name}"
    if binding.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {binding.permission_type.name}"
    if not binding.resource_name:
        return "Resource name should not be empty"
    if (binding.resource_type == ResourceType.CLUSTER
            and binding.resource_name != CLUSTER_NAME):
        return ("The only valid name for the CLUSTER resource is " + CLUSTER_NAME)
    if principal_type_and_name(binding.principal) is None:
        return f"Could not parse principal from `{binding.principal}` (no colon is present)."
    if not binding.host:
        return "Invalid host: empty (use * for every host)"
    for what, value in (("resource name", binding.resource_name),
                        ("principal", binding.principal), ("host", binding.host)):
        if len(value) > MAX_TEXT_CHARS or any(ord(c) < 0x20 or c == "\x7f" for c in value):
            return f"Invalid {what}: too long or contains control characters"
    return None


def filter_error(acl_filter: AclBindingFilter) -> str | None:
    """Why a filter is malformed (the wire's UNKNOWN codes), or None."""
    if acl_filter.resource_type == ResourceType.UNKNOWN:
        return "Invalid resourceType UNKNOWN in filter"
    if acl_filter.pattern_type == PatternType.UNKNOWN:
        return "Invalid patternType UNKNOWN in filter"
    if acl_filter.operation == AclOperation.UNKNOWN:
        return "Invalid operation UNKNOWN in filter"
    if acl_filter.permission_type == AclPermissionType.UNKNOWN:
        return "Invalid permissionType UNKNOWN in filter"
    return None
