"""`kraft-server`'s entry point, and `kraft-server --dev`: a Kafka for tests and laptops.

    kraft-server CONFIG                       a node from its role config file (server/main.py)
    kraft-server --dev [--brokers N] [--port 9092] [--data DIR] [--override KEY=VALUE ...]

`--dev` formats and starts one combined node (controller and broker), or one controller and N
brokers, in a temporary directory (or DIR, kept), with settings fit for tests: topics created
on first use, replication factors and `min.insync.replicas` that fit N, `__consumer_offsets`
sized to N, no initial rebalance delay, followers out of the ISR after 3 s behind. It prints
`bootstrap.servers`, serves Kafka on --port (9092, then 9093, ... for more brokers; 0: free
ports), and Ctrl-C stops it and removes what it created. The nodes run the production code
(`server.main`) with these settings only; docs/testing-with-kraft.md.

The Kafka ports are bound first thing, before the node's modules are imported: a client that
connects during the start-up waits in the listen backlog and is answered once the broker has
registered, instead of being refused and backing off. This module therefore imports nothing
heavy at load; `cluster()` is the embedded API (server/dev_cluster.py).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from server.dev_sockets import DevError, bind_kafka_ports

if TYPE_CHECKING:
    from server.dev_cluster import DevCluster

MAX_BROKERS = 16
DEFAULT_PORT = 9092
HOST = "127.0.0.1"


class _OneLineParser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(2, f"kraft-server --dev: {message}\n")


def _brokers(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--brokers takes a number, not {text!r}") from None
    if not 1 <= count <= MAX_BROKERS:
        raise argparse.ArgumentTypeError(
            f"--brokers must be between 1 and {MAX_BROKERS} (got {count})")
    return count


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--port takes a number, not {text!r}") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"--port must be between 0 and 65535 (got {port})")
    return port


def _override(text: str) -> tuple[str, str]:
    key, equals, value = text.partition("=")
    if not equals or not key.strip():
        raise argparse.ArgumentTypeError(f"--override takes KEY=VALUE, not {text!r}")
    return key.strip(), value.strip()


def dev_parser() -> argparse.ArgumentParser:
    parser = _OneLineParser(prog="kraft-server --dev", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", action="store_true", required=True)
    parser.add_argument("--brokers", type=_brokers, default=1, metavar="N",
                        help="1: one combined node; more: one controller and N brokers")
    parser.add_argument("--port", type=_port, default=DEFAULT_PORT,
                        help="the first broker's Kafka port, the next ones follow (0: free "
                             "ports); default 9092")
    parser.add_argument("--data", metavar="DIR",
                        help="keep the cluster in DIR (started again from it next time) "
                             "instead of a temporary directory removed at exit")
    parser.add_argument("--override", type=_override, action="append", default=[],
                        metavar="KEY=VALUE", help="a node setting (or a cluster-wide broker "
                        "config such as min.insync.replicas) instead of the dev default")
    # For server/dev_cluster.py: JSON commands on stdin, JSON answers on stdout.
    parser.add_argument("--control", action="store_true", help=argparse.SUPPRESS)
    return parser


def broker_ports(first: int, brokers: int) -> list[int]:
    """The Kafka port of each broker: consecutive from `first`, or every one free (0)."""
    return [0] * brokers if first == 0 else list(range(first, first + brokers))


def dev_main(argv: list[str]) -> int:
    args = dev_parser().parse_args(argv)
    try:
        if args.data is not None and Path(args.data).exists() and not Path(args.data).is_dir():
            raise DevError(f"--data {args.data} is not a directory")
        sockets = bind_kafka_ports(broker_ports(args.port, args.brokers))
    except DevError as exc:
        print(f"kraft-server --dev: {exc}", file=sys.stderr)
        return 2
    if not args.control:
        servers = ",".join(f"{HOST}:{s.getsockname()[1]}" for s in sockets)
        print(f"bootstrap.servers={servers}", flush=True)
    # Now the node's modules, once, before the nodes are forked from this process.
    from server.dev_supervisor import run_supervisor

    return run_supervisor(args, sockets)


def main(argv: list[str] | None = None) -> int:
    """`kraft-server`: --dev here, a node from its config file in server/main.py."""
    args = sys.argv[1:] if argv is None else argv
    if "--dev" in args:
        return dev_main(args)
    from server.main import main as node_main

    return node_main(args)


def cluster(brokers: int = 1, *, overrides: Mapping[str, str] | None = None,
            data: str | Path | None = None, port: int = 0,
            start_timeout_s: float = 60.0) -> AbstractContextManager[DevCluster]:
    """`with server.dev.cluster(brokers=3) as c:` a dev cluster for this program, stopped
    (and its data removed, unless `data`) on the way out: the handle the pytest fixture
    `kafka_cluster` gives (server/dev_cluster.py)."""
    from server.dev_cluster import start_cluster

    return start_cluster(brokers, overrides=overrides, data=data, port=port,
                         start_timeout_s=start_timeout_s)


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
