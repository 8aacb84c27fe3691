"""AddRaftVoter, RemoveRaftVoter and UpdateRaftVoter (KIP-853, spec sections 4 to 6): the
leader's checks, the VotersRecord it appends, and the answer once that record commits.

One change at a time (R7.4): a change is admitted only when none is pending, the previous
VotersRecord is committed and an entry of the leader's own epoch is committed. Each change adds
or removes one replica key, so the old and new sets have intersecting majorities and no joint
consensus is needed. A change is in effect from its append (the HW is counted on the new set),
and a timeout after the append does not roll it back (R4.3).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kraft.core.errors import Errors
from kraft.core.leader import LeaderState, PendingVoterChange
from kraft.core.messages import (
    AddRaftVoterRequest,
    ApiVersionsRequest,
    ApiVersionsResponse,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    VoterChangeRequest,
    VoterChangeResponse,
)
from kraft.core.states import FollowerState
from kraft.core.voters import SUPPORTED_KRAFT_VERSIONS, ReplicaKey, VoterNode, VoterSet

if TYPE_CHECKING:
    from kraft.core.connections import InFlight
    from kraft.core.context import HandlerContext

log = logging.getLogger(__name__)

# A voter checks every this many fetch timeouts that the leader has its endpoint (R6.2).
UPDATE_VOTER_PERIOD_FETCH_TIMEOUTS = 3


class Refusal(Exception):
    def __init__(self, error: Errors, message: str) -> None:
        super().__init__(message)
        self.error = error


def handle_request(
    core: HandlerContext, token: int, req: VoterChangeRequest, now: int
) -> VoterChangeResponse | None:
    """The answer now (a refusal, or an Update), or None: Add and Remove answer once the new
    voter set commits (`on_high_watermark`) or their deadline passes (`expire_pending`)."""
    try:
        leader = _check_leader(core, req)
        if isinstance(req, AddRaftVoterRequest):
            _probe(core, leader, token, req, now)
            return None
        if isinstance(req, RemoveRaftVoterRequest):
            voters = _removed(core, leader, req)
        else:
            voters = _updated(core, leader, req)
            if voters != core.voters:
                core.append_voters(voters, now)
            return _answer(core, Errors.NONE)  # Update answers at once (R6.3)
    except Refusal as refusal:
        return _answer(core, refusal.error, str(refusal))
    leader.pending_change = PendingVoterChange(
        token, req, _append(core, voters, now), now + core.config.request_timeout_ms
    )
    return None


def _append(core: HandlerContext, voters: VoterSet, now: int) -> int:
    offset = core.append_voters(voters, now)
    log.info("voter set change appended at offset %d: %s", offset, voters.describe())
    return offset


def _check_leader(core: HandlerContext, req: VoterChangeRequest) -> LeaderState:
    """Checks every change shares, in Kafka's order (4.1 checks 1 to 8)."""
    if not core.valid_cluster_id(req.cluster_id):
        raise Refusal(Errors.INCONSISTENT_CLUSTER_ID,
                      f"cluster id {req.cluster_id} is not {core.config.cluster_id}")
    if isinstance(req, UpdateRaftVoterRequest):
        if req.current_leader_epoch < core.epoch:
            raise Refusal(Errors.FENCED_LEADER_EPOCH, f"epoch {req.current_leader_epoch} is old")
        if req.current_leader_epoch > core.epoch:
            raise Refusal(Errors.UNKNOWN_LEADER_EPOCH, f"epoch {req.current_leader_epoch} is new")
    leader = core.quorum.state
    if not isinstance(leader, LeaderState):
        raise Refusal(Errors.NOT_LEADER_OR_FOLLOWER, _not_leader(core))
    if core.shutting_down or leader.resign_requested:
        raise Refusal(Errors.BROKER_NOT_AVAILABLE, "the leader is shutting down or resigning")
    if req.voter_id < 0 or not req.voter_directory_id:
        raise Refusal(Errors.INVALID_REQUEST,
                      "a voter change needs a node id >= 0 and its directory id")
    if not isinstance(req, RemoveRaftVoterRequest):
        _check_endpoint(req.endpoint)
        if not 0 <= req.min_kraft_version <= req.max_kraft_version:
            raise Refusal(Errors.INVALID_REQUEST,
                          f"invalid kraft.version range {req.min_kraft_version}.."
                          f"{req.max_kraft_version}")
    if leader.pending_change is not None:
        raise Refusal(Errors.REQUEST_TIMED_OUT,
                      "another voter change is still waiting to commit; try again later")
    if leader.high_watermark is None:
        raise Refusal(Errors.REQUEST_TIMED_OUT,
                      f"the leader of epoch {leader.epoch} has not committed an entry of its "
                      "epoch yet; try again shortly")
    if core.kraft_version < 1:
        raise Refusal(Errors.UNSUPPORTED_VERSION,
                      "kraft.version is 0 (a static quorum of controller.quorum.voters): "
                      "voters cannot change; format with --standalone or "
                      "--initial-controllers for a dynamic quorum")
    latest = core.voter_history.latest_offset()
    if latest is None or latest >= core.high_watermark:
        raise Refusal(Errors.REQUEST_TIMED_OUT,
                      "the previous voter change has not committed yet; try again shortly")
    if not isinstance(req, RemoveRaftVoterRequest) and not (
        req.min_kraft_version <= core.kraft_version <= req.max_kraft_version
    ):
        raise Refusal(Errors.INVALID_REQUEST,
                      f"node {req.voter_id} supports kraft.version {req.min_kraft_version}.."
                      f"{req.max_kraft_version}, not the finalized {core.kraft_version}")
    return leader


