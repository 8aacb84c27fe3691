"""`kraft-admin`: operate a running quorum.

  kraft-admin (--bootstrap-server | --bootstrap-controller) HOST:PORT [--command-config F]
      quorum describe --status | --replication [--human-readable]
      quorum add-controller --command-config NEW_CONTROLLER.properties [--dry-run]
      (or --command-config NEW_CONTROLLER.properties before `quorum`, as kafka-metadata-quorum)
      quorum remove-controller --controller-id N --controller-directory-id UUID [--dry-run]
  kraft-admin quorum status --node HOST:PORT
  kraft-admin --bootstrap-server HOST:PORT topics|partitions|brokers|leaders|reassign|configs|
      cluster|features ...   (the Admin service: see server/admin_commands.py)
  kraft-admin --bootstrap-server HOST:PORT acls --add|--remove|--list ...
      (Kafka's ACLs, shaped like kafka-acls.sh: see server/acl_commands.py)
  kraft-admin --bootstrap-server BROKER:KAFKA_PORT groups list|describe|reset-offsets|delete|
      delete-offsets ...   (consumer groups over Kafka's protocol, shaped like
      kafka-consumer-groups.sh: see server/group_commands.py)
  kraft-admin --bootstrap-server BROKER:KAFKA_PORT transactions list|describe|
      describe-producers|abort|find-hanging ...   (hanging transactions over Kafka's
      protocol, shaped like kafka-transactions.sh: see server/txn_commands.py)
  kraft-admin --bootstrap-server HOST:PORT users|quotas --describe|--alter ...
      (SCRAM credentials and client quotas with kafka-configs.sh's options:
      server/user_commands.py, server/quota_commands.py)
  (add --json to describe, status and the Admin commands for machine-readable output)

The quorum commands may be sent to any controller (or a broker's gRPC listener): a non-leader
answers with the leader's address and the tool follows it. Text output follows
`kafka-metadata-quorum`; add-controller and remove-controller are KIP-853's
(server/quorum_membership.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from server.quorum_client import CHANGE_TIMEOUT_S, QuorumError, describe_quorum, node_status

if TYPE_CHECKING:
    from kraft.rpc import raft_pb2 as pb

ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # how Kafka prints a static voter's (absent) directory id


class AdminError(Exception):
    """A one-line failure for the user; `facts`, when given, also go to stdout with --json."""

    def __init__(self, message: str, facts: dict[str, object] | None = None) -> None:
        super().__init__(message)
        self.facts = facts


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise AdminError(f"invalid address {text!r}: expected HOST:PORT")
    return Endpoint(host.strip("[]") if host.startswith("[") else host, int(port))


# -- rendering -----------------------------------------------------------------------------------


def _leader_state(d: pb.DescribeQuorumResponse) -> pb.ReplicaState | None:
    return next((v for v in d.current_voters if v.replica_id == d.leader_id), None)


def _endpoints(d: pb.DescribeQuorumResponse, voter: pb.ReplicaState) -> list[str]:
    """A voter's listener as `NAME://host:port`: from its ReplicaState (KIP-853), else from
    the static map older leaders send."""
    listener = d.listener_name or "CONTROLLER"
    endpoint = voter.endpoint or d.voter_endpoints.get(voter.replica_id, "")
    return [f"{listener}://{endpoint}"] if endpoint else []


def status_facts(d: pb.DescribeQuorumResponse) -> dict[str, object]:
    leader = _leader_state(d)
    leader_end = d.leader_log_end_offset
    voters = list(d.current_voters)
    laggiest = min(voters, key=lambda v: v.log_end_offset) if voters else None
    max_lag = leader_end - laggiest.log_end_offset if laggiest is not None else 0
    if laggiest is None or leader is None or laggiest.replica_id == d.leader_id:
        lag_ms = 0
    elif laggiest.last_caught_up_timestamp < 0 or leader.last_caught_up_timestamp < 0:
        lag_ms = -1
    else:
        # The leader's own time moves only with its flushes: a follower may be fresher.
        lag_ms = max(0, leader.last_caught_up_timestamp - laggiest.last_caught_up_timestamp)
    return {
        "clusterId": d.cluster_id,
        "leaderId": d.leader_id,
        "leaderEpoch": d.leader_epoch,
        "highWatermark": d.high_watermark,
        "maxFollowerLag": max_lag,
        "maxFollowerLagTimeMs": lag_ms,
        "currentVoters": [
            {"id": v.replica_id, "directoryId": v.directory_id or None,
             "endpoints": _endpoints(d, v)}
            for v in voters
        ],
        "currentObservers": [
            {"id": o.replica_id, "directoryId": o.directory_id or None} for o in d.observers
        ],
    }


def render_status(facts: dict[str, object]) -> str:
    def node(n: dict[str, object]) -> str:
        directory = n["directoryId"]
        text = f'{{"id": {n["id"]}, "directoryId": {json.dumps(directory)}'
        if n.get("endpoints"):
            text += ', "endpoints": [' + ", ".join(f'"{e}"' for e in n["endpoints"]) + "]"  # type: ignore[attr-defined]
        return text + "}"

    rows = [
        ("ClusterId:", facts["clusterId"]),
        ("LeaderId:", facts["leaderId"]),
        ("LeaderEpoch:", facts["leaderEpoch"]),
        ("HighWatermark:", facts["highWatermark"]),
        ("MaxFollowerLag:", facts["maxFollowerLag"]),
        ("MaxFollowerLagTimeMs:", facts["maxFollowerLagTimeMs"]),
        ("CurrentVoters:", "[" + ", ".join(node(n) for n in facts["currentVoters"]) + "]"),  # type: ignore[attr-defined]
        ("CurrentObservers:", "[" + ", ".join(node(n) for n in facts["currentObservers"]) + "]"),  # type: ignore[attr-defined]
    ]
    return "\n".join(f"{label:<24}{value}" for label, value in rows)


def replication_rows(d: pb.DescribeQuorumResponse) -> list[dict[str, object]]:
    leader_end = d.leader_log_end_offset
    ordered = sorted(d.current_voters, key=lambda v: (v.replica_id != d.leader_id, v.replica_id))
    rows: list[dict[str, object]] = []
    for replica, kind in [(v, "voter") for v in ordered] + [(o, "observer") for o in d.observers]:
        if kind == "observer":
            status = "Observer"
        else:
            status = "Leader" if replica.replica_id == d.leader_id else "Follower"
        rows.append({
            "nodeId": replica.replica_id,
            "directoryId": replica.directory_id or None,
            "logEndOffset": replica.log_end_offset,
            "lag": leader_end - replica.log_end_offset if replica.log_end_offset >= 0 else -1,
            "lastFetchTimestamp": replica.last_fetch_timestamp,
            "lastCaughtUpTimestamp": replica.last_caught_up_timestamp,
            "status": status,
        })
    return rows


def _relative(timestamp: int, now_ms: int) -> str:
    if timestamp < 0:
        return "-1"
    delta = now_ms - timestamp
    if delta < 0:
        raise AdminError("Error while computing relative time, possible drift in system clock.")
    return f"{delta} ms ago"


def render_replication(rows: list[dict[str, object]], human: bool, now_ms: int) -> str:
    header = ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
              "LastCaughtUpTimestamp", "Status"]
    table = [header]
    for r in rows:
        fetch, caught = r["lastFetchTimestamp"], r["lastCaughtUpTimestamp"]
        if human:
            fetch, caught = _relative(int(fetch), now_ms), _relative(int(caught), now_ms)  # type: ignore[call-overload]
        table.append([str(r["nodeId"]), str(r["directoryId"] or ZERO_UUID),
                      str(r["logEndOffset"]), str(r["lag"]), str(fetch), str(caught),
                      str(r["status"])])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    # Kafka's prettyPrintTable: every cell padded to its column and followed by a tab.
    return "\n".join("".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True))
                     for row in table)


# -- the command line ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraft-admin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", help="HOST:PORT[,HOST:PORT...] of any "
                        "controller (or a broker's gRPC listener)")
    parser.add_argument("--bootstrap-controller", metavar="HOST:PORT[,HOST:PORT...]",
                        help="any controllers, as kafka-metadata-quorum takes them")
    parser.add_argument("--command-config", metavar="FILE",
                        help="client properties: security.protocol=SSL, ssl.keystore.location, "
                             "ssl.truststore.location (docs/security.md)")
    groups = parser.add_subparsers(dest="group", required=True)
    quorum = groups.add_parser("quorum", help="the metadata quorum")
    commands = quorum.add_subparsers(dest="command", required=True)
    describe = commands.add_parser("describe", help="the quorum as the leader sees it")
    describe.add_argument("--status", action="store_true")
    describe.add_argument("--replication", action="store_true")
    describe.add_argument("--human-readable", action="store_true")
    describe.add_argument("--json", action="store_true")
    status = commands.add_parser("status", help="one node's own view")
    status.add_argument("--node", required=True, help="HOST:PORT of the node")
    status.add_argument("--json", action="store_true")
    add = commands.add_parser("add-controller", help="make a running controller a voter")
    # Its own dest: a subcommand's default would overwrite the top-level --command-config.
    add.add_argument("--command-config", dest="controller_config", metavar="FILE",
                     help="the new controller's own config file (or the top-level "
                          "--command-config, as kafka-metadata-quorum takes it)")
    add.add_argument("--dry-run", action="store_true", help="print what would be sent")
    remove = commands.add_parser("remove-controller", help="remove a voter")
    remove.add_argument("-i", "--controller-id", type=int, required=True)
    remove.add_argument("-d", "--controller-directory-id", required=True, metavar="UUID")
    remove.add_argument("--dry-run", action="store_true", help="print what would be sent")
    # imported here: they must not import this
    from server import (
        acl_commands,
        admin_commands,
        group_commands,
        quota_commands,
        txn_commands,
        user_commands,
    )

    admin_commands.add_commands(groups)
    group_commands.add_commands(groups)
    txn_commands.add_commands(groups)
    acl_commands.add_commands(groups)
    user_commands.add_commands(groups)
    quota_commands.add_commands(groups)
    return parser


def _bootstrap(args: argparse.Namespace, what: str) -> str:
    server, controller = args.bootstrap_server, args.bootstrap_controller
    if server and controller:
        raise AdminError("Only one of --bootstrap-server or --bootstrap-controller must be "
                         "specified")
    if not server and not controller:
        raise AdminError(f"--bootstrap-server or --bootstrap-controller HOST:PORT is required "
                         f"for quorum {what}")
    return ",".join(str(parse_endpoint(item)) for item in (server or controller).split(","))


def run(args: argparse.Namespace) -> str:
    from server import (
        acl_commands,
        admin_client,
        admin_commands,
        group_commands,
        quota_commands,
        txn_commands,
        user_commands,
    )

    if args.group == "quorum" and args.command == "add-controller" \
            and args.controller_config is None:
        # kafka-metadata-quorum has one --command-config, before the command: for
        # add-controller it is the new controller's own file, which also secures the client.
        if args.command_config is None:
            raise AdminError("add-controller needs the new controller's config file: "
                             "--command-config FILE (before or after add-controller)")
        args.controller_config, args.command_config = args.command_config, None
    kafka_protocol = {group_commands.GROUP: group_commands.run,
                      txn_commands.GROUP: txn_commands.run}
    if args.group in kafka_protocol:  # a broker's Kafka listener, not the Admin service
        try:  # its --command-config is a Kafka client's (SASL too): *_tool reads it
            return kafka_protocol[args.group](args)
        except admin_client.CommandError as exc:
            raise AdminError(str(exc)) from exc
    # Imported for the commands that use them: `groups` and `transactions` start without the
    # server's config chain (their start-up is most of a describe's time).
    from kraft.security.client_config import load_client_tls
    from kraft.security.tls import TlsConfigError

    try:
        args.tls = load_client_tls(args.command_config)
    except TlsConfigError as exc:
        raise AdminError(str(exc)) from exc
    own_groups = {acl_commands.GROUP: acl_commands.run, user_commands.GROUP: user_commands.run,
                  quota_commands.GROUP: quota_commands.run}
    if args.group in admin_commands.GROUPS or args.group in own_groups:
        if args.bootstrap_controller:  # the Admin service is on the controller listener too
            args.bootstrap_server = _bootstrap(args, args.command)
        try:
            if args.group in own_groups:
                return own_groups[args.group](args)
            return admin_commands.run(args)
        except admin_client.CommandError as exc:
            raise AdminError(str(exc)) from exc
    try:
        return _quorum(args)
    except QuorumError as exc:
        raise AdminError(str(exc), getattr(exc, "facts", None)) from exc


def _quorum(args: argparse.Namespace) -> str:
    from server import quorum_membership

    if args.command == "status":
        s = node_status(str(parse_endpoint(args.node)), args.tls)
        facts = {"nodeId": s.node_id, "clusterId": s.cluster_id, "state": s.state,
                 "epoch": s.epoch, "leaderId": s.leader_id, "votedId": s.voted_id,
                 "highWatermark": s.high_watermark, "logEndOffset": s.log_end_offset,
                 "lastEpoch": s.last_epoch, "isVoter": s.is_voter,
                 "directoryId": s.directory_id or None, "kraftVersion": s.kraft_version}
        if args.json:
            return json.dumps(facts)
        return "\n".join(f"{k[0].upper() + k[1:] + ':':<24}{v}" for k, v in facts.items())
    if args.command == "add-controller":
        new = quorum_membership.read_new_controller(args.controller_config)
        # As Kafka: the new controller's file is also the client's config, so without a
        # top-level --command-config the tool dials as that controller would.
        tls = args.tls if args.command_config else new.config.controller_tls
        return quorum_membership.add_controller(
            "" if args.dry_run else _bootstrap(args, args.command), new,
            dry_run=args.dry_run, tls=tls, timeout_s=CHANGE_TIMEOUT_S)
    if args.command == "remove-controller":
        quorum_membership.check_remove_arguments(args.controller_id,
                                                 args.controller_directory_id)
        return quorum_membership.remove_controller(
            "" if args.dry_run else _bootstrap(args, args.command), args.controller_id,
            args.controller_directory_id, dry_run=args.dry_run, tls=args.tls,
            timeout_s=CHANGE_TIMEOUT_S)
    if args.status == args.replication:
        raise AdminError(
            "Only one of --status or --replication should be specified with describe sub-command"
            if args.status else
            "One of --status or --replication must be specified with describe sub-command"
        )
    if args.human_readable and not args.replication:
        raise AdminError("The option --human-readable is only supported along with --replication")
    d = describe_quorum(_bootstrap(args, "describe"), tls=args.tls)
    if args.status:
        facts = status_facts(d)
        return json.dumps(facts) if args.json else render_status(facts)
    rows = replication_rows(d)
    if args.json:
        return json.dumps(rows)
    return render_replication(rows, args.human_readable, int(time.time() * 1000))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        print(run(args))
    except AdminError as exc:
        if exc.facts is not None and getattr(args, "json", False):
            print(json.dumps({"error": str(exc), **exc.facts}))
        print(f"kraft-admin: {exc}", file=sys.stderr)
        return 1
    return 0


def entry_point() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
