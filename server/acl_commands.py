"""`kraft-admin acls`: Kafka's ACLs through the Admin service, shaped like kafka-acls.sh.

  kraft-admin --bootstrap-server H:P acls --add|--remove|--list
      [--topic T] [--group G] [--cluster] [--transactional-id X] [--user-principal U]
      [--resource-pattern-type literal|prefixed|match|any]
      [--allow-principal User:A] [--deny-principal User:B] [--allow-host H] [--deny-host H]
      [--operation Read ...] [--principal User:A (with --list)] [--force] [--json]
  kraft-admin --bootstrap-server H:P acls --add --from-file FILE

Every option but the action may repeat. `--add` makes one binding per resource, principal,
host and operation (default All; hosts default to `*`); `--remove` deletes the bindings those
options name, or with no principal every binding of the resource filter (after a y/n question
unless `--force`); `--list` prints "Current ACLs for resource ..." blocks as kafka-acls.sh
does. `--json` prints bindings as `{"acls": [{"resourceType": "TOPIC", "resourceName": "t",
"patternType": "LITERAL", "principal": "User:alice", "host": "*", "operation": "READ",
"permissionType": "ALLOW"}]}`, the format `--from-file` reads back; `--from-file` also reads
the old ACL file (`{"acls": [{"principal": "User:CN=ops", "operations": ["Create"]}]}`): each
operation becomes an ALLOW on the cluster resource `kafka-cluster`.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from kraft.errors import error_name
from metadata.acl_ops import binding_from_pb, binding_pb, filter_pb
from metadata.authorizer.model import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.rpc import admin_pb2 as pb
from server.admin_client import AdminClient, CommandError, parse_servers

GROUP = "acls"
Confirm = Callable[[str], bool]
Resource = tuple[ResourceType, str, PatternType]
Entry = tuple[str, str, AclOperation, AclPermissionType]  # principal, host, operation, permission

# The old ACL file's operation names (authorizer.acl.file) as Kafka's operations.
FILE_OPERATIONS = {
    "Create": AclOperation.CREATE, "Delete": AclOperation.DELETE, "Alter": AclOperation.ALTER,
    "AlterConfigs": AclOperation.ALTER_CONFIGS, "Describe": AclOperation.DESCRIBE,
    "DescribeConfigs": AclOperation.DESCRIBE_CONFIGS,
    "ClusterAction": AclOperation.CLUSTER_ACTION, "All": AclOperation.ALL,
}
PATTERNS = {"literal": PatternType.LITERAL, "prefixed": PatternType.PREFIXED,
            "match": PatternType.MATCH, "any": PatternType.ANY}
# The resource options' dests: not "group", which is kraft-admin's command group.
_RESOURCE_OPTIONS = (("topics", ResourceType.TOPIC), ("groups", ResourceType.GROUP),
                     ("transactional_ids", ResourceType.TRANSACTIONAL_ID),
                     ("user_principals", ResourceType.USER))


def add_commands(groups: Any) -> None:
    """Register `acls` on kraft-admin's top-level subparsers."""
    acls = groups.add_parser(GROUP, help="add, remove and list ACLs (kafka-acls.sh)")
    acls.set_defaults(command=GROUP)
    action = acls.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true", help="add ACLs")
    action.add_argument("--remove", action="store_true", help="remove ACLs")
    action.add_argument("--list", action="store_true", help="list ACLs")
    for option, text in (("--topic", "a topic ('*': every topic)"),
                         ("--group", "a consumer group ('*': every group)"),
                         ("--transactional-id", "a transactional id ('*': all)"),
                         ("--user-principal", "a user, for CreateTokens/DescribeTokens")):
        acls.add_argument(option, action="append", default=[], help=text,
                          dest=option.removeprefix("--").replace("-", "_") + "s")
    acls.add_argument("--cluster", action="store_true", help="the cluster resource")
    acls.add_argument("--resource-pattern-type", default="literal", type=str.lower,
                      choices=list(PATTERNS),
                      help="literal or prefixed to add; match or any also filter --list and "
                           "--remove (match: every binding that applies to the name)")
    for option in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host",
                   "--operation"):
        acls.add_argument(option, action="append", default=[])
    acls.add_argument("--principal", action="append", default=[],
                      help="with --list: only this principal's ACLs")
    acls.add_argument("--from-file", metavar="FILE",
                      help="with --add: bindings from a JSON file (see kraft-admin acls -h)")
    acls.add_argument("--force", action="store_true", help="do not ask before removing")
    acls.add_argument("--json", action="store_true")


