"""`kraft-admin users`: SCRAM credentials (KIP-554) through the Admin service, with
kafka-configs.sh's options, value syntax and output for `--entity-type users`.

  kraft-admin --bootstrap-server H:P users --describe [--entity-name U ...] [--json]
  kraft-admin --bootstrap-server H:P users --alter --entity-name U
      [--add-config 'SCRAM-SHA-512=[iterations=8192,password=P],SCRAM-SHA-256=[password=P]']
      [--delete-config SCRAM-SHA-512,SCRAM-SHA-256] [--json]

A group of its own rather than `configs --entity-type users`: SCRAM credentials are not
config resources (no IncrementalAlterConfigs behind them), and kafka-configs.sh mixes them with
quotas under `users` for ZooKeeper's sake; quotas are `kraft-admin quotas`. As
kafka-configs.sh does, the tool salts and hashes the password (a random salt, iterations
default 4096) and sends the salted password; the controller derives and stores the keys. Each
mechanism of a user is its own request, since KRaft refuses a user named twice in one request.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from metadata.rpc import admin_pb2 as pb
from metadata.scram import MAX_ITERATIONS, ScramMechanism, salted_password
from server.admin_client import AdminClient, CommandError, failure_text, parse_servers
from server.bootstrap_metadata import DEFAULT_ITERATIONS, random_salt

GROUP = "users"
SCRAM_KEYS = frozenset({"iterations", "password"})


def add_commands(groups: Any) -> None:
    """Register `users` on kraft-admin's top-level subparsers."""
    users = groups.add_parser(GROUP, help="SCRAM credentials of users (kafka-configs.sh "
                                          "--entity-type users)")
    users.set_defaults(command=GROUP)
    action = users.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="users' mechanisms and "
                                                                "iterations (never keys)")
    action.add_argument("--alter", action="store_true", help="add or delete credentials")
    users.add_argument("--entity-name", action="append", default=[], metavar="USER",
                       help="a user (repeat with --describe; none: every user)")
    users.add_argument("--add-config", metavar="MECHANISM=[iterations=N,password=P],...",
                       help="set credentials, e.g. 'SCRAM-SHA-512=[password=secret]'")
    users.add_argument("--delete-config", metavar="MECHANISM,...",
                       help="delete credentials, e.g. SCRAM-SHA-512")
    users.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> str:
    client = AdminClient(parse_servers(getattr(args, "bootstrap_server", None)),
                         getattr(args, "tls", None))
    if args.describe:
        return _describe(client, args)
    return _alter(client, args)


def _mechanism(name: str) -> ScramMechanism:
    mechanism = ScramMechanism.from_name(name.strip())
    if mechanism is ScramMechanism.UNKNOWN:
        raise CommandError(f"Invalid SCRAM mechanism {name.strip()!r}: expected SCRAM-SHA-256 "
                           "or SCRAM-SHA-512 (quotas: kraft-admin quotas)")
    return mechanism


def parse_scram_configs(text: str) -> list[tuple[ScramMechanism, int, str]]:
    """`--add-config` as kafka-configs.sh reads it for SCRAM: MECHANISM=[k=v,...] entries
    separated by commas outside brackets. (mechanism, iterations, password) per entry."""
    entries: list[tuple[ScramMechanism, int, str]] = []
    depth, start = 0, 0
    parts = []
    for index, char in enumerate(text + ","):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    for part in (p.strip() for p in parts if p.strip()):
        name, equals, value = part.partition("=")
        if not equals or not value.startswith("[") or not value.endswith("]"):
            raise CommandError(f"Invalid --add-config entry {part!r}: expected "
                               "MECHANISM=[iterations=N,password=P]")
        mechanism = _mechanism(name)
        fields: dict[str, str] = {}
        for item in value[1:-1].split(","):
            key, eq, field = item.partition("=")
            if not eq or key.strip() not in SCRAM_KEYS:
                raise CommandError(f"Invalid {mechanism.mechanism_name} setting {item!r}: "
                                   "expected iterations=N or password=P")
            fields[key.strip()] = field
        if not fields.get("password"):
            raise CommandError(f"{mechanism.mechanism_name} needs password=P")
        try:
            iterations = int(fields.get("iterations", DEFAULT_ITERATIONS))
        except ValueError:
            raise CommandError(f"Invalid iterations {fields['iterations']!r} for "
                               f"{mechanism.mechanism_name}: expected a whole number") from None
        if not 0 < iterations < 2**31:
            raise CommandError(f"Invalid iterations {iterations} for "
                               f"{mechanism.mechanism_name}: expected a positive int32")
        entries.append((mechanism, iterations, fields["password"]))
    return entries


def _alter(client: AdminClient, args: argparse.Namespace) -> str:
    if len(args.entity_name) != 1:
        raise CommandError("--alter needs exactly one --entity-name")
    if args.add_config is None and args.delete_config is None:
        raise CommandError("give --add-config and/or --delete-config")
    user = args.entity_name[0]
    requests = []
    for name in (args.delete_config or "").split(","):
        if name.strip():
            requests.append(pb.AlterUserScramCredentialsRequest(deletions=[
                pb.ScramCredentialDeletion(name=user, mechanism=_mechanism(name))]))
    for mechanism, iterations, password in parse_scram_configs(args.add_config or ""):
        salt = random_salt()
        requests.append(pb.AlterUserScramCredentialsRequest(upsertions=[
            pb.ScramCredentialUpsertion(
                name=user, mechanism=mechanism, iterations=iterations, salt=salt,
                # Beyond the bound the controller refuses it: no need to hash that long.
                salted_password=salted_password(mechanism, password.encode(), salt,
                                                min(iterations, MAX_ITERATIONS)))]))
    for request in requests:
        for result in client.call("AlterUserScramCredentials", request).results:
            if result.error_code:
                raise CommandError(failure_text(result.error_code, result.error_message))
    if args.json:
        return json.dumps({"entityType": "users", "entityName": user, "error": None})
    return f"Completed updating config for user {user}."


def _describe(client: AdminClient, args: argparse.Namespace) -> str:
    response = client.call("DescribeUserScramCredentials",
                           pb.DescribeUserScramCredentialsRequest(users=args.entity_name))
    if args.json:
        return json.dumps([{
            "user": r.user,
            "credentials": [{"mechanism": ScramMechanism.of_code(c.mechanism).mechanism_name,
                             "iterations": c.iterations} for c in r.credential_infos],
            "error": failure_text(r.error_code, r.error_message) if r.error_code else None,
        } for r in response.results])
    lines = []
    for r in response.results:
        if r.error_code:
            lines.append(f"Error retrieving SCRAM credential configs for user-principal "
                         f"'{r.user}': {failure_text(r.error_code, r.error_message)}")
            continue
        infos = ", ".join(f"{ScramMechanism.of_code(c.mechanism).mechanism_name}="
                          f"iterations={c.iterations}" for c in r.credential_infos)
        lines.append(f"SCRAM credential configs for user-principal '{r.user}' are {infos}")
    return "\n".join(lines)
