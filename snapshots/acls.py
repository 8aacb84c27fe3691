"""`kraft-snapshot acls`: the ACL bindings in force in an image (a snapshot, the log, or the log
as of `--at-offset N`), listed as kafka-acls.sh lists them, and the authorizer's answer to "may
P do OP on R?" or "who may do OP on R?" then.

The answers come from StandardAuthorizer itself, loaded with the image's bindings and the
`super.users` and `allow.everyone.if.no.acl.found` given on the command line, so a past
decision is the product's own. The bindings shown beside an answer are those that decided it,
picked by the same rules (metadata/authorizer/standard.py).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from metadata.authorizer.model import (
    CLUSTER_NAME,
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD_HOST,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    principal_type_and_name,
    wildcard_of,
)
from metadata.authorizer.standard import StandardAuthorizer

Out = Callable[[str], None]

# kafka-acls.sh's resource options; --cluster takes no name.
RESOURCE_OPTIONS: tuple[tuple[str, ResourceType], ...] = (
    ("topic", ResourceType.TOPIC),
    ("group", ResourceType.GROUP),
    ("transactional_id", ResourceType.TRANSACTIONAL_ID),
    ("delegation_token", ResourceType.DELEGATION_TOKEN),
    ("user_principal", ResourceType.USER),
)
# Operations a question may name (ANY and UNKNOWN are filter values, not operations).
_ASKABLE = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


class UsageError(Exception):
    """A combination of options that makes no question (exit 2)."""


def _enum_arg(enum: type[Any], allowed: Iterable[Any]) -> Callable[[str], Any]:
    """Kafka's tools accept `Write`, `IdempotentWrite`, `WRITE` and `idempotent-write` alike."""
    names = {m.name.replace("_", ""): m for m in allowed}

    def parse(text: str) -> Any:
        member = names.get(text.upper().replace("_", "").replace("-", ""))
        if member is None:
            choices = ", ".join(m.name for m in allowed)
            raise argparse.ArgumentTypeError(f"{text!r} is not one of {choices}")
        return member

    parse.__name__ = enum.__name__  # argparse names the type in its messages
    return parse


def add_arguments(sub: argparse.ArgumentParser) -> None:
    resource = sub.add_argument_group("the resource (one; none: every resource)")
    names = resource.add_mutually_exclusive_group()
    names.add_argument("--topic", metavar="NAME")
    names.add_argument("--group", metavar="NAME")
    names.add_argument("--cluster", action="store_true", help="the CLUSTER resource")
    names.add_argument("--transactional-id", metavar="NAME")
    names.add_argument("--delegation-token", metavar="NAME")
    names.add_argument("--user-principal", metavar="NAME", help="a USER resource")
    sub.add_argument(
        "--resource-pattern-type", type=_enum_arg(PatternType, [
            PatternType.ANY, PatternType.MATCH, PatternType.LITERAL, PatternType.PREFIXED]),
        metavar="TYPE", help="listing with a resource: the patterns shown, as kafka-acls.sh: "
        "LITERAL (default) or PREFIXED: that pattern exactly; ANY: every pattern type with "
        "exactly that name; MATCH: every binding that applies to the resource")
    sub.add_argument("--principal", metavar="TYPE:NAME",
                     help="listing: bindings of this principal; --check: the one asking")
    sub.add_argument("--operation", type=_enum_arg(AclOperation, _ASKABLE), metavar="OP",
                     help="listing: bindings of this operation; --check: the one asked")
    sub.add_argument("--host", metavar="ADDRESS",
                     help="listing: bindings for this host; --check: the client's address "
                     "(without it only bindings for host * apply)")
    sub.add_argument("--check", action="store_true",
                     help="ask the authorizer instead of listing: may --principal do "
                     "--operation on the resource? Without --principal: who may?")
    sub.add_argument("--who-can", type=_enum_arg(AclOperation, _ASKABLE), metavar="OP",
                     help="short for --check --operation OP without --principal")
    sub.add_argument("--super-users", metavar="P1;P2", default="",
                     help="the super.users the answer assumes (Kafka's syntax: principals "
                     "separated by semicolons)")
    sub.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                     help="the answer assumes allow.everyone.if.no.acl.found=true")


# ---- how bindings print --------------------------------------------------------------------


def binding_json(acl_id: str, b: AclBinding) -> dict[str, Any]:
    return {"id": acl_id, "resourceType": b.resource_type.name, "resourceName": b.resource_name,
            "patternType": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permissionType": b.permission_type.name}


def binding_text(b: AclBinding) -> str:
    """kafka-metadata-shell's leaf for /image/acls/<id> (Kafka's StandardAcl.toString)."""
    return (f"StandardAcl(resourceType={b.resource_type.name}, resourceName={b.resource_name}, "
            f"patternType={b.pattern_type.name}, principal={b.principal}, host={b.host}, "
            f"operation={b.operation.name}, permissionType={b.permission_type.name})")


def _pattern_text(b: AclBinding) -> str:
    return (f"ResourcePattern(resourceType={b.resource_type.name}, name={b.resource_name}, "
            f"patternType={b.pattern_type.name})")


def _entry_text(b: AclBinding) -> str:
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name})")


