"""KIP-853 in the core: replica keys, the voter set in the log, Add/Remove/UpdateRaftVoter
(../shared/reference/kraft-dynamic-quorum.md; the T-numbers are its test scenarios)."""

from __future__ import annotations

import pytest

from kraft.core.errors import Errors, RaftInvariantError
from kraft.core.messages import (
    AddRaftVoterRequest,
    ApiVersionsRequest,
    ApiVersionsResponse,
    EndQuorumEpochRequest,
    FetchRequest,
    FetchResponse,
    RemoveRaftVoterRequest,
    UpdateRaftVoterRequest,
    VoterChangeResponse,
    VoteRequest,
)
from kraft.core.voters import (
    BOOTSTRAP_OFFSET,
    ReplicaKey,
    SnapshotVoters,
    VoterNode,
    VoterSet,
    control_records_for,
)
from kraft.election_state import ElectionState
from kraft.log.base import OffsetAndEpoch
from kraft.log.codec import KRAFT_VERSION, KRAFT_VOTERS, decode_control_record, encode_batch
from tests.unit.core_harness import (
    CLUSTER_ID,
    MAX_BYTES,
    Harness,
    batches,
    endpoint,
    fetch_response,
    make_log,
    vote_request,
    vote_response,
)

DIR = {i: f"dir-{i}-aaaaaaaaaaaaaa" for i in range(1, 8)}
NEW_DISK = "dir-new-bbbbbbbbbbbbbb"


def voter_set(*ids: int) -> VoterSet:
    return VoterSet.of(VoterNode(ReplicaKey(i, DIR[i]), endpoint(i)) for i in ids)


def node(node_id: int, voters: tuple[int, ...] = (1,), **config: object) -> Harness:
    """A controller of a dynamic quorum whose bootstrap snapshot holds `voters`."""
    return Harness(
        node_id, voter_ids=(), directory_id=DIR[node_id], controller=True,
        bootstrap=((-2, endpoint(1)),),
        snapshot_voters=SnapshotVoters(BOOTSTRAP_OFFSET, 1, voter_set(*voters)), **config,
    )


def fetch(replica: int, epoch: int, offset: int, last_epoch: int,
          directory: str | None = None) -> FetchRequest:
    return FetchRequest(CLUSTER_ID, replica, epoch, offset, last_epoch, 0, MAX_BYTES, -1,
                        DIR[replica] if directory is None else directory)


def add(voter: int, directory: str | None = None) -> AddRaftVoterRequest:
    return AddRaftVoterRequest(CLUSTER_ID, voter, DIR[voter] if directory is None else directory,
                               endpoint(voter))


def remove(voter: int, directory: str | None = None) -> RemoveRaftVoterRequest:
    return RemoveRaftVoterRequest(CLUSTER_ID, voter,
                                  DIR[voter] if directory is None else directory)


def elected(voters: tuple[int, ...]) -> Harness:
    """Node 1 leads a dynamic quorum of `voters`, its first batches committed."""
    h = node(1, voters)
    if h.state != "Leader":
        h.run_until(lambda: h.state == "Prospective")
        for round_ in ("pre-vote", "vote"):
            for out in h.sent(VoteRequest):
                assert out.request.voter_directory_id == DIR[out.destination], round_
                h.respond(out, vote_response(h.epoch, True))
    assert h.state == "Leader"
    h.flush()
    for voter in voters[1:]:
        h.deliver(fetch(voter, h.epoch, h.log.end_offset, h.epoch))
    assert h.hw == h.log.end_offset
    h.clear_outbox()
    return h


def caught_up_observer(h: Harness, node_id: int, directory: str | None = None) -> None:
    h.deliver(fetch(node_id, h.epoch, 0, 0, directory))
    h.deliver(fetch(node_id, h.epoch, h.log.end_offset, h.epoch, directory))


def probe_answer(h: Harness, voter: int, directory: str | None = None,
                 node_id: int | None = None, max_kraft_version: int = 1) -> None:
    """The new voter answers the leader's ApiVersions (KIP-853's reachability check)."""
    h.respond(h.only(ApiVersionsRequest, to=voter), ApiVersionsResponse(
        Errors.NONE, voter if node_id is None else node_id,
        DIR[voter] if directory is None else directory, 0, max_kraft_version,
    ))


def add_voter(h: Harness, voter: int) -> int:
    token = h.deliver_async(add(voter))
    probe_answer(h, voter)
    return token


