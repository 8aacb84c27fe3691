"""The Quorum service (kraft/rpc/raft.proto) as `kraft-admin` calls it.

DescribeQuorum and the KIP-853 voter changes are answered by the leader only: any other node
answers NOT_LEADER_OR_FOLLOWER with the leader's endpoint when it knows one, and the client
follows it (a few hops). While no leader is known, or the node is unreachable, the call is
retried for a bounded time; DescribeQuorum stops early, with the asked node's view, when that
node shows that a majority of the voters is gone (server/quorum_view.py). Every failure is a
QuorumError whose str() is one line.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import grpc
from tenacity import RetryError, retry, retry_if_exception_type, stop_after_delay, wait_exponential

from kraft.errors import Errors, error_name
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.security.tls import TlsConfig, sync_channel
from server.quorum_view import NodeView

RPC_TIMEOUT_S = 5.0
# A voter change is answered once it commits, after the leader's own checks (its
# controller.quorum.request.timeout.ms, 2 s by default): leave it room.
CHANGE_TIMEOUT_S = 15.0
RETRY_FOR_S = 15.0
MAX_LEADER_HOPS = 3
# Only this long after the first failure does a node's view of unreachable voters end the wait
# for a leader: a node whose leader just died asks every voter within ~50 ms (its pre-votes),
# and its answers replace any older failure it remembers.
SETTLE_S = 0.5
STATUS_TIMEOUT_S = 1.0

R = TypeVar("R")


class QuorumError(Exception):
    """A one-line failure for the user."""


class Retryable(Exception):
    """No leader yet, or the node is unreachable: worth another try."""


class GaveUp(QuorumError):
    """No leader answered within the retry bound: nothing was done."""


class NoLeader(QuorumError):
    """No leader answers; `facts` is what the asked node knows (NodeView.facts)."""

    def __init__(self, message: str, facts: dict[str, object]) -> None:
        super().__init__(message)
        self.facts = facts


class Unanswered(QuorumError):
    """The request went out and no answer came back: it may or may not have been applied."""


def call(
    endpoint: str, method: str, request: object, tls: TlsConfig | None = None,
    timeout_s: float = RPC_TIMEOUT_S, *, idempotent: bool = True,
) -> object:
    """One Quorum RPC. UNAVAILABLE (nothing was delivered) is Retryable; so is a deadline
    on an `idempotent` call; on a change it is Unanswered (it may still be applied)."""
    with sync_channel(endpoint, tls) as channel:
        stub = rpc.QuorumStub(channel)
        try:
            return getattr(stub, method)(request, timeout=timeout_s)
        except grpc.RpcError as exc:
            code = exc.code()
            details = exc.details()
            if code == grpc.StatusCode.UNAVAILABLE:
                raise Retryable(f"{endpoint} is unreachable ({code.name})") from exc
            if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                if idempotent:
                    raise Retryable(f"{endpoint} is unreachable ({code.name})") from exc
                raise Unanswered(
                    f"{endpoint} did not answer {method} within {timeout_s:g} s") from exc
            if code == grpc.StatusCode.UNIMPLEMENTED:
                raise QuorumError(f"{endpoint} does not serve {method}: is it a controller of "
                                  "this release (or a broker with a gRPC listener)?") from exc
            raise QuorumError(f"{endpoint} answered {code.name}: {details}") from exc


def retrying(attempt: Callable[[], R], retry_for_s: float) -> R:
    """Run `attempt` until it stops raising Retryable, for at most `retry_for_s`."""
    wrapped = retry(
        retry=retry_if_exception_type(Retryable),
        stop=stop_after_delay(retry_for_s),
        wait=wait_exponential(multiplier=0.05, max=1.0),
        reraise=False,
    )(attempt)
    try:
        return wrapped()
    except RetryError as exc:
        cause = exc.last_attempt.exception()
        raise GaveUp(f"gave up after {retry_for_s:.0f} s: {cause}") from cause


class Bootstrap:
    """`HOST:PORT[,HOST:PORT...]`: each attempt starts at the next server, so an unreachable
    one is skipped on the retry."""

    def __init__(self, servers: str) -> None:
        self.servers = [s.strip() for s in servers.split(",") if s.strip()]
        self._next = 0

    def first(self) -> str:
        server = self.servers[self._next % len(self.servers)]
        self._next += 1
        return server


def at_leader(
    bootstrap: Bootstrap,
    send: Callable[[str], R],
    redirect: Callable[[R], tuple[int, int, str, int] | None],
) -> R:
    """`send` to the next bootstrap server, then to the leader each NOT_LEADER_OR_FOLLOWER
    answer names. `redirect(answer)` is None for an answer to keep, else (error, leader id,
    leader endpoint, leader epoch) of a NOT_LEADER_OR_FOLLOWER answer."""
    target = bootstrap.first()
    for _ in range(MAX_LEADER_HOPS):
        answer = send(target)
        hint = redirect(answer)
        if hint is None:
            return answer
        _, leader_id, leader_endpoint, epoch = hint
        if leader_id < 0 or not leader_endpoint:
            raise Retryable(f"no leader is known at {target} (epoch {epoch})")
        target = leader_endpoint
    raise Retryable("the leader moved while being looked up")


def describe_quorum(
    bootstrap: str, retry_for_s: float | None = None, tls: TlsConfig | None = None
) -> pb.DescribeQuorumResponse:
    """DescribeQuorum at the leader, found from any of the `bootstrap` servers
    (`HOST:PORT[,...]`); retried while there is none."""

    def send(target: str) -> pb.DescribeQuorumResponse:
        resp = call(target, "DescribeQuorum", pb.DescribeQuorumRequest(), tls)
        assert isinstance(resp, pb.DescribeQuorumResponse)
        if resp.error_code not in (Errors.NONE, Errors.NOT_LEADER_OR_FOLLOWER):
            raise QuorumError(f"{target}: {error_name(resp.error_code)}: {resp.error_message}")
        return resp

    def redirect(resp: pb.DescribeQuorumResponse) -> tuple[int, int, str, int] | None:
        if resp.error_code == Errors.NONE:
            return None
        return resp.error_code, resp.leader_id, resp.leader_endpoint, resp.leader_epoch

    wait_s = RETRY_FOR_S if retry_for_s is None else retry_for_s
    servers = Bootstrap(bootstrap)
    started = time.monotonic()

    def attempt() -> pb.DescribeQuorumResponse:
        try:
            return at_leader(servers, send, redirect)
        except Retryable:
            if time.monotonic() - started >= SETTLE_S:
                view = node_view(servers.servers, tls)
                if view is not None and view.majority_lost:
                    raise NoLeader(f"no leader answers: {view.text()}", view.facts()) from None
            raise

    try:
        return retrying(attempt, wait_s)
    except GaveUp as exc:
        view = node_view(servers.servers, tls)
        if view is None:
            raise
        raise NoLeader(f"{exc}; {view.text()}", view.facts()) from exc


def node_view(servers: Sequence[str], tls: TlsConfig | None) -> NodeView | None:
    """The first of `servers` to answer NodeStatus, quickly; None if none does."""
    for server in servers:
        try:
            status = call(server, "NodeStatus", pb.NodeStatusRequest(), tls, STATUS_TIMEOUT_S)
        except (QuorumError, Retryable):  # unreachable, or not a node of this release
            continue
        assert isinstance(status, pb.NodeStatusResponse)
        return NodeView(server, status)
    return None


def node_status(node: str, tls: TlsConfig | None = None) -> pb.NodeStatusResponse:
    try:
        resp = call(node, "NodeStatus", pb.NodeStatusRequest(), tls)
    except Retryable as exc:
        raise QuorumError(str(exc)) from exc
    assert isinstance(resp, pb.NodeStatusResponse)
    return resp


@dataclass
class VoterChange:
    """The leader's answer to a voter change, and how many nodes answered the request on the
    way: more than one means an earlier one may have taken it before leadership moved."""

    response: pb.VoterChangeResponse
    answers: int = 0


def change_voters(
    bootstrap: str, method: str, request: object, tls: TlsConfig | None = None,
    retry_for_s: float | None = None, timeout_s: float = CHANGE_TIMEOUT_S,
) -> VoterChange:
    """AddRaftVoter or RemoveRaftVoter at the leader; the leader's answer, whatever its
    error (the caller explains it). Sent again only to the leader a NOT_LEADER_OR_FOLLOWER
    answer names, or when nothing was delivered: a request without an answer is never
    resent (Unanswered)."""
    change = VoterChange(pb.VoterChangeResponse())

    def send(target: str) -> pb.VoterChangeResponse:
        resp = call(target, method, request, tls, timeout_s, idempotent=False)
        assert isinstance(resp, pb.VoterChangeResponse)
        change.response = resp
        change.answers += 1
        return resp

    def redirect(resp: pb.VoterChangeResponse) -> tuple[int, int, str, int] | None:
        if resp.error_code != Errors.NOT_LEADER_OR_FOLLOWER:
            return None
        return resp.error_code, resp.leader_id, resp.leader_endpoint, resp.leader_epoch

    wait_s = RETRY_FOR_S if retry_for_s is None else retry_for_s
    servers = Bootstrap(bootstrap)
    retrying(lambda: at_leader(servers, send, redirect), wait_s)
    return change
