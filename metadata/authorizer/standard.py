"""StandardAuthorizer: Kafka's KRaft authorizer (KIP-801), fed from the metadata image.

Every node replays the ACL records into its image; `AclPublisher` hands each new set of
bindings to `load`, which builds an immutable index and swaps it in, so a decision never sees
half an update. The decision is Kafka's (StandardAuthorizerData.authorize):

1. a principal in `super.users` may do everything, even before the first load;
2. before the first load everyone else is refused (Kafka's AuthorizerNotReadyException);
3. the candidate bindings are those of the resource's type naming it LITERALly, naming `*`,
   or naming a PREFIX of it; each one found marks the resource as having ACLs, whoever it is
   for;
4. of the candidates that apply to the principal (or `User:*`) and the host (or `*`): a DENY
   of the operation (or ALL) refuses; an ALLOW of it (or ALL, or of an operation that implies
   it: READ/WRITE/DELETE/ALTER imply DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS) allows;
5. with no applying binding: refused when the resource has any ACL, else
   `allow.everyone.if.no.acl.found` decides.

Lookups cost a dict probe per distinct prefix length, not a scan: literal and prefixed
bindings are kept in dicts keyed by (resource type, name), and the lengths of the prefixes in
use are kept per type, so a name is cut only at lengths some binding has.

Refusals are logged once per principal, host, operation and resource per minute (bounded), on
the `kraft.authorizer` logger, as Kafka's authorizer logger does.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from metadata.authorizer.model import (
    CLUSTER_NAME,
    IMPLIES_DESCRIBE,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    wildcard_of,
)

log = logging.getLogger("kraft.authorizer")

DENIAL_LOG_INTERVAL_S = 60.0
DENIAL_LOG_KEYS = 10_000  # remembered refusals; the oldest is forgotten first

# (principal, host, operation, permission) of one binding, as the index stores it
_Entry = tuple[str, str, AclOperation, AclPermissionType]
_ALL = AclOperation.ALL
_DENY = AclPermissionType.DENY


def _granting(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW grants `operation`: itself, ALL, and those implying it."""
    implying: frozenset[AclOperation] = frozenset()
    if operation == AclOperation.DESCRIBE:
        implying = IMPLIES_DESCRIBE
    elif operation == AclOperation.DESCRIBE_CONFIGS:
        implying = frozenset({AclOperation.ALTER_CONFIGS})
    return frozenset({operation, _ALL}) | implying


_GRANTING = {operation: _granting(operation) for operation in AclOperation}