def answer(h: Harness, token: int) -> VoterChangeResponse:
    reply = h.reply_for(token)
    assert isinstance(reply, VoterChangeResponse), reply
    return reply


# -- the voter set in the log ---------------------------------------------------------------


def test_a_standalone_controller_leads_and_copies_its_bootstrap_set_into_the_log() -> None:
    h = node(1)
    assert h.state == "Leader"
    kinds = [decode_control_record(r)[0] for b in batches(h.log.read(0, MAX_BYTES, 99))
             for r in b.records]
    assert kinds == [2, KRAFT_VERSION, KRAFT_VOTERS]  # LeaderChange, then the set (T20)
    h.flush()
    assert h.hw == 3
    assert h.core.kraft_version == 1
    assert h.core.voter_history.latest_offset() == 2
    d = h.core.describe_quorum(h.now)
    assert [(v.replica_id, v.directory_id) for v in d.voters] == [(1, DIR[1])]
    assert d.kraft_version == 1


def test_a_static_quorum_has_kraft_version_0_and_refuses_changes() -> None:
    h = Harness(1, voter_ids=(1,))
    h.flush()
    assert h.core.kraft_version == 0
    reply = h.deliver(add(2))
    assert isinstance(reply, VoterChangeResponse)
    assert reply.error == Errors.UNSUPPORTED_VERSION  # T7
    assert h.core.snapshot_control_records(h.log.end_offset) == []


def test_add_commits_on_the_new_set_and_answers_then() -> None:
    h = elected((1,))
    caught_up_observer(h, 2)
    token = h.deliver_async(add(2))
    assert h.core.voters.ids == {1}  # first: who answers at its endpoint (check 10)
    probe_answer(h, 2)
    assert h.reply_for(token) is None  # waits for the commit
    assert h.core.voters.ids == {1, 2}  # in effect from the append (R2.3)
    record = h.core.voter_history.latest_offset()
    assert record is not None
    h.flush()
    assert h.hw <= record  # the leader alone is no longer a majority
    h.deliver(fetch(2, h.epoch, h.log.end_offset, h.epoch))
    assert h.hw > record
    assert answer(h, token).error == Errors.NONE


def test_add_is_refused_by_kafkas_rules() -> None:
    h = elected((1, 2, 3))
    cases = [
        (add(4, directory=""), Errors.INVALID_REQUEST),  # T9
        (AddRaftVoterRequest(CLUSTER_ID, 4, DIR[4], "no-port"), Errors.INVALID_REQUEST),
        (add(3, directory=NEW_DISK), Errors.DUPLICATE_VOTER),  # T8
        (AddRaftVoterRequest("other", 4, DIR[4], endpoint(4)), Errors.INCONSISTENT_CLUSTER_ID),
    ]
    for request, error in cases:
        reply = h.deliver(request)
        assert isinstance(reply, VoterChangeResponse) and reply.error == error, request
        assert not h.sent(ApiVersionsRequest)  # refused before asking anyone (T9)
    probed: list[tuple[dict[str, object], Errors]] = [
        ({}, Errors.REQUEST_TIMED_OUT),  # it never fetched: not caught up (T11)
        ({"max_kraft_version": 0}, Errors.INVALID_REQUEST),  # T10
        ({"directory": NEW_DISK}, Errors.INVALID_REQUEST),  # another disk at that endpoint
    ]
    for answered, error in probed:
        token = h.deliver_async(add(4))
        probe_answer(h, 4, **answered)  # type: ignore[arg-type]
        assert answer(h, token).error == error, answered
    token = h.deliver_async(add(4))
    h.fail(h.only(ApiVersionsRequest, to=4), unreachable=True)
    assert answer(h, token).error == Errors.REQUEST_TIMED_OUT
    assert h.core.voters.ids == {1, 2, 3}  # nothing appended


def test_an_api_versions_answer_from_another_node_is_ignored() -> None:
    h = elected((1, 2, 3))
    caught_up_observer(h, 4)
    token = h.deliver_async(add(4))
    probe_answer(h, 4, node_id=5)  # T12
    assert h.reply_for(token) is None and h.core.voters.ids == {1, 2, 3}
    h.advance(h.config.request_timeout_ms)
    assert answer(h, token).error == Errors.REQUEST_TIMED_OUT


def test_every_node_says_who_it_is() -> None:
    reply = node(3, (1, 2, 3)).deliver(ApiVersionsRequest())
    assert reply == ApiVersionsResponse(Errors.NONE, 3, DIR[3], 0, 1)