# ---- the request on the command line -------------------------------------------------------


@dataclass(frozen=True)
class _Resource:
    resource_type: ResourceType
    name: str

    def text(self) -> str:
        return f"{self.resource_type.name}:{self.name}"


def _resource(args: argparse.Namespace) -> _Resource | None:
    if args.cluster:
        return _Resource(ResourceType.CLUSTER, CLUSTER_NAME)
    for option, resource_type in RESOURCE_OPTIONS:
        name = getattr(args, option)
        if name is not None:
            return _Resource(resource_type, name)
    return None


def _list_filter(args: argparse.Namespace, resource: _Resource | None) -> AclBindingFilter:
    if resource is None:
        if args.resource_pattern_type is not None:
            raise UsageError("--resource-pattern-type needs a resource (--topic, --group, ...)")
        pattern = AclBindingFilter()
    else:
        pattern = AclBindingFilter(resource.resource_type, resource.name,
                                   args.resource_pattern_type or PatternType.LITERAL)
    return AclBindingFilter(
        pattern.resource_type, pattern.resource_name, pattern.pattern_type, args.principal,
        args.host, args.operation or AclOperation.ANY)


# ---- listing -------------------------------------------------------------------------------


def list_bindings(acls: Mapping[str, AclBinding], acl_filter: AclBindingFilter) -> \
        list[tuple[str, AclBinding]]:
    """The matching bindings, by resource pattern then entry (kafka-acls.sh's grouping)."""
    found = [(acl_id, b) for acl_id, b in acls.items() if acl_filter.matches(b)]
    return sorted(found, key=lambda item: (
        item[1].resource_type, item[1].resource_name, item[1].pattern_type, item[1].principal,
        item[1].host, item[1].operation, item[1].permission_type, item[0]))


def print_listing(found: list[tuple[str, AclBinding]], out: Out) -> None:
    """kafka-acls.sh --list: a heading per resource pattern, a tab-indented line per entry."""
    last = None
    for _, b in found:
        pattern = _pattern_text(b)
        if pattern != last:
            if last is not None:
                out("")
            out(f"Current ACLs for resource `{pattern}`:")
            last = pattern
        out(f"\t{_entry_text(b)}")


# ---- questions -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    principal: str
    allowed: bool
    reason: str
    bindings: tuple[tuple[str, AclBinding], ...]  # (id, binding) that decided, if any

    def to_json(self) -> dict[str, Any]:
        return {"principal": self.principal, "allowed": self.allowed, "reason": self.reason,
                "bindings": [binding_json(i, b) for i, b in self.bindings]}


def _granting(operation: AclOperation) -> frozenset[AclOperation]:
    """The operations whose ALLOW grants `operation` (StandardAuthorizer's rule)."""
    implying: frozenset[AclOperation] = frozenset()
    if operation == AclOperation.DESCRIBE:
        implying = IMPLIES_DESCRIBE
    elif operation == AclOperation.DESCRIBE_CONFIGS:
        implying = IMPLIES_DESCRIBE_CONFIGS
    return frozenset({operation, AclOperation.ALL}) | implying


