"""`kraft-admin quorum describe` when no leader answers: the asked node's view (its state, the
last leader and epoch, the voters it cannot reach) instead of the dead leader's address, at
once when the node shows a majority gone, else after the usual retry bound."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest

from kraft.errors import Errors
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from server import admin_cli, quorum_client
from server.quorum_view import FRESH_MS, NodeView


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


DEAD_LEADER = f"127.0.0.1:{free_port()}"  # nothing listens there


def contact(voter_id: int, heard: int, failed: int, failure: str = "") -> pb.VoterContact:
    return pb.VoterContact(voter_id=voter_id, endpoint=f"c{voter_id}:9093", heard_ms_ago=heard,
                           failed_ms_ago=failed, failure=failure)


def status(*voters: pb.VoterContact, is_voter: bool = True) -> pb.NodeStatusResponse:
    return pb.NodeStatusResponse(
        node_id=3, state="Prospective", epoch=7, leader_id=1, leader_endpoint=DEAD_LEADER,
        high_watermark=42, log_end_offset=43, is_voter=is_voter, voters=list(voters))


REFUSED = "connection refused or reset"
BOTH_GONE = status(contact(1, 900, 300, REFUSED), contact(2, -1, 200, REFUSED))


def test_unreachable_means_a_fresh_failure_after_the_last_word() -> None:
    view = NodeView("n3:9093", status(
        contact(1, heard=900, failed=300, failure=REFUSED),  # failed since last heard
        contact(2, heard=100, failed=300),                   # heard after it failed
        contact(4, heard=-1, failed=-1),                     # never asked: no evidence
        contact(5, heard=-1, failed=FRESH_MS + 1),           # old news
    ))
    assert [v.voter_id for v in view.unreachable] == [1]
    assert (view.voter_count, view.reachable_count, view.majority_lost) == (5, 4, False)


def test_a_majority_lost_is_said_in_one_line_with_the_nodes_view() -> None:
    view = NodeView("n3:9093", BOTH_GONE)
    assert view.majority_lost
    assert view.text() == (
        f"node 3 at n3:9093 is Prospective in epoch 7, last leader 1 at {DEAD_LEADER}, "
        f"high watermark 42; it cannot reach voters 1 at c1:9093 ({REFUSED}, 0.3 s ago), "
        f"2 at c2:9093 ({REFUSED}, 0.2 s ago): 1 of 3 voters reachable, a majority needs 2; "
        "no leader can be elected until enough voters are back")
    # An observer is no voter: 1 of 2 voters gone is half, not a majority reachable.
    observer = NodeView("b4:9093", status(contact(1, -1, 5, REFUSED), contact(2, 5, -1),
                                          is_voter=False))
    assert (observer.voter_count, observer.reachable_count, observer.majority_lost) == (
        2, 1, True)


class Follower(rpc.QuorumServicer):
    """A node that names a dead leader and reports `node_status`."""

    def __init__(self) -> None:
        self.node_status = BOTH_GONE

    def DescribeQuorum(self, request: Any, context: Any) -> Any:
        return pb.DescribeQuorumResponse(
            error_code=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=1, leader_epoch=7,
            leader_endpoint=DEAD_LEADER)

    def NodeStatus(self, request: Any, context: Any) -> Any:
        return self.node_status


@pytest.fixture
def follower() -> Iterator[tuple[Follower, str]]:
    servicer = Follower()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    rpc.add_QuorumServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield servicer, f"127.0.0.1:{port}"
    server.stop(0)


def test_describe_stops_early_when_the_node_shows_the_majority_gone(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    follower: tuple[Follower, str],
) -> None:
    monkeypatch.setattr(quorum_client, "SETTLE_S", 0.2)
    _, endpoint = follower
    started = time.monotonic()
    code = admin_cli.main(["--bootstrap-server", endpoint, "quorum", "describe", "--status",
                           "--json"])
    took = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code == 1 and took < 3, took  # not the 15-s retry bound
    assert err == f"kraft-admin: no leader answers: {NodeView(endpoint, BOTH_GONE).text()}\n"
    facts = json.loads(out)
    assert facts["error"] == err.removeprefix("kraft-admin: ").rstrip()
    assert (facts["nodeId"], facts["state"], facts["epoch"], facts["lastLeaderId"]) == (
        3, "Prospective", 7, 1)
    assert [(v["id"], v["failure"]) for v in facts["unreachableVoters"]] == [
        (1, REFUSED), (2, REFUSED)]
    assert (facts["voters"], facts["reachableVoters"]) == (3, 1)


def test_with_a_majority_reachable_it_waits_for_an_election_then_adds_the_view(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    follower: tuple[Follower, str],
) -> None:
    monkeypatch.setattr(quorum_client, "SETTLE_S", 0.1)
    monkeypatch.setattr(quorum_client, "RETRY_FOR_S", 0.6)
    servicer, endpoint = follower
    servicer.node_status = status(contact(1, 900, 300, REFUSED), contact(2, 50, -1))
    code = admin_cli.main(["--bootstrap-server", endpoint, "quorum", "describe", "--status"])
    out, err = capsys.readouterr()
    assert (code, out) == (1, "")
    assert err.startswith(f"kraft-admin: gave up after 1 s: {DEAD_LEADER} is unreachable")
    assert err.rstrip().endswith(f"it cannot reach voter 1 at c1:9093 ({REFUSED}, 0.3 s ago)")
    assert err.count("\n") == 1