def test_one_change_at_a_time() -> None:
    h = elected((1, 2, 3))
    caught_up_observer(h, 4)
    caught_up_observer(h, 5)
    first = add_voter(h, 4)
    second = h.deliver(add(5))  # T4
    assert isinstance(second, VoterChangeResponse) and second.error == Errors.REQUEST_TIMED_OUT
    h.flush()
    for voter in (2, 3, 4):
        h.deliver(fetch(voter, h.epoch, h.log.end_offset, h.epoch))
    assert answer(h, first).error == Errors.NONE
    h.deliver(fetch(5, h.epoch, h.log.end_offset, h.epoch))
    token = add_voter(h, 5)
    assert h.reply_for(token) is None and h.core.voters.ids == {1, 2, 3, 4, 5}


def test_a_change_before_the_epoch_commits_waits() -> None:
    h = node(1, (1, 2, 3))
    h.run_until(lambda: h.state == "Prospective")
    for _ in range(2):
        for out in h.sent(VoteRequest):
            h.respond(out, vote_response(h.epoch, True))
    assert h.state == "Leader"
    reply = h.deliver(remove(3))  # T6
    assert isinstance(reply, VoterChangeResponse) and reply.error == Errors.REQUEST_TIMED_OUT


def test_a_timed_out_add_stays_and_commits_later() -> None:
    h = elected((1,))
    caught_up_observer(h, 2)
    token = add_voter(h, 2)
    h.flush()
    h.advance(h.config.request_timeout_ms)
    reply = answer(h, token)
    assert reply.error == Errors.REQUEST_TIMED_OUT and "describe" in reply.error_message
    assert h.core.voters.ids == {1, 2}  # no rollback (R4.3, T24)
    blocked = h.deliver(remove(2))
    assert isinstance(blocked, VoterChangeResponse)
    assert blocked.error == Errors.REQUEST_TIMED_OUT  # the record has not committed
    h.deliver(fetch(2, h.epoch, h.log.end_offset, h.epoch))
    assert h.hw == h.log.end_offset


def test_losing_leadership_answers_a_pending_change() -> None:
    h = elected((1, 2, 3))
    caught_up_observer(h, 4)
    token = add_voter(h, 4)
    h.deliver(vote_request(2, h.epoch + 1, h.epoch, h.log.end_offset))
    assert h.state != "Leader"
    assert answer(h, token).error == Errors.NOT_LEADER_OR_FOLLOWER  # T17


def test_remove_a_follower_and_wrong_keys() -> None:
    h = elected((1, 2, 3))
    for request in (remove(3, directory=NEW_DISK), remove(7)):
        reply = h.deliver(request)  # T16
        assert isinstance(reply, VoterChangeResponse) and reply.error == Errors.VOTER_NOT_FOUND
    token = h.deliver_async(remove(3))
    assert h.core.voters.ids == {1, 2}
    h.flush()
    h.deliver(fetch(2, h.epoch, h.log.end_offset, h.epoch))  # 3 is not needed (T13)
    assert answer(h, token).error == Errors.NONE
    described = h.core.describe_quorum(h.now)
    assert [o.replica_id for o in described.observers] == [3]


def test_the_only_voter_cannot_be_removed() -> None:
    h = elected((1,))
    reply = h.deliver(remove(1))
    assert isinstance(reply, VoterChangeResponse) and reply.error == Errors.VOTER_NOT_FOUND


def test_a_leader_that_removes_itself_resigns_once_committed_and_stays_an_observer() -> None:
    h = elected((1, 2, 3))
    token = h.deliver_async(remove(1))  # T15
    h.flush()
    h.deliver(fetch(2, h.epoch, h.log.end_offset, h.epoch))
    assert h.reply_for(token) is None  # a majority of {2, 3} is both of them
    assert h.state == "Leader"
    h.deliver(fetch(3, h.epoch, h.log.end_offset, h.epoch))
    assert answer(h, token).error == Errors.NONE
    assert h.state == "Resigned"
    assert h.destinations(EndQuorumEpochRequest) == {2, 3}
    epoch = h.epoch
    h.run_until(lambda: h.epoch > epoch)
    assert h.state == "Unattached" and not h.core.status().is_voter
    h.advance(10 * h.config.election_timeout_ms)
    assert h.state != "Prospective" and h.epoch == epoch + 1  # never stands again


# -- replica keys: a replaced disk --------------------------------------------------------------