def run(args: argparse.Namespace, confirm: Confirm | None = None) -> str:
    client = AdminClient(parse_servers(getattr(args, "bootstrap_server", None)),
                         getattr(args, "tls", None))
    if args.add:
        return _add(client, args)
    if args.remove:
        return _remove(client, args, confirm or _ask)
    return _list(client, args)


# ---- names and formats ----

def _member(enum: Any, text: str, what: str) -> Any:
    """An enum member by name, ignoring case and underscores (Read, IdempotentWrite,
    IDEMPOTENT_WRITE)."""
    wanted = text.strip().replace("_", "").lower()
    for member in enum:
        if member.name.replace("_", "").lower() == wanted and member.name not in (
                "UNKNOWN", "ANY", "MATCH"):
            return member
    raise CommandError(f"unknown {what} {text!r}")


def parse_principal(text: str) -> str:
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise CommandError("expected a string in format principalType:principalName but got "
                           f"{text.strip()}")
    return text.strip()


def resource_text(kind: ResourceType, name: str | None, pattern: PatternType,
                  is_filter: bool = False) -> str:
    """Kafka's ResourcePattern / ResourcePatternFilter toString."""
    what = "ResourcePatternFilter" if is_filter else "ResourcePattern"
    return f"{what}(resourceType={kind.name}, name={name}, patternType={pattern.name})"


def entry_text(b: AclBinding) -> str:
    """Kafka's AccessControlEntry toString."""
    return (f"(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
            f"permissionType={b.permission_type.name})")


def _binding_text(b: AclBinding) -> str:
    """Kafka's AclBinding toString."""
    pattern = resource_text(b.resource_type, b.resource_name, b.pattern_type)
    return f"(pattern={pattern}, entry={entry_text(b)})"


