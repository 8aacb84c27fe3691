"""Check-quorum (spec §3.4): a leader that hears no Fetch from a majority of voters within
1.5 x fetch timeout resigns."""

from __future__ import annotations

from core_harness import Harness, fetch_request, leader

from kraft.core.messages import EndQuorumEpochRequest, FetchResponse
from kraft.core.states import NO_DEADLINE

WINDOW = 3000  # 1.5 x the default 2000 ms fetch timeout


def test_leader_that_hears_from_nobody_resigns_after_the_window() -> None:
    h = leader()
    elected = h.now
    h.advance_to(elected + WINDOW - 1)
    assert h.state == "Leader"
    h.advance_to(elected + WINDOW)
    assert (h.state, h.epoch, h.leader_id) == ("Resigned", 1, 1)
    assert h.destinations(EndQuorumEpochRequest) == {2, 3}
    # Resigned is memory only; the file still names it leader of the epoch.
    assert h.persist_log[-1].leader_id == 1


def test_check_quorum_deadline_is_a_wakeup() -> None:
    h = leader()
    assert h.core.next_deadline() <= h.now + WINDOW


def test_a_voter_fetch_restarts_the_window() -> None:
    h = leader()
    elected = h.now
    h.advance_to(elected + 2000)
    h.deliver(fetch_request(2, 1, 1, 1))
    h.advance_to(elected + 2000 + WINDOW - 1)
    assert h.state == "Leader"
    h.advance_to(elected + 2000 + WINDOW)
    assert h.state == "Resigned"


def test_regular_voter_fetches_keep_the_leader() -> None:
    h = leader()
    for _ in range(20):
        h.advance(1000)
        reply = h.deliver(fetch_request(3, 1, 1, 1))
        assert isinstance(reply, FetchResponse)
    assert h.state == "Leader"


def test_observer_fetches_do_not_count() -> None:
    h = leader()
    elected = h.now
    while h.now < elected + WINDOW - 500:
        h.advance(500)
        h.deliver(fetch_request(4, 1, 1, 1))
    h.advance_to(elected + WINDOW)
    assert h.state == "Resigned"


def test_five_voters_need_two_distinct_other_voters() -> None:
    h = leader(voter_ids=(1, 2, 3, 4, 5))
    elected = h.now
    while h.now < elected + WINDOW - 500:
        h.advance(500)
        h.deliver(fetch_request(2, 1, 1, 1))  # one voter, however often, is not a majority
    h.advance_to(elected + WINDOW)
    assert h.state == "Resigned"

    g = leader(voter_ids=(1, 2, 3, 4, 5))
    elected = g.now
    g.advance(1000)
    g.deliver(fetch_request(2, 1, 1, 1))
    g.advance(1000)
    g.deliver(fetch_request(5, 1, 1, 1))
    g.advance_to(elected + WINDOW + 1000)
    assert g.state == "Leader"


def test_invalid_fetches_do_not_count() -> None:
    h = leader()
    elected = h.now
    h.advance(1000)
    h.deliver(fetch_request(2, 2, 1, 1))  # UNKNOWN_LEADER_EPOCH
    h.deliver(fetch_request(3, 1, -1, 1))  # INVALID_REQUEST
    h.advance_to(elected + WINDOW)
    assert h.state == "Resigned"


def test_single_voter_leader_never_resigns() -> None:
    h = Harness(1, voter_ids=(1,))
    h.run_until(lambda: h.state == "Leader", limit_ms=2000)
    h.flush()
    h.advance(3_600_000)
    assert (h.state, h.epoch) == ("Leader", 1)
    assert h.core.next_deadline() == NO_DEADLINE