class Oracle:
    """StandardAuthorizer over one image's bindings, with the reasons for its answers."""

    def __init__(self, acls: Mapping[str, AclBinding], super_users: Iterable[str],
                 allow_everyone_if_no_acl_found: bool) -> None:
        self.acls = acls
        self.authorizer = StandardAuthorizer(super_users, allow_everyone_if_no_acl_found)
        self.authorizer.load(acls.values())

    def naming(self, resource: _Resource) -> list[tuple[str, AclBinding]]:
        """Every binding that names the resource (literal, `*` or a prefix), whoever it is
        for: with one, the resource "has ACLs" in Kafka's sense."""
        match = AclBindingFilter(resource.resource_type, resource.name, PatternType.MATCH)
        return sorted((i, b) for i, b in self.acls.items() if match.matches(b))

    def ask(self, principal: str, host: str | None, operation: AclOperation,
            resource: _Resource, naming: list[tuple[str, AclBinding]] | None = None) -> Answer:
        """The authorizer's decision, and the bindings that made it. `naming`: the resource's
        bindings, when the caller has them (a scan of every binding otherwise)."""
        address = WILDCARD_HOST if host is None else host
        allowed = self.authorizer.authorize(principal, address, operation,
                                            resource.resource_type, resource.name,
                                            log_if_denied=False)
        if naming is None:
            naming = self.naming(resource)
        principals = (principal, wildcard_of(principal))
        applying = [(i, b) for i, b in naming
                    if b.principal in principals and b.host in (WILDCARD_HOST, address)]
        if allowed:
            if self.authorizer.is_super_user(principal):
                return Answer(principal, True, f"{principal} is a super user", ())
            granting = _granting(operation)
            by = tuple((i, b) for i, b in applying
                       if b.permission_type == AclPermissionType.ALLOW and b.operation in granting)
            if by:
                return Answer(principal, True, "allowed by", by)
            return Answer(principal, True, f"no ACL names {resource.text()} and "
                          "allow.everyone.if.no.acl.found is true", ())
        by = tuple((i, b) for i, b in applying
                   if b.permission_type == AclPermissionType.DENY
                   and b.operation in (operation, AclOperation.ALL))
        if by:
            return Answer(principal, False, "denied by", by)
        if naming:
            return Answer(principal, False, f"{resource.text()} has {len(naming)} ACL(s), none "
                          f"allows {operation.name} to {principal}" + (
                              "" if host is not None else " from host *"), ())
        return Answer(principal, False, f"no ACL names {resource.text()} and "
                      "allow.everyone.if.no.acl.found is false", ())

    def who_can(self, host: str | None, operation: AclOperation,
                resource: _Resource) -> list[Answer]:
        """An answer for every principal a binding on the resource names, and every super
        user: whom the question could concern. With no binding on the resource, the answer
        for `User:*` says whether everyone may."""
        naming = self.naming(resource)
        named = {b.principal for _, b in naming} | self.authorizer.super_users
        if not naming:
            named.add("User:*")
        return [self.ask(p, host, operation, resource, naming) for p in sorted(named)]


def _answer_lines(answer: Answer, out: Out, indent: str = "  ") -> None:
    for acl_id, b in answer.bindings:
        out(f"{indent}{b.describe()} (id {acl_id})")


def run(args: argparse.Namespace, acls: Mapping[str, AclBinding], heading: dict[str, Any],
        where: str, out: Out, emit_json: Callable[[Any], None]) -> int:
    """The `acls` command on one image's bindings. `heading` (JSON) and `where` (text) say
    which state they are. Exit status: 0, or 1 when --check with --principal is refused."""
    if args.who_can is not None:
        if args.check and args.operation not in (None, args.who_can):
            raise UsageError("--who-can names the operation: drop --operation")
        if args.principal is not None:
            raise UsageError("--who-can asks for every principal: use --check --principal P "
                             "--operation OP for one")
        args.check, args.operation = True, args.who_can
    resource = _resource(args)
    if not args.check:
        found = list_bindings(acls, _list_filter(args, resource))
        if args.json:
            emit_json({**heading, "acls": [binding_json(i, b) for i, b in found]})
        else:
            print_listing(found, out)
        return 0
    if resource is None or args.operation is None:
        raise UsageError("--check needs --operation and one resource (--topic, --group, "
                         "--cluster, --transactional-id, --delegation-token, --user-principal)")
    if args.resource_pattern_type is not None:
        raise UsageError("--check asks about one resource by its name: drop "
                         "--resource-pattern-type")
    if args.principal is not None and principal_type_and_name(args.principal) is None:
        raise UsageError(f"--principal {args.principal!r} is not TYPE:NAME (User:alice)")
    super_users = [p.strip() for p in args.super_users.split(";") if p.strip()]
    oracle = Oracle(acls, super_users, args.allow_everyone_if_no_acl_found)
    question = {"operation": args.operation.name,
                "resource": {"resourceType": resource.resource_type.name,
                             "name": resource.name},
                "host": args.host}
    from_host = "" if args.host is None else f" from host {args.host}"
    if args.principal is not None:
        answer = oracle.ask(args.principal, args.host, args.operation, resource)
        if args.json:
            emit_json({**heading, **question, **answer.to_json()})
        else:
            verdict = "ALLOWED" if answer.allowed else "DENIED"
            out(f"{verdict}: {answer.principal} {args.operation.name} on {resource.text()}"
                f"{from_host} ({where}): {answer.reason}")
            _answer_lines(answer, out)
        return 0 if answer.allowed else 1
    answers = oracle.who_can(args.host, args.operation, resource)
    if args.json:
        emit_json({**heading, **question, "principals": [a.to_json() for a in answers]})
        return 0
    out(f"Who may {args.operation.name} on {resource.text()}{from_host} ({where}):")
    for answer in answers:
        verdict = "ALLOWED" if answer.allowed else "DENIED "
        out(f"{verdict} {answer.principal}: {answer.reason}")
        _answer_lines(answer, out, "    ")
    return 0
