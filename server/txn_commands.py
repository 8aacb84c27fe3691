"""`kraft-admin transactions`: hanging transactions found and aborted, shaped like
kafka-transactions.sh, over Kafka's wire protocol to any broker's Kafka listener
(server/txn_client.py; the handlers and output are server/txn_tool.py's).

  kraft-admin --bootstrap-server H:9094 [--command-config F] transactions list
      [--duration-filter MS]
  kraft-admin ... transactions describe --transactional-id ID
  kraft-admin ... transactions describe-producers --topic T --partition P [--broker-id B]
  kraft-admin ... transactions abort --topic T --partition P (--start-offset N |
      --producer-id PID --producer-epoch E --coordinator-epoch C)
  kraft-admin ... transactions find-hanging (--broker-id B | --topic T [--partition P])
      [--max-transaction-timeout MINUTES]
  (--json on each: machine-readable output, docs/admin.md#transactions)
"""

from __future__ import annotations

import argparse
from typing import Any

from server.admin_client import CommandError

GROUP = "transactions"


def _common(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS: the top-level options work before the group name too, as for `groups`.
    parser.add_argument("--bootstrap-server", default=argparse.SUPPRESS,
                        help="HOST:PORT[,...] of any broker's Kafka listener")
    parser.add_argument("--command-config", default=argparse.SUPPRESS, metavar="FILE",
                        help="client properties: security.protocol, ssl.*, sasl.* "
                             "(docs/admin.md#groups)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _partition(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--topic", required=True, help="topic name")
    parser.add_argument("--partition", type=int, required=True, help="partition number")


def add_commands(groups: Any) -> None:
    """Register `transactions` on kraft-admin's top-level subparsers."""
    parser = groups.add_parser(GROUP, help="transactions and hanging transactions "
                                           "(kafka-transactions.sh)")
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("list", help="list transactions")
    _common(listing)
    listing.add_argument("--duration-filter", type=int, metavar="MS",
                         help="only transactions running longer than this (ListTransactions "
                              "v1)")
    describe = commands.add_parser("describe",
                                   help="describe the state of an active transactional-id")
    _common(describe)
    describe.add_argument("--transactional-id", required=True, help="transactional id")
    producers = commands.add_parser(
        "describe-producers", help="describe the states of active producers for a topic "
                                   "partition")
    _common(producers)
    producers.add_argument("--broker-id", type=int,
                           help="describe the producer state on a specific replica")
    _partition(producers)
    abort = commands.add_parser("abort", help="abort a hanging transaction (requires "
                                              "administrative privileges)")
    _common(abort)
    _partition(abort)
    abort.add_argument("--start-offset", type=int,
                       help="start offset of the transaction to abort")
    abort.add_argument("--producer-id", type=int, help="producer id (older brokers' form)")
    abort.add_argument("--producer-epoch", type=int, help="producer epoch")
    abort.add_argument("--coordinator-epoch", type=int, help="coordinator epoch")
    hanging = commands.add_parser("find-hanging", help="find hanging transactions")
    _common(hanging)
    hanging.add_argument("--broker-id", type=int,
                         help="broker id to search for hanging transactions")
    hanging.add_argument("--max-transaction-timeout", type=int, default=15, metavar="MINUTES",
                         help="maximum transaction timeout in minutes to limit the scope of "
                              "the search (default 15: transaction.max.timeout.ms's default)")
    hanging.add_argument("--topic", help="topic name to limit search to")
    hanging.add_argument("--partition", type=int, help="partition number")


def run(args: argparse.Namespace) -> str:
    if getattr(args, "bootstrap_controller", None):
        raise CommandError("transactions talks to a broker's Kafka listener: use "
                           "--bootstrap-server")
    # Imported here: the Kafka client and its schemas would slow every kraft-admin command.
    from server import txn_tool

    return txn_tool.run(args)
