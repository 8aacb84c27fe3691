"""kraft-storage: format a node's log directories, inspect them, make cluster ids.

    kraft-storage random-uuid
    kraft-storage format -t CLUSTER_ID -c CONFIG [--ignore-formatted]
        [--standalone | --initial-controllers ID@HOST:PORT:DIRID,... | --no-initial-controllers]
        [--feature kraft.version=N] [--release-version R]
        [--add-scram 'SCRAM-SHA-512=[name=admin,password=...]' ...]
    kraft-storage info -c CONFIG

A static quorum (controller.quorum.voters) is formatted with no quorum flag. A dynamic one
(KIP-853, server/quorum_bootstrap.py): the first controller with --standalone, or every first
controller with the same --initial-controllers string; controllers added later and brokers
with --no-initial-controllers. --add-scram (KIP-900, server/bootstrap_metadata.py) bootstraps
SCRAM users into bootstrap.checkpoint; give the controllers the same ones.

Modelled on Kafka's `kafka-storage.sh`. Exit codes: 0 success, 1 a problem with the config
or the directories (one line on stderr), 2 bad command-line usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TextIO

from kraft.log.meta_properties import (
    STORAGE_COMMAND,
    MetaProperties,
    StorageError,
    meta_properties_path,
    random_uuid,
    validate_cluster_id,
    write_meta_properties,
)
from metadata.scram import ScramMechanism
from metadata.security_records import UserScramCredentialRecord
from server import format_probe
from server.bootstrap_metadata import parse_add_scram, write_bootstrap_checkpoint
from server.config import ConfigError, NodeConfig, load_config
from server.quorum_bootstrap import (
    InitialController,
    QuorumMode,
    advertised_controller_endpoint,
    bootstrap_snapshot_path,
    check_format_flags,
    check_release_version,
    parse_features,
    parse_initial_controllers,
    parse_release_version,
    read_bootstrap_snapshot,
    standalone_controller,
    write_bootstrap_snapshot,
)
from server.storage import inspect_storage, storage_problems


def format_storage(
    config: NodeConfig,
    cluster_id: str,
    *,
    ignore_formatted: bool = False,
    initial_controllers: tuple[InitialController, ...] = (),
    scram_records: tuple[UserScramCredentialRecord, ...] = (),
    out: TextIO | None = None,
) -> list[str]:
    """Format every directory in `config.storage_dirs` for `cluster_id`; return the ones
    formatted. Nothing is written unless every directory can be formatted (or, with
    `ignore_formatted`, is already formatted for the same cluster and node).

    With `initial_controllers` (--standalone, --initial-controllers) the metadata directory
    also gets the bootstrap snapshot of that voter set, written before its meta.properties
    (the file that marks it formatted), and takes this node's directory id from the list.
    `scram_records` (--add-scram) go into its bootstrap.checkpoint, written before too."""
    out = sys.stdout if out is None else out
    validate_cluster_id(cluster_id)
    own = next((c for c in initial_controllers if c.node_id == config.node_id), None)
    to_format = []
    for status in inspect_storage(config):
        if status.error is not None:
            raise StorageError(status.error)
        meta = status.meta
        if meta is None:
            to_format.append(status)
            continue
        path = meta_properties_path(status.path)
        if not ignore_formatted:
            raise StorageError(
                f"Log directory {status.path} is already formatted. Use --ignore-formatted to "
                "ignore this directory and format the others."
            )
        if meta.cluster_id != cluster_id:
            raise StorageError(
                f"Log directory {status.path} is already formatted for cluster.id "
                f"{meta.cluster_id} ({path}), not {cluster_id}: pass -t {meta.cluster_id}, or "
                "use an empty directory for the new cluster."
            )
        if meta.node_id != config.node_id:
            raise StorageError(
                f"Log directory {status.path} is already formatted for node.id {meta.node_id} "
                f"({path}), but {config.source} has node.id {config.node_id}: fix node.id, or "
                "use an empty directory for this node."
            )
    if not to_format:
        print("All of the log directories are already formatted.", file=out)
        return []
    formatted = []
    for status in to_format:
        kind = "metadata directory" if status.is_metadata_dir else "data directory"
        try:
            os.makedirs(status.path, exist_ok=True)
        except OSError as err:
            message = f"Cannot create log directory {status.path}: {err.strerror}."
            raise StorageError(message) from None
        print(
            f"Formatting {kind} {status.path} with cluster.id {cluster_id} and node.id "
            f"{config.node_id}.",
            file=out,
        )
        directory_id = random_uuid()
        if status.is_metadata_dir and initial_controllers:
            if own is not None:
                directory_id = own.directory_id
            path = write_bootstrap_snapshot(config, initial_controllers)
            print(f"Wrote the bootstrap snapshot {path} with kraft.version 1 and the voters "
                  + ", ".join(str(c) for c in initial_controllers) + ".", file=out)
        if status.is_metadata_dir and scram_records:
            path = write_bootstrap_checkpoint(config, list(scram_records))
            users = ", ".join(f"{r.name} ({ScramMechanism(r.mechanism).mechanism_name})"
                              for r in scram_records)
            print(f"Wrote the bootstrap metadata {path} with SCRAM credentials for {users}.",
                  file=out)
        meta = MetaProperties(cluster_id, config.node_id, directory_id)
        write_meta_properties(status.path, meta)
        formatted.append(status.path)
    return formatted


def print_info(config: NodeConfig, out: TextIO | None = None) -> int:
    """Print each directory, its meta.properties and any problems; 1 if there are problems."""
    out = sys.stdout if out is None else out
    statuses = inspect_storage(config)
    title = "Found log directory:" if len(statuses) == 1 else "Found log directories:"
    print(title, file=out)
    for status in statuses:
        notes = []
        if status.is_metadata_dir:
            notes.append("metadata")
        if not status.exists:
            notes.append("does not exist")
        elif status.meta is None and status.error is None:
            notes.append("not formatted")
        suffix = f" ({', '.join(notes)})" if notes else ""
        print(f"  {status.path}{suffix}", file=out)
    for status in statuses:
        if status.meta is not None:
            print(f"\nFound metadata in {status.path}: {status.meta}", file=out)
    problems = storage_problems(config, statuses)
    try:
        bootstrap = read_bootstrap_snapshot(config)
    except StorageError as err:
        problems.append(str(err))
        bootstrap = None
    if bootstrap is not None and bootstrap.voters is not None:
        voters = ", ".join(f"{n.node_id}@{n.endpoint}:{n.key.directory_id}"
                           for n in bootstrap.voters)
        print(f"\nFound the bootstrap voter set in {bootstrap_snapshot_path(config)}: "
              f"kraft.version {bootstrap.kraft_version}, voters {voters}", file=out)
    if problems:
        print("\nFound problem(s):", file=out)
        for problem in problems:
            print(f"  {problem}", file=out)
        return 1
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=STORAGE_COMMAND,
        description="Format and inspect the log directories of a KRaft node.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("random-uuid", help="print a new random cluster id")
    fmt = commands.add_parser("format", help="format the log directories of a node")
    fmt.add_argument("-t", "--cluster-id", required=True, help="the cluster id (random-uuid)")
    fmt.add_argument("-c", "--config", required=True, help="the node's role config file")
    fmt.add_argument(
        "-g",
        "--ignore-formatted",
        action="store_true",
        help="skip directories already formatted for this cluster and node",
    )
    quorum = fmt.add_mutually_exclusive_group()
    quorum.add_argument(
        "-s", "--standalone", action="store_true",
        help="start a dynamic quorum with this controller as its only voter",
    )
    quorum.add_argument(
        "-I", "--initial-controllers", metavar="ID@HOST:PORT:DIRID,...",
        help="start a dynamic quorum with these voters (the same string on each of them)",
    )
    quorum.add_argument(
        "-N", "--no-initial-controllers", action="store_true",
        help="a controller that joins a dynamic quorum later (add-controller), or a broker",
    )
    fmt.add_argument(
        "-f", "--feature", action="append", default=[], metavar="NAME=LEVEL",
        help="a feature level to start with: kraft.version=0 (static) or 1 (dynamic)",
    )
    fmt.add_argument(
        "-r", "--release-version", help="the metadata.version to start with, e.g. 3.9-IV0",
    )
    fmt.add_argument(
        "-S", "--add-scram", action="append", default=[], metavar="MECHANISM=[name=N,...]",
        help="a SCRAM user to bootstrap (KIP-900), e.g. "
             "'SCRAM-SHA-512=[name=admin,password=secret]'; keys name, password | "
             "saltedpassword + salt (base64), salt, iterations (4096..16384)",
    )
    info = commands.add_parser("info", help="show the log directories of a node")
    info.add_argument("-c", "--config", required=True, help="the node's role config file")
    certs = commands.add_parser(
        "make-test-certs",
        help="make a throwaway CA and PEM keystores for demos and tests (never production)",
    )
    certs.add_argument("--out", required=True, help="directory for ca.pem and NAME.pem files")
    certs.add_argument("--name", action="append", required=True,
                       help="a certificate's common name (repeat); e.g. controller-1, admin")
    certs.add_argument("--host", action="append", default=[],
                       help="an extra host name or IP the certificates are valid for")
    return parser


def _initial_controllers(
    config: NodeConfig, args: argparse.Namespace
) -> tuple[InitialController, ...]:
    """The voters the format flags name (none for a static quorum or -N), after the checks
    of spec R3.1 and T25."""
    if args.standalone:
        mode = QuorumMode.STANDALONE
    elif args.initial_controllers is not None:
        mode = QuorumMode.INITIAL_CONTROLLERS
    elif args.no_initial_controllers:
        mode = QuorumMode.NO_INITIAL_CONTROLLERS
    else:
        mode = QuorumMode.NONE
    release = None
    if args.release_version is not None:
        release = parse_release_version(args.release_version)
    check_format_flags(config, mode, parse_features(args.feature), release)
    if release is not None:
        check_release_version(release)
    if mode is QuorumMode.STANDALONE:
        format_probe.check_standalone(config, args.cluster_id)
        return (standalone_controller(config),)
    if mode is QuorumMode.INITIAL_CONTROLLERS:
        controllers = parse_initial_controllers(args.initial_controllers)
        for warning in format_probe.check_initial_controllers(config, args.cluster_id,
                                                              controllers):
            _warn(warning)
        _warn_about_own_entry(config, controllers)
        return controllers
    return ()


def _warn_about_own_entry(
    config: NodeConfig, controllers: tuple[InitialController, ...]
) -> None:
    """The list is the same on every controller, so it cannot be wrong for this node alone;
    but an entry that names another address than the node advertises is worth a word."""
    own = next((c for c in controllers if c.node_id == config.node_id), None)
    if own is None:
        _warn(f"node {config.node_id} is not one of --initial-controllers: it starts as an "
              "observer; make it a voter later with kraft-admin quorum add-controller.")
        return
    host, port = advertised_controller_endpoint(config)
    if (own.host.lower(), own.port) != (host.lower(), port):
        _warn(f"this node's entry {own} in --initial-controllers names {own.endpoint}, but its "
              f"advertised controller listener is {host}:{port}; the other controllers will "
              f"connect to {own.endpoint}.")


def _warn(message: str) -> None:
    print(f"{STORAGE_COMMAND}: warning: {message}", file=sys.stderr)


def _error(message: str) -> int:
    print(f"{STORAGE_COMMAND}: error: {message}", file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    """Run the tool; returns the exit code (argparse's 2 for usage errors)."""
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:  # --help or a usage error; argparse already printed it
        return exit_.code if isinstance(exit_.code, int) else 2
    if args.command == "random-uuid":
        print(random_uuid())
        return 0
    if args.command == "make-test-certs":
        # Imported here: cryptography's x509 is 0.2-0.4 s that format and info do not need
        # (kraft-server --dev formats in its own process before the nodes start).
        from kraft.security.certs import make_test_certs, principal_of

        try:
            paths = make_test_certs(args.out, args.name, args.host)
        except OSError as err:
            return _error(f"{err.strerror}: {err.filename}")
        print(f"truststore {paths.pop('ca')}")
        for name, path in paths.items():
            print(f"keystore {path} principal {principal_of(name)}")
        return 0
    try:
        config = load_config(args.config)
    except ConfigError as err:
        message = str(err)
        return _error(message if err.source in message else f"{err.source}: {message}")
    for warning in config.warnings:
        _warn(warning)
    try:
        if args.command == "format":
            scram = tuple(parse_add_scram(argument) for argument in args.add_scram)
            format_storage(config, args.cluster_id, ignore_formatted=args.ignore_formatted,
                           initial_controllers=_initial_controllers(config, args),
                           scram_records=scram)
            return 0
        return print_info(config)
    except StorageError as err:
        return _error(str(err))
    except OSError as err:  # e.g. a read-only directory while writing meta.properties
        return _error(f"{err.strerror}: {err.filename}")


if __name__ == "__main__":
    sys.exit(main())