def test_a_replaced_disk_is_an_observer_whose_fetches_count_for_nothing() -> None:
    h = elected((1, 2, 3))
    h.append([b"x"])
    h.flush()
    h.deliver(fetch(2, h.epoch, h.log.end_offset, h.epoch, directory=NEW_DISK))  # T18
    assert h.hw < h.log.end_offset
    described = h.core.describe_quorum(h.now)
    assert [(o.replica_id, o.directory_id) for o in described.observers] == [(2, NEW_DISK)]
    h.deliver(fetch(2, h.epoch, h.log.end_offset, h.epoch))
    assert h.hw == h.log.end_offset


def test_vote_and_begin_epoch_for_another_key_grant_nothing() -> None:
    h = node(2, (1, 2, 3))
    request = VoteRequest(CLUSTER_ID, 1, 1, 0, 0, False, 2, DIR[1], NEW_DISK)
    reply = h.deliver(request)
    assert reply is not None and reply.error == Errors.INVALID_VOTER_KEY
    assert not h.persisted.has_voted
    granted = h.deliver(VoteRequest(CLUSTER_ID, 3, 2, 0, 0, False, 2, DIR[3], DIR[2]))
    assert granted is not None and granted.vote_granted  # type: ignore[union-attr]


def test_a_node_whose_disk_was_replaced_never_stands() -> None:
    h = Harness(
        2, voter_ids=(), directory_id=NEW_DISK, controller=True, bootstrap=((-2, endpoint(1)),),
        snapshot_voters=SnapshotVoters(BOOTSTRAP_OFFSET, 1, voter_set(1, 2, 3)),
    )
    h.advance(10 * h.config.election_timeout_ms)
    assert h.state == "Unattached" and not h.core.status().is_voter
    assert not h.sent(VoteRequest)


# -- followers: uncommitted sets are used, truncation reverts them ----------------------------


def _voters_batch(base: int, epoch: int, voters: VoterSet) -> bytes:
    return encode_batch(base, epoch, control_records_for(1, voters), 0, control=True)


def test_a_follower_uses_an_appended_set_and_reverts_it_on_truncation() -> None:
    h = node(2, (1, 2, 3), persisted=ElectionState(5, leader_id=1))
    assert h.state == "Follower"
    records = encode_batch(0, 5, [b"a"], 0) + _voters_batch(1, 5, voter_set(1, 2, 3, 4))
    h.respond(h.only(FetchRequest), fetch_response(1, 5, records))
    assert h.core.voters.ids == {1, 2, 3, 4}  # uncommitted, in effect (R2.3)
    h.flush()
    h.respond(h.only(FetchRequest), fetch_response(1, 5, diverging=OffsetAndEpoch(1, 5)))
    assert h.core.voters.ids == {1, 2, 3}  # T22


def test_a_set_that_changes_two_voters_at_once_is_fatal() -> None:
    h = node(2, (1, 2, 3), persisted=ElectionState(5, leader_id=1))
    records = encode_batch(0, 5, [b"a"], 0) + _voters_batch(1, 5, voter_set(1, 2, 3))
    h.respond(h.only(FetchRequest), fetch_response(1, 5, records))
    h.flush()
    bad = _voters_batch(3, 5, voter_set(1, 4, 5))
    with pytest.raises(RaftInvariantError, match="more than one voter"):  # T23
        h.respond(h.only(FetchRequest), fetch_response(1, 5, bad))


def test_a_controller_observer_flushes_before_it_fetches() -> None:
    h = node(4, (1, 2, 3), persisted=ElectionState(5, leader_id=1))
    assert h.state == "Follower" and not h.core.status().is_voter
    h.respond(h.only(FetchRequest), fetch_response(1, 5, encode_batch(0, 5, [b"a"], 0)))
    assert not h.sent(FetchRequest)  # its fetch offset may count once it is added (R3.7)
    h.flush()
    assert h.only(FetchRequest).request.fetch_offset == 1


# -- snapshots and UpdateRaftVoter -----------------------------------------------------------------


def test_snapshots_carry_the_set_in_effect_at_their_end() -> None:
    h = elected((1,))
    before = h.log.end_offset
    caught_up_observer(h, 2)
    add_voter(h, 2)
    after = h.log.end_offset

    def ids(records: list[bytes]) -> set[int]:
        bodies = [decode_control_record(r) for r in records]
        voters = [VoterSet.from_record(b) for k, b in bodies if k == KRAFT_VOTERS]
        return set(voters[0].ids)

    assert ids(h.core.snapshot_control_records(before)) == {1}
    assert ids(h.core.snapshot_control_records(after)) == {1, 2}