def binding_json(b: AclBinding) -> dict[str, str]:
    return {"resourceType": b.resource_type.name, "resourceName": b.resource_name,
            "patternType": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permissionType": b.permission_type.name}


def render(bindings: Iterable[AclBinding]) -> str:
    """kafka-acls.sh's listing: one block per resource pattern."""
    blocks: dict[Resource, list[AclBinding]] = {}
    for b in bindings:
        blocks.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    return "\n".join(
        f"Current ACLs for resource `{resource_text(*resource)}`:\n"
        + "\n".join("\t" + entry_text(b) for b in entries) + "\n"
        for resource, entries in blocks.items())


# ---- options -> bindings and filters ----

def _resources(args: argparse.Namespace, pattern: PatternType) -> list[Resource]:
    resources: list[Resource] = []
    for option, kind in _RESOURCE_OPTIONS:
        resources.extend((kind, name.strip(), pattern) for name in getattr(args, option))
    if args.cluster:
        resources.append((ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return list(dict.fromkeys(resources))


def _entries(args: argparse.Namespace) -> list[Entry]:
    """The entries of every combination the options name."""
    operations = [_member(AclOperation, o, "operation") for o in args.operation] or [
        AclOperation.ALL]
    entries: list[Entry] = []
    for principals, hosts, permission in (
            (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
            (args.deny_principal, args.deny_host, AclPermissionType.DENY)):
        for principal in map(parse_principal, principals):
            for host in [h.strip() for h in hosts] or [WILDCARD_HOST]:
                entries.extend((principal, host, op, permission) for op in operations)
    return list(dict.fromkeys(entries))


def _check_operations(resources: Sequence[Resource], entries: Sequence[Entry]) -> None:
    for kind, _, _ in resources:
        valid = SUPPORTED_OPERATIONS.get(kind, frozenset()) | {AclOperation.ALL}
        if any(op not in valid for _, _, op, _ in entries):
            names = ", ".join(op.name for op in sorted(valid))
            raise CommandError(f"ResourceType {kind.name} only supports operations {names}")


def _no_resource() -> CommandError:
    return CommandError("You must provide at least one resource: --topic <topic> or --cluster "
                        "or --group <group> or --transactional-id <id> or --user-principal "
                        "<user>")


def bindings_from_file(path: str) -> list[AclBinding]:
    """The bindings of a JSON file: Kafka bindings as `--list --json` prints them, or the old
    ACL file's principal + operations entries (ALLOWs on the cluster)."""
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except (OSError, ValueError) as exc:
        raise CommandError(f"cannot read ACL file {path}: {exc}") from exc
    entries = document.get("acls") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise CommandError(f"ACL file {path}: expected {{\"acls\": [...]}}")
    bindings: list[AclBinding] = []
    for index, entry in enumerate(entries):
        try:
            bindings.extend(_file_entry(entry))
        except (CommandError, KeyError, TypeError, AttributeError) as exc:
            detail = str(exc) if isinstance(exc, CommandError) else f"missing or bad {exc}"
            raise CommandError(f"ACL file {path}: entry {index}: {detail}") from None
    return list(dict.fromkeys(bindings))


def _file_entry(entry: Any) -> list[AclBinding]:
    if not isinstance(entry, dict):
        raise CommandError("expected an object")
    principal = parse_principal(entry["principal"])
    if "operations" in entry:  # the old ACL file
        operations = entry["operations"]
        if not isinstance(operations, list) or not operations:
            raise CommandError("lists no operations")
        unknown = [o for o in operations if o not in FILE_OPERATIONS]
        if unknown:
            raise CommandError(f"unknown operation {unknown[0]!r}; use one of "
                               f"{', '.join(FILE_OPERATIONS)}")
        return [AclBinding(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL, principal,
                           WILDCARD_HOST, FILE_OPERATIONS[o], AclPermissionType.ALLOW)
                for o in operations]
    return [AclBinding(
        _member(ResourceType, entry["resourceType"], "resourceType"), str(entry["resourceName"]),
        _member(PatternType, entry.get("patternType", "LITERAL"), "patternType"), principal,
        str(entry.get("host", WILDCARD_HOST)),
        _member(AclOperation, entry["operation"], "operation"),
        _member(AclPermissionType, entry["permissionType"], "permissionType"))]


# ---- the actions ----

def _describe(client: AdminClient, acl_filter: AclBindingFilter) -> list[AclBinding]:
    response = client.call("DescribeAcls", pb.DescribeAclsRequest(filter=filter_pb(acl_filter)))
    return [binding_from_pb(b) for b in response.bindings]


def _failure(code: int, message: str) -> str:
    return f"{error_name(code)}: {message}" if message else error_name(code)


def _add(client: AdminClient, args: argparse.Namespace) -> str:
    if args.principal:
        raise CommandError("The --principal option is only available if --list is set")
    pattern = PATTERNS[args.resource_pattern_type]
    if pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise CommandError(f"A '--resource-pattern-type' value of "
                           f"'{args.resource_pattern_type.upper()}' is not valid when adding "
                           "acls.")
    if args.from_file is not None:
        if _resources(args, pattern) or args.allow_principal or args.deny_principal:
            raise CommandError("--from-file names its own resources and principals")
        wanted = bindings_from_file(args.from_file)
    else:
        resources = _resources(args, pattern)
        if not resources:
            raise _no_resource()
        entries = _entries(args)
        if not entries:
            raise CommandError("You must specify one of: --allow-principal, --deny-principal "
                               "when trying to add ACLs.")
        _check_operations(resources, entries)
        wanted = [AclBinding(kind, name, p, *entry)
                  for kind, name, p in resources for entry in entries]
    existing = set(_describe(client, AclBindingFilter()))
    new = [b for b in wanted if b not in existing]
    if new:
        response = client.call("CreateAcls", pb.CreateAclsRequest(
            creations=[binding_pb(b) for b in new]))
        failures = [f"{_binding_text(b)}: {_failure(r.error_code, r.error_message)}"
                    for b, r in zip(new, response.results, strict=True) if r.error_code]
        if failures:
            raise CommandError("; ".join(failures))
    if args.json:
        return json.dumps({"added": [binding_json(b) for b in new],
                           "existing": [binding_json(b) for b in wanted if b in existing]})
    lines = [f"Acl {_binding_text(b)} already exists." for b in wanted if b in existing]
    by_resource: dict[Resource, list[AclBinding]] = {}
    for b in new:
        by_resource.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    for resource, added in by_resource.items():
        lines.append(f"Adding ACLs for resource `{resource_text(*resource)}`: \n "
                     + "\n".join("\t" + entry_text(b) for b in added) + "\n")
    shown = {(b.resource_type, b.resource_name, b.pattern_type) for b in wanted}
    lines.append(render(b for b in _describe(client, AclBindingFilter())
                        if (b.resource_type, b.resource_name, b.pattern_type) in shown))
    return "\n".join(lines)


def _remove(client: AdminClient, args: argparse.Namespace, confirm: Confirm) -> str:
    if args.from_file is not None or args.principal:
        raise CommandError("--from-file goes with --add, --principal with --list")
    resources = _resources(args, PATTERNS[args.resource_pattern_type])
    if not resources:
        raise _no_resource()
    entries = _entries(args)
    filters: list[AclBindingFilter] = []
    for kind, name, p in resources:
        shown = resource_text(kind, name, p, is_filter=True)
        if not entries:
            question = (f"Are you sure you want to delete all ACLs for resource filter "
                        f"`{shown}`? (y/n)")
            chosen = [AclBindingFilter(kind, name, p)]
        else:
            question = ("Are you sure you want to remove ACLs: \n "
                        + "\n".join("\t" + entry_text(AclBinding(kind, name, p, *e))
                                    for e in entries)
                        + f"\n from resource filter `{shown}`? (y/n)")
            chosen = [AclBindingFilter(kind, name, p, *e) for e in entries]
        if args.force or confirm(question):
            filters.extend(chosen)
    removed: list[AclBinding] = []
    if filters:
        response = client.call("DeleteAcls", pb.DeleteAclsRequest(
            filters=[filter_pb(f) for f in filters]))
        failures = [_failure(r.error_code, r.error_message) for r in response.results
                    if r.error_code]
        if failures:
            raise CommandError("; ".join(failures))
        removed = list(dict.fromkeys(binding_from_pb(b) for r in response.results
                                     for b in r.deleted))
    if args.json:
        return json.dumps({"removed": [binding_json(b) for b in removed]})
    remaining = [b for f in (AclBindingFilter(kind, name, p) for kind, name, p in resources)
                 for b in _describe(client, f)]
    return render(dict.fromkeys(remaining))


def _list(client: AdminClient, args: argparse.Namespace) -> str:
    if args.from_file is not None:
        raise CommandError("--from-file goes with --add")
    if (args.allow_principal or args.deny_principal or args.allow_host or args.deny_host
            or args.operation):
        raise CommandError("--list takes resources and --principal; --allow-*, --deny-* and "
                           "--operation go with --add and --remove")
    resources = _resources(args, PATTERNS[args.resource_pattern_type])
    filters = [AclBindingFilter(kind, name, p) for kind, name, p in resources] or [
        AclBindingFilter()]
    found = list(dict.fromkeys(b for f in filters for b in _describe(client, f)))
    principals = [parse_principal(p) for p in args.principal]
    if args.json:
        if principals:
            found = [b for b in found if b.principal in principals]
        return json.dumps({"acls": [binding_json(b) for b in found]})
    if not principals:
        return render(found)
    return "\n".join(f"ACLs for principal `{p}`\n" + render(b for b in found if b.principal == p)
                     for p in principals)


def _ask(question: str) -> bool:
    print(question, flush=True)
    try:
        return input().strip().lower() == "y"
    except EOFError:
        return False
