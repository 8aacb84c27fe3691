"""The leader's high watermark (spec §2.4 "High-watermark advance"): a majority of voters'
acknowledged (fetch) offsets, observers excluded, the KIP-595 commit rule, monotonicity, and
a single voter following its own flushed end."""

from __future__ import annotations

from core_harness import Harness, fetch_request, fetch_response, leader, make_log, vote_response

from kraft.core.messages import FetchRequest, FetchResponse, VoteRequest
from kraft.election_state import ElectionState


def described_hw(h: Harness) -> int:
    return h.core.describe_quorum(h.now).high_watermark


def test_high_watermark_is_the_offset_a_majority_of_voters_holds() -> None:
    h = leader(voter_ids=(1, 2, 3, 4, 5))
    h.append([b"a", b"b"])
    h.flush()  # leader LEO 3
    h.deliver(fetch_request(2, 1, 3, 1))
    assert described_hw(h) == -1  # leader + one voter: two of five
    h.deliver(fetch_request(3, 1, 1, 1))
    assert (described_hw(h), h.hw) == (1, 1)  # 3, 3, 1: the third-highest is 1
    h.deliver(fetch_request(4, 1, 3, 1))
    assert (described_hw(h), h.hw) == (3, 3)
    assert h.last.high_watermark == 3


def test_observer_fetches_do_not_count() -> None:
    h = leader()
    for observer in (4, 5, 6):
        h.deliver(fetch_request(observer, 1, 1, 1))
    assert described_hw(h) == -1
    assert h.hw == 0
    h.deliver(fetch_request(2, 1, 1, 1))
    assert described_hw(h) == 1


def test_old_epoch_records_on_a_majority_do_not_commit_before_the_leader_change() -> None:
    # Old records 0-4 of epoch 1; elected in epoch 3, the LeaderChange record lands at 5.
    h = Harness(1, persisted=ElectionState(3, voted_id=1), log=make_log((1, 5)))
    h.respond(h.only(VoteRequest, to=2), vote_response(3, True))
    assert (h.state, h.core.state.epoch_start_offset) == ("Leader", 5)
    h.flush()
    reply = h.deliver(fetch_request(2, 3, 5, 1))  # voter 2 holds all of the old records
    assert isinstance(reply, FetchResponse)
    assert described_hw(h) == -1
    assert h.hw == 0
    h.deliver(fetch_request(2, 3, 6, 3))  # ... and now the LeaderChange record too
    assert described_hw(h) == 6
    assert h.hw == 6


def test_high_watermark_never_goes_back() -> None:
    h = leader()
    h.append([b"a", b"b"])
    h.flush()
    h.deliver(fetch_request(2, 1, 3, 1))
    assert h.hw == 3
    # Voter 2 comes back with less (it lost its disk, say): the HW stays.
    h.deliver(fetch_request(2, 1, 1, 1))
    assert (h.hw, described_hw(h)) == (3, 3)
    voter2 = next(v for v in h.core.describe_quorum(h.now).voters if v.replica_id == 2)
    assert voter2.log_end_offset == 1


def test_leader_counts_only_its_flushed_records() -> None:
    h = leader()
    h.deliver(fetch_request(2, 1, 1, 1))
    assert h.hw == 1
    h.append([b"a", b"b"])
    voter1 = next(v for v in h.core.describe_quorum(h.now).voters if v.replica_id == 1)
    assert voter1.log_end_offset == 1
    h.flush()
    voter1 = next(v for v in h.core.describe_quorum(h.now).voters if v.replica_id == 1)
    assert voter1.log_end_offset == 3


def test_single_voter_high_watermark_follows_its_flushed_end() -> None:
    h = Harness(1, voter_ids=(1,))
    h.run_until(lambda: h.state == "Leader", limit_ms=2000)
    assert h.hw == 0  # the LeaderChange record is not flushed yet
    h.flush()
    assert h.hw == 1
    assert h.last.high_watermark == 1
    last = h.append([b"a", b"b"])
    assert h.hw == 1
    h.flush()
    assert h.hw == last + 1 == 3


def test_new_leader_keeps_the_high_watermark_it_had_as_follower() -> None:
    h = Harness(1, persisted=ElectionState(5, leader_id=2), log=make_log((5, 3)))
    h.respond(h.only(FetchRequest, to=2), fetch_response(2, 5, high_watermark=3))
    assert h.hw == 3
    h.run_until(lambda: h.state == "Prospective")
    h.respond(h.only(VoteRequest, to=3), vote_response(5, True))
    h.respond(h.only(VoteRequest, to=3), vote_response(6, True))
    assert (h.state, h.epoch) == ("Leader", 6)
    h.flush()
    assert h.hw == 3  # never reported lower than before
    assert described_hw(h) == -1  # but its own epoch is not committed yet
    h.deliver(fetch_request(3, 6, 4, 6))
    assert h.hw == 4