def parse_super_users(raw: str | None) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by semicolons."""
    return frozenset(p.strip() for p in (raw or "").split(";") if p.strip())


def java_host(address: str) -> str:
    """A client address as Java's InetAddress.getHostAddress prints it, the form ACL hosts
    use: IPv6 uncompressed without leading zeros (`0:0:0:0:0:0:0:1`), IPv4 as is."""
    try:
        parsed = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return address
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return ":".join(f"{int(group, 16):x}" for group in parsed.exploded.split(":"))
    return str(parsed)


@dataclass(frozen=True, slots=True)
class _AclIndex:
    literal: Mapping[tuple[ResourceType, str], tuple[_Entry, ...]]
    prefixed: Mapping[tuple[ResourceType, str], tuple[_Entry, ...]]
    prefix_lengths: Mapping[ResourceType, tuple[int, ...]]
    bindings: tuple[AclBinding, ...]

    @classmethod
    def of(cls, bindings: Iterable[AclBinding]) -> _AclIndex:
        literal: dict[tuple[ResourceType, str], list[_Entry]] = {}
        prefixed: dict[tuple[ResourceType, str], list[_Entry]] = {}
        lengths: dict[ResourceType, set[int]] = {}
        kept = []
        for b in bindings:
            kept.append(b)
            entry = (b.principal, b.host, b.operation, b.permission_type)
            key = (b.resource_type, b.resource_name)
            if b.pattern_type == PatternType.PREFIXED:
                prefixed.setdefault(key, []).append(entry)
                lengths.setdefault(b.resource_type, set()).add(len(b.resource_name))
            else:
                literal.setdefault(key, []).append(entry)
        return cls(
            {k: tuple(v) for k, v in literal.items()},
            {k: tuple(v) for k, v in prefixed.items()},
            {t: tuple(sorted(ls)) for t, ls in lengths.items()},
            tuple(kept),
        )

    def candidates(self, resource_type: ResourceType, name: str) -> list[tuple[_Entry, ...]]:
        """The bindings that name this resource: literal, literal `*`, and every prefix."""
        found = []
        literal = self.literal
        entries = literal.get((resource_type, name))
        if entries:
            found.append(entries)
        if name != WILDCARD_RESOURCE:
            entries = literal.get((resource_type, WILDCARD_RESOURCE))
            if entries:
                found.append(entries)
        prefixed = self.prefixed
        for length in self.prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            entries = prefixed.get((resource_type, name[:length]))
            if entries:
                found.append(entries)
        return found


class _DenialLog:
    """At most one line per (principal, host, operation, resource) per interval."""

    def __init__(self, interval_s: float = DENIAL_LOG_INTERVAL_S,
                 capacity: int = DENIAL_LOG_KEYS) -> None:
        self._interval_s = interval_s
        self._capacity = capacity
        self._last: OrderedDict[tuple[str, str, int, int, str], float] = OrderedDict()

    def note(self, principal: str, host: str, operation: AclOperation,
             resource_type: ResourceType, name: str, why: str) -> None:
        key = (principal, host, operation, resource_type, name)
        now = time.monotonic()
        last = self._last.get(key)
        if last is not None and now - last < self._interval_s:
            return
        self._last[key] = now
        self._last.move_to_end(key)
        while len(self._last) > self._capacity:
            self._last.popitem(last=False)
        log.info("Principal = %s is Denied operation = %s from host = %s on resource = "
                 "%s:%s (%s)", principal, operation.name, host, resource_type.name, name, why)


class StandardAuthorizer:
    """Decides for every Kafka API and gRPC RPC. `load` is called by the metadata publisher
    with the image's bindings; everything else only reads."""

    def __init__(self, super_users: Iterable[str] = (),
                 allow_everyone_if_no_acl_found: bool = False) -> None:
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found
        self._index: _AclIndex | None = None
        self._denials = _DenialLog()

    # ---- data ----

    def load(self, bindings: Iterable[AclBinding]) -> None:
        """Replace the bindings in force (atomically for readers)."""
        self._index = _AclIndex.of(bindings)

    @property
    def loaded(self) -> bool:
        return self._index is not None

    def bindings(self) -> tuple[AclBinding, ...]:
        index = self._index
        return () if index is None else index.bindings

    def is_super_user(self, principal: str) -> bool:
        return principal in self.super_users

    # ---- decisions ----

    def authorize(self, principal: str, host: str, operation: AclOperation,
                  resource_type: ResourceType, name: str, *,
                  log_if_denied: bool = True) -> bool:
        """May `principal` from `host` do `operation` on the resource (type, literal name)?
        A refusal is logged unless `log_if_denied` is False (lists filtered silently)."""
        if principal in self.super_users:
            return True
        index = self._index
        if index is None:
            if log_if_denied:
                self._denials.note(principal, host, operation, resource_type, name,
                                   "the authorizer has not loaded the ACLs yet")
            return False
        verdict = self._decide(index, principal, host, operation, resource_type, name)
        if verdict is None:
            return True
        if log_if_denied:
            self._denials.note(principal, host, operation, resource_type, name, verdict)
        return False

    def authorize_cluster(self, principal: str, address: str, operation: str) -> bool:
        """`operation` (an AclOperation's name) on the CLUSTER resource, for the gRPC
        interceptor (kraft/security/authorizer.py, which cannot import this module):
        `address` is the peer's IP as gRPC gives it, put in Java's form here."""
        return self.authorize(principal, java_host(address), AclOperation[operation],
                              ResourceType.CLUSTER, CLUSTER_NAME)

    def _decide(self, index: _AclIndex, principal: str, host: str, operation: AclOperation,
                resource_type: ResourceType, name: str) -> str | None:
        """None when allowed, else why not."""
        candidates = index.candidates(resource_type, name)
        if not candidates:
            if self.allow_everyone_if_no_acl_found:
                return None
            return "no ACL allows it"
        principals = (principal, wildcard_of(principal))
        hosts = (WILDCARD_HOST, host)
        denying = (operation, _ALL)  # a DENY implies nothing
        granting = _GRANTING[operation]
        allowed = False
        for entries in candidates:
            for acl_principal, acl_host, acl_operation, permission in entries:
                if acl_principal not in principals or acl_host not in hosts:
                    continue
                if permission == _DENY:
                    if acl_operation in denying:
                        return f"an ACL denies {acl_operation.name} to {acl_principal}"
                elif acl_operation in granting:
                    allowed = True
        return None if allowed else "no ACL allows it"

    def authorize_any(self, principal: str, host: str, operation: AclOperation,
                      resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType: may `principal` do `operation` on some resource of
        the type (InitProducerId's WRITE on any topic, KIP-679)? Allowed by an applying ALLOW
        that no same-literal or covering-prefix DENY cancels; a LITERAL `*` DENY refuses."""
        if principal in self.super_users:
            return True
        if self.authorize(principal, host, operation, resource_type, "hardcode",
                          log_if_denied=False):
            return True
        index = self._index
        if index is None:
            return False
        wildcard = wildcard_of(principal)
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        for b in index.bindings:
            if b.resource_type != resource_type:
                continue
            if b.host not in (WILDCARD_HOST, host):
                continue
            if b.principal not in (principal, wildcard):
                continue
            if b.operation not in (operation, _ALL):
                continue
            if b.permission_type == _DENY:
                if b.pattern_type == PatternType.LITERAL:
                    if b.resource_name == WILDCARD_RESOURCE:
                        return False
                    deny_literal.add(b.resource_name)
                else:
                    deny_prefixed.add(b.resource_name)
            elif b.pattern_type == PatternType.LITERAL and b.resource_name == WILDCARD_RESOURCE:
                return True
            else:
                allow.append((b.pattern_type, b.resource_name))
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if any(name[:end] in deny_prefixed for end in range(1, len(name) + 1)):
                continue
            return True
        return False

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType,
                              name: str) -> int:
        """Kafka's authorized-operations bitfield: bit `1 << code` per allowed operation."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
            if self.authorize(principal, host, operation, resource_type, name,
                              log_if_denied=False):
                bits |= 1 << operation
        return bits
