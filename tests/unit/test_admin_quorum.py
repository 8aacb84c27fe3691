"""kraft-admin's quorum commands (KIP-853): add-controller, remove-controller, describe with
directory ids, against Quorum services on loopback whose answers each test sets: the exact
lines, the requests sent, leader redirects and one-line errors with Kafka's error names."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from kraft.errors import Errors
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.certs import make_test_certs
from kraft.security.tls import TlsConfig
from server import admin_cli, admin_client, admin_commands, quorum_client
from server.storage_cli import main as storage_main

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
D1, D2, D4 = "3DOJ8GF4TLuIQcDdnvI4dQ", "q1Sh-9_ISia_zwGINzRvyQ", "aR9kVtKfQxK2n5sYrMZ1cg"


@dataclass
class FakeQuorum(rpc.QuorumServicer):
    """A Quorum service that answers what the test puts in `answers` (method -> responses,
    the last one repeated) and records every request."""

    answers: dict[str, list[Any]] = field(default_factory=dict)
    received: list[tuple[str, Any]] = field(default_factory=list)
    hold: threading.Event | None = None  # set: answer changes only once the test releases it

    def _answer(self, method: str, request: Any) -> Any:
        self.received.append((method, request))
        if self.hold is not None and method.endswith("RaftVoter"):
            self.hold.wait(10)
        queue = self.answers[method]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    def DescribeQuorum(self, request: Any, context: Any) -> Any:
        return self._answer("DescribeQuorum", request)

    def NodeStatus(self, request: Any, context: Any) -> Any:
        return self._answer("NodeStatus", request)

    def AddRaftVoter(self, request: Any, context: Any) -> Any:
        return self._answer("AddRaftVoter", request)

    def RemoveRaftVoter(self, request: Any, context: Any) -> Any:
        return self._answer("RemoveRaftVoter", request)

    def sent(self, method: str) -> list[Any]:
        return [request for name, request in self.received if name == method]


@dataclass
class Node:
    quorum: FakeQuorum
    endpoint: str


@pytest.fixture
def nodes() -> Iterator[tuple[Node, Node]]:
    """A leader and a follower that redirects to it."""
    servers, made = [], []
    for _ in range(2):
        quorum = FakeQuorum()
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        rpc.add_QuorumServicer_to_server(quorum, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        made.append(Node(quorum, f"127.0.0.1:{port}"))
    leader, follower = made
    not_leader = pb.VoterChangeResponse(
        error_code=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=1, leader_epoch=3,
        leader_endpoint=leader.endpoint)
    follower.quorum.answers = {
        "AddRaftVoter": [not_leader], "RemoveRaftVoter": [not_leader],
        "DescribeQuorum": [pb.DescribeQuorumResponse(
            error_code=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=1, leader_epoch=3,
            leader_endpoint=leader.endpoint)],
    }
    yield leader, follower
    for node, server in zip(made, servers, strict=True):
        if node.quorum.hold is not None:
            node.quorum.hold.set()
        server.stop(0)


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = admin_cli.main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = cli(capsys, *args)
    assert (code, err) == (0, ""), err
    return out


def fails(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = cli(capsys, *args)
    assert (code, out) == (1, "")
    assert err.count("\n") == 1, err  # one line
    return err.removeprefix("kraft-admin: ").rstrip("\n")


def new_controller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], *, node_id: int = 4,
    roles: str = "controller", formatted: bool = True, extra: str = "",
) -> Path:
    """The config file of a controller to add, formatted with --no-initial-controllers."""
    listeners, advertised = "CONTROLLER://0.0.0.0:9096", "CONTROLLER://c4.example:9096"
    if roles != "controller":
        listeners += ",PLAINTEXT://127.0.0.1:9092"
        advertised += ",PLAINTEXT://127.0.0.1:9092"
    path = tmp_path / f"controller-{node_id}.properties"
    path.write_text(
        f"process.roles={roles}\nnode.id={node_id}\n"
        "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"
        f"listeners={listeners}\n"
        f"advertised.listeners={advertised}\n"
        f"controller.listener.names=CONTROLLER\nlog.dirs={tmp_path / 'data'}\n{extra}"
    )
    if formatted:
        assert storage_main(["format", "-t", CLUSTER, "-c", str(path), "-N"]) == 0
        capsys.readouterr()
    return path


def directory_id(tmp_path: Path) -> str:
    text = (tmp_path / "data" / "meta.properties").read_text()
    return text.split("directory.id=")[1].split("\n")[0]


# ---- add-controller ----


def test_add_controller_follows_the_leader_and_sends_the_new_controllers_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, follower = nodes
    leader.quorum.answers["AddRaftVoter"] = [pb.VoterChangeResponse(error_code=Errors.NONE)]
    path = new_controller(tmp_path, capsys)
    dir_id = directory_id(tmp_path)
    assert ok(capsys, "--bootstrap-controller", follower.endpoint, "quorum", "add-controller",
              "--command-config", str(path)) == (
        f"Added controller 4 with directory id {dir_id} and endpoints: "
        "CONTROLLER://c4.example:9096\n")
    [request] = leader.quorum.sent("AddRaftVoter")
    assert (request.voter_id, request.voter_directory_id, request.cluster_id.value) == (
        4, dir_id, CLUSTER)
    assert [(e.name, e.host, e.port) for e in request.listeners] == [
        ("CONTROLLER", "c4.example", 9096)]
    assert (request.min_kraft_version, request.max_kraft_version) == (0, 1)
    assert len(follower.quorum.sent("AddRaftVoter")) == 1  # asked once, then redirected


def test_add_controller_dry_run_sends_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, _ = nodes
    path = new_controller(tmp_path, capsys, roles="broker,controller")
    assert ok(capsys, "--bootstrap-controller", leader.endpoint, "quorum", "add-controller",
              "--command-config", str(path), "--dry-run") == (
        f"DRY RUN of adding controller 4 with directory id {directory_id(tmp_path)} and "
        "endpoints: CONTROLLER://c4.example:9096\n")
    assert leader.quorum.received == []


def test_add_controller_takes_the_command_config_before_the_command_as_kafka(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, _ = nodes
    leader.quorum.answers["AddRaftVoter"] = [pb.VoterChangeResponse(error_code=Errors.NONE)]
    path = new_controller(tmp_path, capsys)
    assert ok(capsys, "--bootstrap-controller", leader.endpoint, "--command-config", str(path),
              "quorum", "add-controller") == (
        f"Added controller 4 with directory id {directory_id(tmp_path)} and endpoints: "
        "CONTROLLER://c4.example:9096\n")
    assert fails(capsys, "--bootstrap-controller", leader.endpoint, "quorum",
                 "add-controller").startswith("add-controller needs the new controller's")


@pytest.mark.parametrize(
    ("code", "message", "line"),
    [
        (Errors.REQUEST_TIMED_OUT, "The request timed out.",
         "REQUEST_TIMED_OUT: The request timed out. Run kraft-admin quorum describe --status "
         "before retrying; a timed-out add may still commit (another change may also be "
         "pending, or the new controller not caught up yet)."),
        (Errors.DUPLICATE_VOTER, "The voter id for ReplicaKey(id=4) is already part of the set "
         "of voters.",
         "DUPLICATE_VOTER: The voter id for ReplicaKey(id=4) is already part of the set of "
         "voters. Node ids are unique among voters: quorum describe --status shows node 4's "
         "current directory id; to replace its disk, remove-controller that key first."),
        (Errors.UNSUPPORTED_VERSION, "",
         "UNSUPPORTED_VERSION: The quorum runs kraft.version 0 (static "
         "controller.quorum.voters); membership changes need a quorum formatted with "
         "--standalone or --initial-controllers."),
        (Errors.INCONSISTENT_CLUSTER_ID, "",
         "INCONSISTENT_CLUSTER_ID: The new controller's storage was formatted for another "
         "cluster: re-format it with the cluster's id and --no-initial-controllers."),
        (Errors.INVALID_REQUEST, "The voter's kraft.version range 0..0 excludes 1.",
         "INVALID_REQUEST: The voter's kraft.version range 0..0 excludes 1. Check the "
         "controller's directory id and that it serves the controller listener and supports "
         "kraft.version 1."),
    ],
)
def test_add_controller_errors_are_one_line_with_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node],
    code: int, message: str, line: str,
) -> None:
    leader, _ = nodes
    leader.quorum.answers["AddRaftVoter"] = [
        pb.VoterChangeResponse(error_code=code, error_message=message)]
    path = new_controller(tmp_path, capsys)
    assert fails(capsys, "--bootstrap-controller", leader.endpoint, "quorum", "add-controller",
                 "--command-config", str(path)) == line
    assert len(leader.quorum.sent("AddRaftVoter")) == 1  # a refusal is never retried


def test_an_unanswered_add_is_not_resent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    leader, _ = nodes
    leader.quorum.answers["AddRaftVoter"] = [pb.VoterChangeResponse(error_code=Errors.NONE)]
    leader.quorum.hold = threading.Event()  # the leader never answers in time
    monkeypatch.setattr(admin_cli, "CHANGE_TIMEOUT_S", 0.5)
    path = new_controller(tmp_path, capsys)
    assert fails(capsys, "--bootstrap-controller", leader.endpoint, "quorum", "add-controller",
                 "--command-config", str(path)) == (
        f"{leader.endpoint} did not answer AddRaftVoter within 0.5 s; run kraft-admin quorum "
        "describe --status before retrying: a timed-out add may still commit.")
    assert len(leader.quorum.sent("AddRaftVoter")) == 1


def test_no_leader_is_retried_until_one_is_known(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, follower = nodes
    electing = pb.VoterChangeResponse(error_code=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=-1,
                                      leader_epoch=4)
    redirect = follower.quorum.answers["AddRaftVoter"][0]
    follower.quorum.answers["AddRaftVoter"] = [electing, electing, redirect]
    leader.quorum.answers["AddRaftVoter"] = [pb.VoterChangeResponse(error_code=Errors.NONE)]
    path = new_controller(tmp_path, capsys)
    assert ok(capsys, "--bootstrap-server", follower.endpoint, "quorum", "add-controller",
              "--command-config", str(path)).startswith("Added controller 4 ")
    assert len(follower.quorum.sent("AddRaftVoter")) == 3
    assert len(leader.quorum.sent("AddRaftVoter")) == 1


def test_add_controller_reads_a_controllers_own_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def refusal(path: Path) -> str:
        return fails(capsys, "--bootstrap-controller", "127.0.0.1:1", "quorum",
                     "add-controller", "--command-config", str(path))

    broker = tmp_path / "broker.properties"
    broker.write_text("process.roles=broker\nnode.id=7\nlisteners=PLAINTEXT://127.0.0.1:9092\n"
                      "controller.quorum.bootstrap.servers=127.0.0.1:9093\n"
                      f"controller.listener.names=CONTROLLER\nlog.dirs={tmp_path / 'b'}\n")
    assert refusal(broker) == (
        f"add-controller --command-config {broker}: process.roles=broker has no controller "
        "role: only a controller can be added to the quorum.")
    unformatted = new_controller(tmp_path, capsys, formatted=False)
    assert refusal(unformatted) == (
        f"add-controller --command-config {unformatted}: the metadata directory "
        f"{tmp_path / 'data'} is not formatted: run kraft-storage format -t <cluster-id> -c "
        f"{unformatted} --no-initial-controllers, start the node, and add it once it has "
        "caught up.")
    broken = tmp_path / "broken.properties"
    broken.write_text("process.roles=controller\n")
    assert refusal(broken) == (
        f"add-controller --command-config {broken}: Missing required configuration "
        '"node.id" which has no default value.')
    assert refusal(tmp_path / "absent.properties").startswith(
        f"add-controller --command-config {tmp_path / 'absent.properties'}: ")
    other = tmp_path / "other"
    other.mkdir()
    moved = new_controller(other, capsys, node_id=5)
    moved.write_text(moved.read_text().replace("node.id=5", "node.id=6"))
    assert refusal(moved) == (
        f"add-controller --command-config {moved}: the metadata directory {other / 'data'} "
        "belongs to node 5, not node.id 6.")


# ---- remove-controller ----


def test_remove_controller(capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]) -> None:
    leader, follower = nodes
    leader.quorum.answers["RemoveRaftVoter"] = [
        pb.VoterChangeResponse(error_code=Errors.NONE)]
    assert ok(capsys, "--bootstrap-controller", follower.endpoint, "quorum",
              "remove-controller", "--controller-id", "2", "--controller-directory-id", D2
              ) == f"Removed KRaft controller 2 with directory id {D2}\n"
    [request] = leader.quorum.sent("RemoveRaftVoter")
    assert (request.voter_id, request.voter_directory_id) == (2, D2)
    assert ok(capsys, "--bootstrap-controller", leader.endpoint, "quorum",
              "remove-controller", "-i", "2", "-d", D2, "--dry-run"
              ) == f"DRY RUN of removing KRaft controller 2 with directory id {D2}\n"
    assert len(leader.quorum.sent("RemoveRaftVoter")) == 1


def test_remove_controller_refusals(
    capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, _ = nodes
    leader.quorum.answers["RemoveRaftVoter"] = [pb.VoterChangeResponse(
        error_code=Errors.VOTER_NOT_FOUND, error_message="The voter is not part of the set of "
        "voters.")]
    base = ["--bootstrap-controller", leader.endpoint, "quorum", "remove-controller"]
    assert fails(capsys, *base, "-i", "3", "-d", D1) == (
        "VOTER_NOT_FOUND: The voter is not part of the set of voters. No voter is (3, "
        f"{D1}), or it is the last one: check the id and directory id with quorum describe "
        "--status.")
    assert fails(capsys, *base, "-i", "-1", "-d", D1) == (
        "--controller-id -1: a node id is an integer >= 0.")
    for bad in ("not-a-uuid", "AAAAAAAAAAAAAAAAAAAAAA"):
        assert fails(capsys, *base, "-i", "3", "-d", bad) == (
            f"--controller-directory-id {bad!r} is not a valid directory id: take it from "
            "quorum describe --status (directoryId).")
    assert len(leader.quorum.sent("RemoveRaftVoter")) == 1  # the bad ones never left


def test_one_bootstrap_option(capsys: pytest.CaptureFixture[str]) -> None:
    assert fails(capsys, "--bootstrap-server", "h:1", "--bootstrap-controller", "h:2",
                 "quorum", "describe", "--status") == (
        "Only one of --bootstrap-server or --bootstrap-controller must be specified")
    assert fails(capsys, "quorum", "remove-controller", "-i", "1", "-d", D1) == (
        "--bootstrap-server or --bootstrap-controller HOST:PORT is required for quorum "
        "remove-controller")


# ---- describe ----


def described() -> pb.DescribeQuorumResponse:
    """Voters 1 (leader, dynamic), 2 (static: no directory id), observer 4 (joining)."""
    return pb.DescribeQuorumResponse(
        error_code=Errors.NONE, cluster_id=CLUSTER, leader_id=1, leader_epoch=3,
        high_watermark=40, leader_log_end_offset=42, listener_name="CONTROLLER", kraft_version=1,
        current_voters=[
            pb.ReplicaState(replica_id=1, log_end_offset=42, last_fetch_timestamp=1000,
                            last_caught_up_timestamp=1000, directory_id=D1,
                            endpoint="c1.example:9093"),
            pb.ReplicaState(replica_id=2, log_end_offset=40, last_fetch_timestamp=990,
                            last_caught_up_timestamp=980, endpoint="c2.example:9093"),
        ],
        observers=[pb.ReplicaState(replica_id=4, log_end_offset=41, last_fetch_timestamp=995,
                                   last_caught_up_timestamp=990, directory_id=D4)],
    )


def test_describe_status_shows_directory_ids_and_endpoints(
    capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, follower = nodes
    leader.quorum.answers["DescribeQuorum"] = [described()]
    text = ok(capsys, "--bootstrap-controller", follower.endpoint, "quorum", "describe",
              "--status")
    assert text.splitlines()[-2:] == [
        f'CurrentVoters:          [{{"id": 1, "directoryId": "{D1}", "endpoints": '
        '["CONTROLLER://c1.example:9093"]}, {"id": 2, "directoryId": null, "endpoints": '
        '["CONTROLLER://c2.example:9093"]}]',
        f'CurrentObservers:       [{{"id": 4, "directoryId": "{D4}"}}]',
    ]
    facts = json.loads(ok(capsys, "--bootstrap-server", leader.endpoint, "quorum", "describe",
                          "--status", "--json"))
    assert facts["currentVoters"][1] == {"id": 2, "directoryId": None,
                                         "endpoints": ["CONTROLLER://c2.example:9093"]}
    assert facts["currentObservers"] == [{"id": 4, "directoryId": D4}]


def test_describe_replication_has_a_directory_id_column(
    capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, _ = nodes
    leader.quorum.answers["DescribeQuorum"] = [described()]
    lines = ok(capsys, "--bootstrap-controller", leader.endpoint, "quorum", "describe",
               "--replication").splitlines()
    assert [line.split() for line in lines] == [
        ["NodeId", "DirectoryId", "LogEndOffset", "Lag", "LastFetchTimestamp",
         "LastCaughtUpTimestamp", "Status"],
        ["1", D1, "42", "0", "1000", "1000", "Leader"],
        ["2", "AAAAAAAAAAAAAAAAAAAAAA", "40", "2", "990", "980", "Follower"],
        ["4", D4, "41", "1", "995", "990", "Observer"],
    ]
    rows = json.loads(ok(capsys, "--bootstrap-controller", leader.endpoint, "quorum",
                         "describe", "--replication", "--json"))
    assert [r["directoryId"] for r in rows] == [D1, None, D4]


def test_status_shows_the_nodes_key_and_kraft_version(
    capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, _ = nodes
    leader.quorum.answers["NodeStatus"] = [pb.NodeStatusResponse(
        node_id=4, state="observer", leader_id=1, directory_id=D4, kraft_version=1)]
    facts = json.loads(ok(capsys, "quorum", "status", "--node", leader.endpoint, "--json"))
    assert (facts["directoryId"], facts["kraftVersion"], facts["isVoter"]) == (D4, 1, False)
    assert "DirectoryId:            " + D4 in ok(capsys, "quorum", "status", "--node",
                                                 leader.endpoint)


def test_unreachable_bootstrap_gives_up_in_one_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(quorum_client, "RETRY_FOR_S", 0.3)
    line = fails(capsys, "--bootstrap-controller", "127.0.0.1:1", "quorum", "remove-controller",
                 "-i", "1", "-d", D1)
    assert line.startswith("gave up after 0 s: 127.0.0.1:1 is unreachable")


def test_features_read_kraft_version_from_the_quorum_leader(
    nodes: tuple[Node, Node]
) -> None:
    leader, follower = nodes
    leader.quorum.answers["DescribeQuorum"] = [described()]
    client = admin_client.AdminClient([follower.endpoint])
    assert admin_commands._kraft_version(client) == 1
    assert len(leader.quorum.sent("DescribeQuorum")) == 1


def test_a_change_made_before_leadership_moved_is_reported_done(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    """Sent on after a NOT_LEADER_OR_FOLLOWER (the first node may have taken the change and
    lost leadership), the last answer says it is already made: it was ours if the quorum was
    not in the asked state before it was sent and is now."""
    leader, follower = nodes
    path = new_controller(tmp_path, capsys)
    added = described()
    added.current_voters.append(pb.ReplicaState(replica_id=4, directory_id=directory_id(tmp_path)))
    leader.quorum.answers["DescribeQuorum"] = [described(), added]  # before, after
    leader.quorum.answers["AddRaftVoter"] = [pb.VoterChangeResponse(
        error_code=Errors.DUPLICATE_VOTER, error_message="already a voter")]
    base = ["--bootstrap-controller", follower.endpoint, "quorum"]
    assert ok(capsys, *base, "add-controller", "--command-config", str(path)).startswith(
        "Added controller 4 with directory id ")
    # A voter before it was sent: the refusal stands, as Kafka reports it.
    leader.quorum.answers["DescribeQuorum"] = [added]
    assert fails(capsys, *base, "add-controller", "--command-config", str(path)).startswith(
        "DUPLICATE_VOTER: already a voter. ")
    # Not a voter after either (another key of node 4, say): the refusal stands.
    leader.quorum.answers["DescribeQuorum"] = [described()]
    assert fails(capsys, *base, "add-controller", "--command-config", str(path)).startswith(
        "DUPLICATE_VOTER: already a voter. ")
    # Sent once, straight to the leader: a refusal is a refusal, asked once (before) only.
    asked = len(leader.quorum.sent("DescribeQuorum"))
    assert fails(capsys, "--bootstrap-controller", leader.endpoint, "quorum", "add-controller",
                 "--command-config", str(path)).startswith("DUPLICATE_VOTER: ")
    assert len(leader.quorum.sent("DescribeQuorum")) == asked + 1

    removed = described()
    del removed.current_voters[0]
    leader.quorum.answers["DescribeQuorum"] = [described(), removed]
    leader.quorum.answers["RemoveRaftVoter"] = [pb.VoterChangeResponse(
        error_code=Errors.VOTER_NOT_FOUND)]
    assert ok(capsys, *base, "remove-controller", "-i", "1", "-d", D1) == (
        f"Removed KRaft controller 1 with directory id {D1}\n")
    leader.quorum.answers["DescribeQuorum"] = [described()]  # (1, D1) is still a voter
    assert fails(capsys, *base, "remove-controller", "-i", "1", "-d", D1).startswith(
        "VOTER_NOT_FOUND: ")
    leader.quorum.answers["DescribeQuorum"] = [removed]  # it was gone before: not ours
    assert fails(capsys, *base, "remove-controller", "-i", "1", "-d", D1).startswith(
        "VOTER_NOT_FOUND: ")


def test_no_leader_at_all_fails_before_anything_is_sent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _, follower = nodes
    follower.quorum.answers["DescribeQuorum"] = [pb.DescribeQuorumResponse(
        error_code=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=-1, leader_epoch=5)]
    monkeypatch.setattr(quorum_client, "RETRY_FOR_S", 0.2)
    assert fails(capsys, "--bootstrap-controller", follower.endpoint, "quorum",
                 "remove-controller", "-i", "1", "-d", D1) == (
        f"gave up after 0 s: no leader is known at {follower.endpoint} (epoch 5)")
    assert follower.quorum.sent("RemoveRaftVoter") == []


def test_add_controller_dials_as_the_new_controller_over_tls(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """As Kafka: the new controller's file is also the client config, so an SSL controller
    listener is dialed with that controller's own keystore (no --command-config needed)."""
    paths = make_test_certs(tmp_path / "certs", ["controller-1", "controller-4"], ["127.0.0.1"])
    leader = FakeQuorum(answers={"AddRaftVoter": [pb.VoterChangeResponse()],
                                 "DescribeQuorum": [described()]})
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    rpc.add_QuorumServicer_to_server(leader, server)
    port = server.add_secure_port(
        "127.0.0.1:0", TlsConfig(str(paths["controller-1"]), str(paths["ca"])).server_credentials())
    server.start()
    try:
        path = new_controller(tmp_path, capsys, extra=(
            "listener.security.protocol.map=CONTROLLER:SSL\n"
            f"ssl.keystore.location={paths['controller-4']}\n"
            f"ssl.truststore.location={paths['ca']}\n"))
        assert ok(capsys, "--bootstrap-controller", f"127.0.0.1:{port}", "quorum",
                  "add-controller", "--command-config", str(path)).startswith(
            "Added controller 4 ")
        assert len(leader.sent("AddRaftVoter")) == 1
    finally:
        server.stop(0)


def test_a_list_of_bootstrap_controllers_skips_an_unreachable_one(
    capsys: pytest.CaptureFixture[str], nodes: tuple[Node, Node]
) -> None:
    leader, follower = nodes
    leader.quorum.answers["DescribeQuorum"] = [described()]
    facts = json.loads(ok(capsys, "--bootstrap-controller", f"127.0.0.1:1,{follower.endpoint}",
                          "quorum", "describe", "--status", "--json"))
    assert facts["leaderId"] == 1
    assert fails(capsys, "--bootstrap-controller", "127.0.0.1:1,nope", "quorum", "describe",
                 "--status") == "invalid address 'nope': expected HOST:PORT"
    assert str(admin_cli.parse_endpoint("[::1]:9093")) == "[::1]:9093"