def test_a_voter_whose_endpoint_moved_asks_the_leader_to_update_it() -> None:
    h = node(2, (1, 2, 3), persisted=ElectionState(5, leader_id=1))
    old = VoterSet.of([*voter_set(1, 3), VoterNode(ReplicaKey(2, DIR[2]), "old.test:9093")])
    h.respond(h.only(FetchRequest), fetch_response(1, 5, encode_batch(0, 5, [b"a"], 0) +
                                                   _voters_batch(1, 5, old)))
    h.flush()
    while not h.sent(UpdateRaftVoterRequest):  # within its check period (3 fetch timeouts)
        assert h.now < 3 * h.config.fetch_timeout_ms + 1000
        h.advance(400)
        h.respond(h.only(FetchRequest), fetch_response(1, 5))
    sent = h.only(UpdateRaftVoterRequest)  # in place of the Fetch (R6.2)
    assert sent.request.endpoint == endpoint(2) and sent.request.current_leader_epoch == 5
    h.respond(sent, VoterChangeResponse(Errors.NONE, 1, 5))
    assert h.only(FetchRequest)  # then fetching goes on, the check waits its period
    h.respond(h.only(FetchRequest), fetch_response(1, 5))
    assert not h.sent(UpdateRaftVoterRequest)
    leader = elected((1, 2, 3))
    update = UpdateRaftVoterRequest(CLUSTER_ID, leader.epoch, 2, DIR[2], "moved.test:9093")
    reply = leader.deliver(update)
    assert isinstance(reply, VoterChangeResponse) and reply.error == Errors.NONE  # at once (T19)
    assert leader.core.voters.endpoint(2) == "moved.test:9093"
    stale = leader.deliver(UpdateRaftVoterRequest(CLUSTER_ID, leader.epoch, 2, NEW_DISK, "x:1"))
    assert isinstance(stale, VoterChangeResponse)
    assert stale.error in (Errors.REQUEST_TIMED_OUT, Errors.VOTER_NOT_FOUND)


def test_fetch_responses_are_unchanged_for_observers_without_ids() -> None:
    h = elected((1,))
    reply = h.deliver(FetchRequest(CLUSTER_ID, -1, h.epoch, 0, 0, 0, MAX_BYTES))
    assert isinstance(reply, FetchResponse) and reply.error == Errors.NONE


def test_a_replaced_disk_told_it_leads_its_old_epoch_waits_for_a_later_one() -> None:
    # Its old disk led epoch 1; the new one learned epoch 1 from a Vote (disk_loss seed 15).
    h = Harness(
        1, voter_ids=(), directory_id=NEW_DISK, controller=True, bootstrap=((-2, endpoint(2)),),
        snapshot_voters=SnapshotVoters(BOOTSTRAP_OFFSET, 1, voter_set(1, 2, 3)),
    )
    h.deliver(VoteRequest(CLUSTER_ID, 2, 1, 0, 0, False, 1, DIR[2], DIR[1]))
    assert h.epoch == 1
    h.run_until(lambda: bool(h.sent(FetchRequest)))
    h.respond(h.sent(FetchRequest)[0],
              fetch_response(1, 1, error=Errors.NOT_LEADER_OR_FOLLOWER))
    assert h.state == "Unattached" and h.epoch == 1  # neither a crash nor following itself
    h.run_until(lambda: bool(h.sent(FetchRequest)))
    h.respond(h.sent(FetchRequest)[0], fetch_response(3, 2))
    assert (h.state, h.leader_id, h.epoch) == ("Follower", 3, 2)


def test_a_lone_leader_that_gains_a_voter_gives_it_a_whole_check_quorum_window() -> None:
    h = elected((1,))
    h.advance(10 * h.config.fetch_timeout_ms)  # alone for long: no check-quorum needed
    caught_up_observer(h, 2)
    add_voter(h, 2)
    h.advance(h.config.fetch_timeout_ms)
    assert h.state == "Leader"  # the new voter has 1.5 fetch timeouts to fetch
    h.advance(h.config.fetch_timeout_ms)
    assert h.state == "Resigned"  # it never did


