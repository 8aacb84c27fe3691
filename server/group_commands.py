"""`kraft-admin groups`: consumer groups shaped like kafka-consumer-groups.sh, over Kafka's wire
protocol to any broker's Kafka listener (server/group_client.py).

  kraft-admin --bootstrap-server H:9094 [--command-config F] groups list [--state [S,..]] [--type]
  kraft-admin ... groups describe (--group G ... | --all-groups) [--members [--verbose] |
      --offsets | --state [--verbose]]
  kraft-admin ... groups reset-offsets --group G (--topic T[:P,...] ... | --all-topics)
      (--to-earliest | --to-latest | --to-offset N | --to-datetime ISO | --shift-by N |
       --by-duration PnDTnHnMnS) [--dry-run | --execute]
  kraft-admin ... groups delete --group G ...
  kraft-admin ... groups delete-offsets --group G --topic T[:P,...] ...
  (--json on each: machine-readable output, docs/admin.md)

Columns, messages and rules are the Kafka tool's: LAG is the log end offset (the high
watermark) minus the committed offset; offsets are reset only in a group without members
(Empty, or one that does not exist yet), clamped to the log's start and end; without
--execute a reset is a dry run. Diagnostics Kafka prints on stderr go to stderr.
"""

from __future__ import annotations

import argparse
from typing import Any

from server.admin_client import CommandError

GROUP = "groups"


def _common(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: the top-level options work before the group name too, as for the other groups.
    parser.add_argument("--bootstrap-server", default=argparse.SUPPRESS,
                        help="HOST:PORT[,...] of any broker's Kafka listener")
    parser.add_argument("--command-config", default=argparse.SUPPRESS, metavar="FILE",
                        help="client properties: security.protocol=SSL|SASL_PLAINTEXT|"
                             "SASL_SSL, ssl.*, sasl.mechanism, sasl.username/sasl.password or "
                             "sasl.jaas.config (docs/admin.md#groups)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def add_commands(groups: Any) -> None:
    """Register `groups` on kraft-admin's top-level subparsers."""
    parser = groups.add_parser(GROUP, help="consumer groups (kafka-consumer-groups.sh)")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="every group of the cluster")
    _common(listing)
    listing.add_argument("--state", nargs="?", const="", metavar="S,...",
                         help="show the state column; with states, only groups in them")
    listing.add_argument("--type", action="store_true", help="show type and protocol type")
    describe = commands.add_parser("describe", help="members, offsets and lag")
    _common(describe)
    which = describe.add_mutually_exclusive_group(required=True)
    which.add_argument("--group", action="append", dest="group_ids", metavar="G")
    which.add_argument("--all-groups", action="store_true")
    view = describe.add_mutually_exclusive_group()
    view.add_argument("--members", action="store_true")
    view.add_argument("--offsets", action="store_true", help="the default")
    view.add_argument("--state", action="store_true")
    describe.add_argument("--verbose", action="store_true",
                          help="with --members: assignments (a consumer-protocol group's: "
                               "current and target, with epochs); with --state: a "
                               "consumer-protocol group's epochs")
    reset = commands.add_parser("reset-offsets", help="move an inactive group's offsets")
    _common(reset)
    reset.add_argument("--group", required=True, dest="group_id")
    scope = reset.add_mutually_exclusive_group(required=True)
    scope.add_argument("--topic", action="append", metavar="T[:P,...]")
    scope.add_argument("--all-topics", action="store_true",
                       help="every partition the group has an offset for")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true")
    target.add_argument("--to-latest", action="store_true")
    target.add_argument("--to-offset", type=int, metavar="N")
    target.add_argument("--to-datetime", metavar="YYYY-MM-DDTHH:mm:SS.sss[+HH:MM]")
    target.add_argument("--shift-by", type=int, metavar="N")
    target.add_argument("--by-duration", metavar="PnDTnHnMnS")
    mode = reset.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true")
    mode.add_argument("--execute", action="store_true")
    delete = commands.add_parser("delete", help="delete groups without members")
    _common(delete)
    delete.add_argument("--group", action="append", required=True, dest="group_ids",
                        metavar="G")
    delete_offsets = commands.add_parser("delete-offsets", help="delete a group's offsets")
    _common(delete_offsets)
    delete_offsets.add_argument("--group", required=True, dest="group_id")
    delete_offsets.add_argument("--topic", action="append", required=True, metavar="T[:P,...]")


def run(args: argparse.Namespace) -> str:
    if getattr(args, "bootstrap_controller", None):
        raise CommandError("groups talks to a broker's Kafka listener: use --bootstrap-server")
    # Imported here: the Kafka client and its schemas would slow every kraft-admin command.
    from server import group_tool

    return group_tool.run(args)