def _check_endpoint(endpoint: str) -> None:
    host, _, port = endpoint.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise Refusal(Errors.INVALID_REQUEST,
                      f"the voter's controller endpoint {endpoint!r} is not host:port")


def _node(req: AddRaftVoterRequest | UpdateRaftVoterRequest) -> VoterNode:
    return VoterNode(
        ReplicaKey(req.voter_id, req.voter_directory_id), req.endpoint, req.listener,
        req.min_kraft_version, req.max_kraft_version,
    )


def _probe(
    core: HandlerContext, leader: LeaderState, token: int, req: AddRaftVoterRequest, now: int
) -> None:
    """Checks 9 and 10: the id is no voter yet, then ask the new voter's endpoint who is
    there (ApiVersions); `on_api_versions` goes on with the answer."""
    voters = core.voters
    if req.voter_id in voters.ids:
        raise Refusal(Errors.DUPLICATE_VOTER,
                      f"node {req.voter_id} is already a voter (as {voters.key_of(req.voter_id)})")
    if not core.connections.is_ready(req.voter_id, now):
        raise Refusal(Errors.REQUEST_TIMED_OUT,
                      f"a request to node {req.voter_id} is already under way; try again shortly")
    leader.pending_change = PendingVoterChange(
        token, req, -1, now + core.config.request_timeout_ms
    )
    core.send(req.voter_id, req.endpoint, ApiVersionsRequest(), now)


def on_api_versions(
    core: HandlerContext, entry: InFlight, resp: ApiVersionsResponse, now: int
) -> None:
    """The new voter's answer (checks 11 to 15): from that replica, running the finalized
    kraft.version, caught up; then the VotersRecord is appended."""
    leader = core.quorum.state
    if not isinstance(leader, LeaderState):
        return
    pending = leader.pending_change
    req = pending.request if pending is not None else None
    if pending is None or pending.record_offset >= 0 or not isinstance(req, AddRaftVoterRequest):
        return
    if entry.destination != req.voter_id or resp.node_id != req.voter_id:
        log.warning("ApiVersions from %s answered for node %d, not %d: ignored", req.endpoint,
                    resp.node_id, req.voter_id)
        return  # the deadline ends the operation (T12)
    key = ReplicaKey(req.voter_id, req.voter_directory_id)
    refusal = None
    if resp.directory_id != req.voter_directory_id:
        refusal = Refusal(Errors.INVALID_REQUEST,
                          f"{req.endpoint} is node {resp.node_id} with directory id "
                          f"{resp.directory_id}, not {req.voter_directory_id}")
    elif not resp.min_kraft_version <= core.kraft_version <= resp.max_kraft_version:
        refusal = Refusal(Errors.INVALID_REQUEST,
                          f"node {req.voter_id} runs kraft.version {resp.min_kraft_version}.."
                          f"{resp.max_kraft_version}, not the finalized {core.kraft_version}")
    elif not leader.caught_up(key, now):
        refusal = Refusal(Errors.REQUEST_TIMED_OUT,
                          f"{key} is not a caught-up observer of this leader: start it "
                          "(formatted with --no-initial-controllers) and retry once it has "
                          "caught up")
    if refusal is not None:
        leader.pending_change = None
        core.reply_later(pending.token, _answer(core, refusal.error, str(refusal)))
        return
    node = VoterNode(key, req.endpoint, req.listener, resp.min_kraft_version,
                     resp.max_kraft_version)
    pending.record_offset = _append(core, core.voters.adding(node), now)


def on_failure(core: HandlerContext, entry: InFlight, now: int) -> None:
    """The ApiVersions request got no answer: the new voter is unreachable at its endpoint."""
    leader = core.quorum.state
    if not isinstance(entry.request, ApiVersionsRequest) or not isinstance(leader, LeaderState):
        return
    pending = leader.pending_change
    if pending is None or pending.record_offset >= 0 or (
        entry.destination != pending.request.voter_id
    ):
        return
    leader.pending_change = None
    core.reply_later(pending.token, _answer(
        core, Errors.REQUEST_TIMED_OUT,
        f"node {pending.request.voter_id} did not answer at its endpoint "
        f"{getattr(pending.request, 'endpoint', '')}: check its advertised controller listener",
    ))


def api_versions(core: HandlerContext) -> ApiVersionsResponse:
    """Any node answers who it is and which kraft.version range it supports."""
    key = core.local_key
    return ApiVersionsResponse(
        Errors.NONE, key.node_id if key is not None else -1,
        key.directory_id if key is not None else "",
        SUPPORTED_KRAFT_VERSIONS[0], SUPPORTED_KRAFT_VERSIONS[-1],
    )