def test_a_restart_with_log_records_below_the_snapshot_uses_the_snapshots_set() -> None:
    # Retention deletes whole segments: the log may start below the snapshot (sim seed 191).
    log = make_log((1, 1))
    log.append_as_leader(control_records_for(1, voter_set(1, 2, 3)), 1, 0, control=True)
    log.append_as_leader(control_records_for(1, voter_set(1, 2, 3, 4)), 1, 0, control=True)
    log.append_as_leader([b"x"], 1, 0)
    snapshot = SnapshotVoters(log.end_offset - 1, 1, voter_set(1, 2, 3, 4))
    log.append_as_leader(control_records_for(1, voter_set(1, 2, 4)), 1, 0, control=True)
    log.flush()
    h = Harness(2, voter_ids=(), directory_id=DIR[2], controller=True, log=log,
                bootstrap=((-2, endpoint(1)),), snapshot_voters=snapshot)
    assert h.core.voters.ids == {1, 2, 4}  # the snapshot's set, then the log after it
    assert [o for o, _ in h.core.voter_history.entries()] == [snapshot.offset, 7]


def test_a_leader_whose_timed_out_removal_commits_later_resigns() -> None:
    h = elected((1, 2, 3))
    token = h.deliver_async(remove(1))
    h.flush()
    h.advance(h.config.request_timeout_ms)
    assert answer(h, token).error == Errors.REQUEST_TIMED_OUT
    h.deliver(fetch(2, h.epoch, h.log.end_offset, h.epoch))
    h.deliver(fetch(3, h.epoch, h.log.end_offset, h.epoch))  # the removal commits now
    assert h.state == "Resigned"  # sim seed 195 of remove_leader


# -- review findings ---------------------------------------------------------------------------


def test_an_observer_that_lost_its_leader_grants_pre_votes() -> None:
    # T1(a): 4's addition reached only 2 before leader 1 died; 2 needs 4's vote.
    h = node(4, (1, 2, 3), persisted=ElectionState(5, leader_id=1))
    h.respond(h.only(FetchRequest), fetch_response(1, 5))
    refused = h.deliver(vote_request(2, 5, 0, 0, pre_vote=True))
    assert refused is not None and not refused.vote_granted  # type: ignore[union-attr]
    h.advance(1000)
    h.fail(h.only(FetchRequest), timed_out=True)
    granted = h.deliver(vote_request(2, 5, 0, 0, pre_vote=True))
    assert granted is not None and granted.vote_granted  # type: ignore[union-attr]


def test_the_last_follower_of_a_leader_removing_itself_lets_the_removal_commit() -> None:
    h = node(2, (1, 2), persisted=ElectionState(5, leader_id=1))
    h.respond(h.only(FetchRequest), fetch_response(1, 5, encode_batch(0, 5, [b"a"], 0)))
    h.flush()
    h.respond(h.only(FetchRequest), fetch_response(1, 5, _voters_batch(1, 5, voter_set(2))))
    assert h.core.voters.ids == {2}
    h.flush()
    assert h.state == "Follower"  # its fetch acknowledges the removal to the live leader
    h.respond(h.only(FetchRequest), fetch_response(1, 5, high_watermark=3))
    assert h.state in ("Prospective", "Candidate", "Leader")  # committed: it leads alone


def test_removing_the_leader_of_two_voters_is_answered() -> None:
    h = elected((1, 2))
    token = h.deliver_async(remove(1))
    h.flush()
    h.deliver(fetch(2, h.epoch, h.log.end_offset, h.epoch))
    assert answer(h, token).error == Errors.NONE  # T15 with two voters
    assert h.state == "Resigned"


def test_a_leader_corrects_its_own_endpoint_at_the_start_of_its_epoch() -> None:
    stale = VoterSet.of([VoterNode(ReplicaKey(1, DIR[1]), "old-host:1111")])
    h = Harness(1, voter_ids=(), directory_id=DIR[1], controller=True,
                bootstrap=((-2, endpoint(1)),),
                snapshot_voters=SnapshotVoters(BOOTSTRAP_OFFSET, 1, stale))
    assert h.state == "Leader"
    assert h.core.voters.endpoint(1) == endpoint(1)  # R2.2: in its epoch-start batch


def test_a_change_sent_to_a_follower_names_the_leader() -> None:
    h = node(2, (1, 2, 3), persisted=ElectionState(5, leader_id=1))
    for request in (add(4), remove(3)):
        reply = h.deliver(request)  # T5
        assert isinstance(reply, VoterChangeResponse)
        assert (reply.error, reply.leader_id, reply.leader_endpoint) == (
            Errors.NOT_LEADER_OR_FOLLOWER, 1, endpoint(1))
