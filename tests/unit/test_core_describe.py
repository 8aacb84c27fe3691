"""describe_quorum (spec §2.6): the leader's view of voters and observers."""

from __future__ import annotations

import pytest
from core_harness import Harness, fetch_request, leader

from kraft.core.errors import NotLeaderError
from kraft.core.messages import ReplicaDescription
from kraft.election_state import ElectionState


def by_id(replicas: tuple[ReplicaDescription, ...]) -> dict[int, ReplicaDescription]:
    return {r.replica_id: r for r in replicas}


def test_voters_and_observers_with_their_progress() -> None:
    h = leader()
    t0 = h.now
    h.advance_to(t0 + 100)
    h.deliver(fetch_request(2, 1, 1, 1))
    h.advance_to(t0 + 200)
    h.deliver(fetch_request(7, 1, 0, 0))  # an observer, behind
    d = h.core.describe_quorum(h.now)
    assert (d.leader_id, d.leader_epoch, d.high_watermark) == (1, 1, 1)
    assert [v.replica_id for v in d.voters] == [1, 2, 3]
    voters = by_id(d.voters)
    assert voters[1].log_end_offset == 1
    assert voters[2] == ReplicaDescription(2, 1, t0 + 100, t0 + 100, "", "node2.test:9093")
    assert voters[3] == ReplicaDescription(3, -1, -1, -1, "", "node3.test:9093")  # unheard
    assert d.observers == (ReplicaDescription(7, 0, t0 + 200, -1),)


def test_high_watermark_is_minus_one_until_the_epoch_commits() -> None:
    h = leader()
    assert h.core.describe_quorum(h.now).high_watermark == -1


def test_last_caught_up_timestamp_rules() -> None:
    h = leader()
    t0 = h.now
    # Voter 2 reaches the leader's end (1) at t0+100: caught up then.
    h.advance_to(t0 + 100)
    h.deliver(fetch_request(2, 1, 1, 1))
    # The leader grows to 3 at t0+150.
    h.advance_to(t0 + 150)
    h.append([b"a", b"b"])
    h.flush()
    # Voter 3 fetches at offset 1 at t0+200: behind the leader's 3, never caught up.
    h.advance_to(t0 + 200)
    h.deliver(fetch_request(3, 1, 1, 1))
    assert by_id(h.core.describe_quorum(h.now).voters)[3].last_caught_up_timestamp_ms == -1
    # The leader grows to 5 at t0+250.
    h.advance_to(t0 + 250)
    h.append([b"c", b"d"])
    h.flush()
    # Voter 3 fetches 3 at t0+300: behind 5, but it reached the end the leader had at its
    # previous fetch (3), so it was caught up as of that previous fetch (t0+200).
    h.advance_to(t0 + 300)
    h.deliver(fetch_request(3, 1, 3, 1))
    voter3 = by_id(h.core.describe_quorum(h.now).voters)[3]
    assert (voter3.log_end_offset, voter3.last_fetch_timestamp_ms) == (3, t0 + 300)
    assert voter3.last_caught_up_timestamp_ms == t0 + 200
    # Voter 2 fetches 5 at t0+400: at the end, caught up now.
    h.advance_to(t0 + 400)
    h.deliver(fetch_request(2, 1, 5, 1))
    voter2 = by_id(h.core.describe_quorum(h.now).voters)[2]
    assert voter2.last_caught_up_timestamp_ms == t0 + 400
    # A lagging fetch never moves lastCaughtUp backwards.
    h.advance_to(t0 + 500)
    h.deliver(fetch_request(2, 1, 1, 1))
    voter2 = by_id(h.core.describe_quorum(h.now).voters)[2]
    assert voter2.last_caught_up_timestamp_ms == t0 + 400
    assert voter2.log_end_offset == 1


def test_observers_expire_after_five_minutes_without_a_fetch() -> None:
    h = leader()
    t0 = h.now
    h.deliver(fetch_request(7, 1, 1, 1))
    while h.now < t0 + 300_000 - 1000:
        h.advance(1000)
        h.deliver(fetch_request(2, 1, 1, 1))  # keeps the leader in office
    h.advance_to(t0 + 300_000 - 1)
    assert [o.replica_id for o in h.core.describe_quorum(h.now).observers] == [7]
    h.advance_to(t0 + 300_000)
    h.deliver(fetch_request(2, 1, 1, 1))
    assert h.state == "Leader"
    assert h.core.describe_quorum(h.now).observers == ()


@pytest.mark.parametrize(
    "persisted",
    [ElectionState(5), ElectionState(5, leader_id=2), ElectionState(5, voted_id=1),
     ElectionState(5, leader_id=1)],
    ids=["unattached", "follower", "candidate", "resigned"],
)
def test_non_leader_refuses(persisted: ElectionState) -> None:
    h = Harness(1, persisted=persisted)
    with pytest.raises(NotLeaderError):
        h.core.describe_quorum(h.now)
