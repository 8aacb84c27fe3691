"""`kraft-admin`: operate a running quorum.

  kraft-admin --bootstrap-server HOST:PORT quorum describe --status
  kraft-admin --bootstrap-server HOST:PORT quorum describe --replication [--human-readable]
  kraft-admin quorum status --node HOST:PORT
  kraft-admin --bootstrap-server HOST:PORT topics|partitions|brokers|leaders|reassign|configs|
      cluster|features ...   (the Admin service: see server/admin_commands.py)
  (add --json to any of them for machine-readable output)

`describe` may be sent to any controller: a non-leader answers with the leader's address and
the tool follows it. Text output follows `kafka-metadata-quorum describe`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

import grpc
from tenacity import (
    RetryError,
    retry,
    retry_if_exception_type,
    stop_after_delay,
    wait_exponential,
)

from kraft.errors import Errors, error_name
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.client_config import load_client_tls
from kraft.security.tls import TlsConfig, TlsConfigError, sync_channel

RPC_TIMEOUT_S = 5.0
RETRY_FOR_S = 15.0
MAX_LEADER_HOPS = 3


class AdminError(Exception):
    """A one-line failure for the user."""


class _Retryable(Exception):
    """No leader yet, or the node is unreachable: worth another try."""


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"


def parse_endpoint(text: str) -> Endpoint:
    host, sep, port = text.strip().rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise AdminError(f"invalid address {text!r}: expected HOST:PORT")
    return Endpoint(host.strip("[]") if host.startswith("[") else host, int(port))


def _call(endpoint: str, method: str, request: object, tls: TlsConfig | None = None) -> object:
    with sync_channel(endpoint, tls) as channel:
        stub = rpc.QuorumStub(channel)
        try:
            return getattr(stub, method)(request, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError as exc:
            code = exc.code()  # type: ignore[attr-defined]
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED):
                raise _Retryable(f"{endpoint} is unreachable ({code.name})") from exc
            raise AdminError(f"{endpoint} answered {code.name}: {exc.details()}") from exc  # type: ignore[attr-defined]


def describe_quorum(
    bootstrap: str, retry_for_s: float = RETRY_FOR_S, tls: TlsConfig | None = None
) -> pb.DescribeQuorumResponse:
    """DescribeQuorum at the leader, found from any controller; retried while there is none."""

    @retry(
        retry=retry_if_exception_type(_Retryable),
        stop=stop_after_delay(retry_for_s),
        wait=wait_exponential(multiplier=0.05, max=1.0),
        reraise=False,
    )
    def attempt() -> pb.DescribeQuorumResponse:
        target = bootstrap
        for _ in range(MAX_LEADER_HOPS):
            resp = _call(target, "DescribeQuorum", pb.DescribeQuorumRequest(), tls)
            assert isinstance(resp, pb.DescribeQuorumResponse)
            if resp.error_code == Errors.NONE:
                return resp
            if resp.error_code != Errors.NOT_LEADER_OR_FOLLOWER:
                raise AdminError(f"{target}: {error_name(resp.error_code)}: {resp.error_message}")
            if resp.leader_id < 0 or not resp.leader_endpoint:
                raise _Retryable(f"no leader is known at {target} (epoch {resp.leader_epoch})")
            target = resp.leader_endpoint
        raise _Retryable("the leader moved while being looked up")

    try:
        return attempt()
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        raise AdminError(f"gave up after {retry_for_s:.0f} s: {cause}") from cause


def node_status(node: str, tls: TlsConfig | None = None) -> pb.NodeStatusResponse:
    try:
        resp = _call(node, "NodeStatus", pb.NodeStatusRequest(), tls)
    except _Retryable as exc:
        raise AdminError(str(exc)) from exc
    assert isinstance(resp, pb.NodeStatusResponse)
    return resp


# -- rendering -----------------------------------------------------------------------------------


def _leader_state(d: pb.DescribeQuorumResponse) -> pb.ReplicaState | None:
    return next((v for v in d.current_voters if v.replica_id == d.leader_id), None)


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
        lag_ms = leader.last_caught_up_timestamp - laggiest.last_caught_up_timestamp
    listener = d.listener_name or "CONTROLLER"
    return {
        "clusterId": d.cluster_id,
        "leaderId": d.leader_id,
        "leaderEpoch": d.leader_epoch,
        "highWatermark": d.high_watermark,
        "maxFollowerLag": max_lag,
        "maxFollowerLagTimeMs": lag_ms,
        "currentVoters": [
            {"id": v.replica_id, "directoryId": None,
             "endpoints": [f"{listener}://{d.voter_endpoints[v.replica_id]}"]
             if v.replica_id in d.voter_endpoints else []}
            for v in voters
        ],
        "currentObservers": [{"id": o.replica_id, "directoryId": None} for o in d.observers],
    }


def render_status(facts: dict[str, object]) -> str:
    def node(n: dict[str, object]) -> str:
        text = f'{{"id": {n["id"]}, "directoryId": null'
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
    rows = []
    for replica, kind in [(v, "voter") for v in ordered] + [(o, "observer") for o in d.observers]:
        if kind == "observer":
            status = "Observer"
        else:
            status = "Leader" if replica.replica_id == d.leader_id else "Follower"
        rows.append({
            "nodeId": replica.replica_id,
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
    header = ["NodeId", "LogEndOffset", "Lag", "LastFetchTimestamp", "LastCaughtUpTimestamp",
              "Status"]
    table = [header]
    for r in rows:
        fetch, caught = r["lastFetchTimestamp"], r["lastCaughtUpTimestamp"]
        if human:
            fetch, caught = _relative(int(fetch), now_ms), _relative(int(caught), now_ms)  # type: ignore[call-overload]
        table.append([str(r["nodeId"]), str(r["logEndOffset"]), str(r["lag"]), str(fetch),
                      str(caught), str(r["status"])])
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    # Kafka's prettyPrintTable: every cell padded to its column and followed by a tab.
    return "\n".join("".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True))
                     for row in table)


# -- the command line ------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kraft-admin", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-server", help="HOST:PORT of any controller")
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
    from server import admin_commands  # imported here: it must not import this module

    admin_commands.add_commands(groups)
    return parser


def run(args: argparse.Namespace) -> str:
    from server import admin_commands

    try:
        args.tls = load_client_tls(args.command_config)
    except TlsConfigError as exc:
        raise AdminError(str(exc)) from exc
    if args.group in admin_commands.GROUPS:
        try:
            return admin_commands.run(args)
        except admin_commands.CommandError as exc:
            raise AdminError(str(exc)) from exc
    if args.command == "status":
        s = node_status(str(parse_endpoint(args.node)), args.tls)
        facts = {"nodeId": s.node_id, "clusterId": s.cluster_id, "state": s.state,
                 "epoch": s.epoch, "leaderId": s.leader_id, "votedId": s.voted_id,
                 "highWatermark": s.high_watermark, "logEndOffset": s.log_end_offset,
                 "lastEpoch": s.last_epoch, "isVoter": s.is_voter}
        if args.json:
            return json.dumps(facts)
        return "\n".join(f"{k[0].upper() + k[1:] + ':':<24}{v}" for k, v in facts.items())
    if args.status == args.replication:
        raise AdminError(
            "Only one of --status or --replication should be specified with describe sub-command"
            if args.status else
            "One of --status or --replication must be specified with describe sub-command"
        )
    if args.human_readable and not args.replication:
        raise AdminError("The option --human-readable is only supported along with --replication")
    if not args.bootstrap_server:
        raise AdminError("--bootstrap-server HOST:PORT is required for quorum describe")
    d = describe_quorum(str(parse_endpoint(args.bootstrap_server)), tls=args.tls)
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
        print(f"kraft-admin: {exc}", file=sys.stderr)
        return 1
    return 0


def entry_point() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry_point()