def _removed(core: HandlerContext, leader: LeaderState, req: RemoveRaftVoterRequest) -> VoterSet:
    voters = core.voters
    key = ReplicaKey(req.voter_id, req.voter_directory_id)
    if voters.key_of(req.voter_id) != key:
        raise Refusal(Errors.VOTER_NOT_FOUND,
                      f"{key} is not a voter (the voters are {voters.describe()})")
    if len(voters) == 1:
        raise Refusal(Errors.VOTER_NOT_FOUND, f"{key} is the only voter and cannot be removed")
    return voters.removing(key)


def _updated(core: HandlerContext, leader: LeaderState, req: UpdateRaftVoterRequest) -> VoterSet:
    voters = core.voters
    key = ReplicaKey(req.voter_id, req.voter_directory_id)
    if voters.key_of(req.voter_id) != key:
        raise Refusal(Errors.VOTER_NOT_FOUND, f"{key} is not a voter")
    return voters.updating(_node(req))


def on_high_watermark(core: HandlerContext, leader: LeaderState) -> None:
    """The HW moved: a pending change whose record it passed is answered; a leader that
    removed itself resigns once that is committed (R5.2)."""
    hw = leader.high_watermark
    if hw is None:
        return
    pending = leader.pending_change
    if pending is not None and 0 <= pending.record_offset < hw:
        leader.pending_change = None
        core.reply_later(pending.token, _answer(core, Errors.NONE))
    latest = core.voter_history.latest_offset()
    if not leader.is_member and latest is not None and latest < hw:
        # Its removal committed, whether or not the request is still waiting for it (one
        # that timed out commits later, R4.3).
        log.info("this leader is no longer a voter (its removal committed); resigning")
        leader.resign_requested = True


def expire_pending(core: HandlerContext, leader: LeaderState, now: int) -> None:
    pending = leader.pending_change
    if pending is None or now < pending.deadline:
        return
    leader.pending_change = None
    if pending.record_offset < 0:
        message = (f"node {pending.request.voter_id} did not answer within "
                   f"{core.config.request_timeout_ms} ms; nothing was changed")
    else:
        message = (f"the new voter set at offset {pending.record_offset} has not committed "
                   f"within {core.config.request_timeout_ms} ms; it stays in the log and "
                   "commits once a majority of the new set holds it: run quorum describe "
                   "--status before retrying")
    core.reply_later(pending.token, _answer(core, Errors.REQUEST_TIMED_OUT, message))


def fail_pending(core: HandlerContext, former: LeaderState) -> None:
    """Leadership is gone: the next leader decides the record's fate (R4.4)."""
    if former.pending_change is not None:
        core.reply_later(former.pending_change.token, _answer(
            core, Errors.NOT_LEADER_OR_FOLLOWER,
            "leadership changed before the voter change committed: run quorum describe "
            "--status to see whether it did",
        ))
        former.pending_change = None


def _answer(core: HandlerContext, error: Errors, message: str = "") -> VoterChangeResponse:
    return VoterChangeResponse(
        error, core.leader_id, core.epoch, message, core.leader_endpoint()
    )


def _not_leader(core: HandlerContext) -> str:
    leader = core.leader_id
    return f"node {core.local_id} is not the leader; the leader is " + (
        f"{leader} at {core.leader_endpoint() or 'an unknown endpoint'}" if leader >= 0
        else "unknown"
    )


# -- the voter's side: UpdateRaftVoter ------------------------------------------------------------


def maybe_send_update(core: HandlerContext, state: FollowerState, now: int) -> bool:
    """A voter whose entry in the latest set lacks its current endpoint (it moved) tells the
    leader, in place of a Fetch, at most every few fetch timeouts (R6.2, KAFKA-17751)."""
    if now < state.update_voter_due or not core.connections.is_ready(state.leader_id, now):
        return False
    state.update_voter_due = now + UPDATE_VOTER_PERIOD_FETCH_TIMEOUTS * core.config.fetch_timeout_ms
    key = core.local_key
    endpoint = core.config.local_endpoint
    if key is None or not key.directory_id or not endpoint or core.kraft_version < 1:
        return False
    node = core.voters.nodes.get(key.node_id)
    if node is None or node.key != key or (
        (node.endpoint, node.listener) == (endpoint, core.config.listener)
    ):
        return False
    log.info("the voter set lists this node at %s, not %s: asking the leader to update it",
             node.endpoint, endpoint)
    core.send(state.leader_id, state.leader_endpoint, UpdateRaftVoterRequest(
        core.config.cluster_id, state.epoch, key.node_id, key.directory_id, endpoint,
        core.config.listener,
    ), now)
    return True


def handle_response(
    core: HandlerContext, entry: InFlight, resp: VoterChangeResponse, now: int
) -> None:
    if resp.error != Errors.NONE:
        log.warning("UpdateRaftVoter refused (%s): %s", resp.error.name, resp.error_message)
