"""Fetch (spec §2.4): the leader's validation, divergence, long poll and high watermark, and
the follower's truncation, append and fetch loop."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from kraft.core import rpc_fetch_snapshot
from kraft.core.errors import Errors, RaftInvariantError
from kraft.core.leader import LeaderState, ParkedFetch
from kraft.core.messages import FetchRequest, FetchResponse, FetchSnapshotRequest
from kraft.core.rpc_fetch_common import note_leader_answered, validate_leader_only
from kraft.core.states import FollowerState
from kraft.core.voters import ReplicaKey
from kraft.log.base import CorruptRecordError, LogAppendError, OffsetAndEpoch
from kraft.log.snapshot_format import BOOTSTRAP_SNAPSHOT_ID

if TYPE_CHECKING:
    from kraft.core.connections import InFlight
    from kraft.core.context import HandlerContext

log = logging.getLogger(__name__)


# -- leader side ---------------------------------------------------------------------------


def handle_request(
    core: HandlerContext, token: int, req: FetchRequest, now: int
) -> FetchResponse | None:
    """The response, or None when the fetch is parked (long poll) and answered later."""
    if not core.valid_cluster_id(req.cluster_id):
        return _error(core, Errors.INCONSISTENT_CLUSTER_ID)
    if (
        req.max_wait_ms < 0
        or req.fetch_offset < 0
        or req.last_fetched_epoch < 0
        or req.last_fetched_epoch > req.current_leader_epoch
        or req.max_bytes < 0
    ):
        return _error(core, Errors.INVALID_REQUEST)
    error = validate_leader_only(core, req.current_leader_epoch)
    if error is not None:
        return _error(core, error)
    if req.replica_id >= 0 and req.replica_id == core.local_id:
        log.error(
            "a Fetch claims this leader's own node id %d: is node.id %d configured on two "
            "nodes? Refused (INVALID_REQUEST)", req.replica_id, req.replica_id,
        )
        return _error(core, Errors.INVALID_REQUEST)
    leader = core.quorum.state
    assert isinstance(leader, LeaderState)
    key = ReplicaKey(req.replica_id, req.replica_directory_id)
    leader.note_voter_contact(key, now)

    snapshot_id = _snapshot_redirect(core, req.fetch_offset, req.last_fetched_epoch)
    if snapshot_id is not None:
        return _records(core, leader, b"", snapshot_id=snapshot_id)
    diverging = _divergence(core, req.fetch_offset, req.last_fetched_epoch)
    if diverging is not None:
        return _records(core, leader, b"", diverging=diverging)

    if leader.update_replica(key, req.fetch_offset, now, core.log.flushed_offset):
        core.note_leader_high_watermark(leader)
        complete_parked(core, leader, now)
    records = _read(core, req)
    if records or req.max_wait_ms == 0:
        return _records(core, leader, records)
    deadline = now + req.max_wait_ms
    if _hw_is_news(core, req):
        deadline = min(deadline, now + _hw_news_linger_ms(leader, req))
    leader.parked_fetches.append(ParkedFetch(token, req, deadline))
    return None


def _snapshot_redirect(core: HandlerContext, offset: int, epoch: int) -> OffsetAndEpoch | None:
    """The snapshot a fetcher must load first (Kafka's validateOffsetAndEpoch): an empty
    fetcher always starts from the latest snapshot, and a fetcher whose position the log no
    longer holds (below the log start, or in an epoch older than the oldest snapshot) too."""
    latest = core.snapshots.latest_id()
    if latest is None or latest == BOOTSTRAP_SNAPSHOT_ID:
        return None
    if offset == 0:
        return latest
    earliest = core.snapshots.earliest_id()
    assert earliest is not None
    start = core.log.start_offset
    if offset < start or (offset == start and epoch != earliest.epoch) or epoch < earliest.epoch:
        return latest
    return None


def _divergence(core: HandlerContext, offset: int, epoch: int) -> OffsetAndEpoch | None:
    """Kafka's validateOffsetAndEpoch: where the fetcher's log stops matching ours, if it does."""
    if offset == 0 and core.log.start_offset == 0:
        return None
    end = core.log.end_offset_for_epoch(epoch)
    if end.epoch != epoch or end.offset < offset:
        return end
    return None


def _read(core: HandlerContext, req: FetchRequest) -> bytes:
    # As in Kafka, the leader ships what it has not flushed yet: its own fsync and the
    # followers' run in parallel. Safe because the leader counts itself toward the high
    # watermark only up to its flushed offset, and a follower acknowledges only what it has
    # flushed; a record a crashed leader lost is an uncommitted one a follower may keep.
    max_bytes = min(req.max_bytes, core.config.fetch_max_bytes)
    return core.log.read(req.fetch_offset, max_bytes, core.log.end_offset)


# A Fetch that has only a newer high watermark to learn waits this long for records to carry
# along. A commit usually wakes a writer that appends at once: the answer then brings its
# records and the HW in one message, instead of an empty answer, another Fetch and then the
# records. Under load that halves the Fetch traffic and takes a round trip off every commit;
# when nothing is appended, the fetcher learns the HW this much later. An observer (a broker)
# serves the metadata it learns, so it waits 1 ms; a voter's HW only paces its own replay, so
# it waits long enough for a remote writer's next request (commit -> answer -> next append is
# 1-3 ms here): with 1 ms, 40 % of a follower's Fetch answers at one writer carried only the
# HW (docs/benchmarks.md, issue 17).
HW_NEWS_LINGER_MS = 1
VOTER_HW_NEWS_LINGER_MS = 5


def _hw_news_linger_ms(leader: LeaderState, req: FetchRequest) -> int:
    key = ReplicaKey(req.replica_id, req.replica_directory_id)
    return VOTER_HW_NEWS_LINGER_MS if leader.voter_set.is_voter(key) else HW_NEWS_LINGER_MS


def _hw_is_news(core: HandlerContext, req: FetchRequest) -> bool:
    """Followers learn the HW only from Fetch responses: a parked Fetch is answered (after
    HW_NEWS_LINGER_MS) when the fetcher's HW is behind ours, rather than after the long poll
    (newer Kafka sends it in the request too)."""
    return core.high_watermark > req.high_watermark


def _records(
    core: HandlerContext, leader: LeaderState, records: bytes,
    diverging: OffsetAndEpoch | None = None, snapshot_id: OffsetAndEpoch | None = None,
) -> FetchResponse:
    return FetchResponse(
        Errors.NONE,
        leader.local_id,
        leader.epoch,
        high_watermark=core.high_watermark,
        log_start_offset=core.log.start_offset,
        records=records,
        diverging_epoch=diverging,
        snapshot_id=snapshot_id,
        leader_endpoint=core.config.local_endpoint,
    )


def _error(core: HandlerContext, error: Errors) -> FetchResponse:
    return FetchResponse(
        error, core.leader_id, core.epoch, leader_endpoint=core.leader_endpoint()
    )


def complete_parked(core: HandlerContext, leader: LeaderState, now: int) -> None:
    """Answer parked fetches that now have data to read; one with only a newer high
    watermark to learn is answered when its linger (`_hw_news_linger_ms`) expires, unless data
    comes first."""
    if not leader.parked_fetches:
        return
    end = core.log.end_offset
    still: list[ParkedFetch] = []
    for parked in leader.parked_fetches:
        if parked.request.fetch_offset < end:
            core.reply_later(parked.token, _records(core, leader, _read(core, parked.request)))
            continue
        if _hw_is_news(core, parked.request):
            parked.deadline = min(parked.deadline, now + _hw_news_linger_ms(leader, parked.request))
        still.append(parked)
    leader.parked_fetches = still


def expire_parked(core: HandlerContext, leader: LeaderState, now: int) -> None:
    if not leader.parked_fetches:
        return
    still: list[ParkedFetch] = []
    for parked in leader.parked_fetches:
        if parked.deadline <= now:
            core.reply_later(parked.token, _records(core, leader, _read(core, parked.request)))
        else:
            still.append(parked)
    leader.parked_fetches = still


def fail_parked(core: HandlerContext, former: LeaderState) -> None:
    """Leadership is gone: every parked fetch learns so at once."""
    for parked in former.parked_fetches:
        core.reply_later(parked.token, _error(core, Errors.NOT_LEADER_OR_FOLLOWER))
    former.parked_fetches = []


# -- follower side ---------------------------------------------------------------------------


def maybe_send_fetch(core: HandlerContext, destination: int, endpoint: str, now: int) -> bool:
    """Send a Fetch unless one is in flight, the destination backs off, or (voters) the log
    holds unflushed records: the fetch offset is an acknowledgement and must be durable."""
    if core.connections.has_in_flight(FetchRequest):
        return False
    if not core.connections.is_ready(destination, now):
        return False
    if must_flush_first(core):
        return False
    core.send(
        destination,
        endpoint,
        FetchRequest(
            cluster_id=core.config.cluster_id,
            replica_id=core.local_id if core.local_id is not None else -1,
            current_leader_epoch=core.epoch,
            fetch_offset=core.log.end_offset,
            last_fetched_epoch=core.log.last_epoch,
            max_wait_ms=core.config.fetch_max_wait_ms,
            max_bytes=core.config.fetch_max_bytes,
            high_watermark=core.high_watermark,
            replica_directory_id=core.config.directory_id,
        ),
        now,
    )
    return True


def must_flush_first(core: HandlerContext) -> bool:
    """A voter's fetch offset counts towards the high watermark, so it is sent only once
    everything before it is durable. So is a controller's that observes: an uncommitted
    AddRaftVoter may count it already (R3.7, KAFKA-17332)."""
    return (core.config.controller or core.quorum.is_voter) and (
        core.log.flushed_offset < core.log.end_offset
    )


def handle_response(core: HandlerContext, entry: InFlight, resp: FetchResponse, now: int) -> None:
    state = core.quorum.state
    req = entry.request
    assert isinstance(req, FetchRequest)
    if not (
        isinstance(state, FollowerState)
        and resp.leader_id == state.leader_id
        and resp.leader_epoch == state.epoch
        and req.current_leader_epoch == state.epoch
    ):
        return  # from a state we left, or a discovery answer that names no leader
    if resp.error != Errors.NONE:
        return
    note_leader_answered(core, state, now)
    if resp.snapshot_id is not None:
        rpc_fetch_snapshot.start(core, state, resp.snapshot_id)
        return
    if resp.diverging_epoch is not None:
        _truncate_to_leader(core, resp.diverging_epoch)
        return
    if resp.records:
        try:
            core.log.append_as_follower(resp.records)
        except (CorruptRecordError, LogAppendError) as exc:
            # Nothing was appended; fetching again from the same offset retries it.
            log.warning("rejected records from leader %d: %s", state.leader_id, exc)
            return
        core.on_appended_as_follower(resp.records)
    if resp.high_watermark >= 0:
        core.update_follower_high_watermark(resp.high_watermark)


def _truncate_to_leader(core: HandlerContext, diverging: OffsetAndEpoch) -> None:
    local = core.log.end_offset_for_epoch(diverging.epoch)
    same_epoch = local.epoch == diverging.epoch
    offset = min(local.offset, diverging.offset) if same_epoch else local.offset
    if offset < core.high_watermark:
        raise RaftInvariantError(
            f"the leader asks to truncate to {offset}, below the high watermark "
            f"{core.high_watermark}: committed records would be lost"
        )
    log.info("truncating the log to offset %d (diverging at epoch %d)", offset, diverging.epoch)
    core.log.truncate_to(offset)
    core.on_truncated(offset)


def on_unreachable(core: HandlerContext, entry: InFlight, now: int) -> None:
    """A refused or reset connection to a leader this follower was fetching from: its process
    may be gone. One refusal is not proof (a middlebox RST or a conntrack flush resets every
    follower's stream at once), so the fetch is retried at once; a second refusal in a row
    confirms it, and a voter then stands for election after a short random delay instead of
    the whole fetch timeout. Pre-vote keeps this safe: voters still fetching from a live
    leader, or still confirming a refusal, refuse it. A follower that has not reached its
    leader in this state learns nothing new from a refusal and waits for its fetch timeout,
    so a connection that stays refused costs one election round per fetch timeout, not tens
    a second."""
    state = core.quorum.state
    if not isinstance(state, FollowerState) or entry.destination != state.leader_id:
        return
    if not isinstance(entry.request, FetchRequest | FetchSnapshotRequest):
        return
    if not core.quorum.is_voter:
        # An observer asks the bootstrap servers instead; and grants pre-votes, which a
        # quorum that needs it (an added voter that has not fetched its addition yet) must
        # get once the leader is gone (T1).
        state.fetch_from_bootstrap = True
        state.leader_live = False
        return
    if not state.leader_live:
        return
    if not state.confirming_unreachable:
        state.confirming_unreachable = True
        core.connections.clear_backoff(state.leader_id)  # the confirming retry leaves now
        return
    state.leader_live = False
    state.confirming_unreachable = False
    jitter = core.rng.randrange(core.config.fast_failover_jitter_ms + 1)
    state.fetch_deadline = min(state.fetch_deadline, now + jitter)


def on_timeout(core: HandlerContext, entry: InFlight, now: int) -> None:
    """A fetch to the leader timed out. An observer asks the bootstrap servers instead. A
    voter's Fetch times out at the leader's max wait plus `hung_leader_margin_ms` (a live
    leader answers a long poll by then): the leader is hung, and the voter acts as on a
    confirmed refusal — it grants pre-votes and stands after a short random delay rather than
    the whole fetch timeout. A leader that is only slow is safe twice over: a pre-vote wins
    only if a majority saw no answer either, and the first answer makes the leader live
    again."""
    state = core.quorum.state
    if not (
        isinstance(state, FollowerState)
        and entry.destination == state.leader_id
        and isinstance(entry.request, FetchRequest | FetchSnapshotRequest)
    ):
        return
    if not core.quorum.is_voter:
        state.fetch_from_bootstrap = True
        state.leader_live = False
        return
    if isinstance(entry.request, FetchRequest) and state.leader_live:
        log.info("no answer from leader %d to a fetch within its max wait + %d ms: it may "
                 "be hung", state.leader_id, core.config.hung_leader_margin_ms)
        state.leader_live = False
        state.confirming_unreachable = False
        jitter = core.rng.randrange(core.config.fast_failover_jitter_ms + 1)
        state.fetch_deadline = min(state.fetch_deadline, now + jitter)
