"""A small deterministic harness around one RaftCore, for the test_core_*.py unit tests.

`Harness` builds a RaftCore over a MemoryLog for a given voter set, node id and persisted
election state, with a fake integer clock and a seeded `random.Random`. It plays the driver:
after every call into the core it collects the Output, "writes" the election state (kept in
`persisted` and `persist_log`), queues outbound requests in `outbox` and keeps replies by token.

The tests play every other node by hand: they build requests and responses with the helpers
below and feed them in with `deliver` / `respond` / `fail`, route one request between two
harnesses with `route`, or wire a few harnesses together on one clock with `Network` (which
can isolate a node, or crash it so that connections to it are refused).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable, Sequence

from kraft.core.config import RaftConfig
from kraft.core.errors import Errors
from kraft.core.messages import (
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    FetchRequest,
    FetchResponse,
    OutboundRequest,
    Request,
    Response,
    VoteRequest,
    VoteResponse,
)
from kraft.core.raft import Output, RaftCore
from kraft.core.voters import SnapshotVoters
from kraft.election_state import PRIMORDIAL, ElectionState
from kraft.log import MemoryLog, decode_batches
from kraft.log.base import Batch, OffsetAndEpoch, SnapshotJob
from kraft.log.snapshots import MemorySnapshotStore

CLUSTER_ID = "cluster-under-test"
MAX_BYTES = 8 * 1024 * 1024


def endpoint(node_id: int) -> str:
    return f"node{node_id}.test:9093"


class Harness:
    """One node under test. Time only moves when the test says so."""

    def __init__(
        self,
        node_id: int | None = 1,
        voter_ids: Iterable[int] = (1, 2, 3),
        persisted: ElectionState = PRIMORDIAL,
        log: MemoryLog | None = None,
        now: int = 0,
        seed: int = 7,
        snapshots: MemorySnapshotStore | None = None,
        snapshot_voters: SnapshotVoters | None = None,
        **config: object,
    ) -> None:
        self.config = RaftConfig(
            cluster_id=CLUSTER_ID,
            node_id=node_id,
            voters={v: endpoint(v) for v in voter_ids},
            local_endpoint=endpoint(node_id) if node_id is not None else "",
            **config,  # type: ignore[arg-type]
        )
        self.node_id = node_id
        self.log = log if log is not None else MemoryLog()
        self.now = now
        self.persisted = persisted
        self.persist_log: list[ElectionState] = []
        self.outputs: list[Output] = []
        self.outbox: list[OutboundRequest] = []
        self.replies: dict[int, Response] = {}
        self._next_token = 1000
        self.snapshots = snapshots if snapshots is not None else MemorySnapshotStore()
        # Snapshot jobs run as soon as they are asked for, unless a test holds them back.
        self.run_snapshot_jobs = True
        self.held_jobs: list[SnapshotJob] = []
        self.core = RaftCore(
            self.config, self.log, persisted, now, random.Random(seed), self.snapshots,
            snapshot_voters,
        )
        self.last = self.collect()

    # -- the driver's half ---------------------------------------------------------------

    def collect(self) -> Output:
        out = self.core.take_output()
        self._absorb(out)
        if self.run_snapshot_jobs:
            self.run_jobs()
        return out

    def _absorb(self, out: Output) -> None:
        if out.election_state is not None:
            self.persisted = out.election_state
            self.persist_log.append(out.election_state)
            self.core.election_state_persisted(out.election_state)
        self.outbox.extend(out.requests)
        for reply in out.replies:
            assert reply.token not in self.replies, "two replies to one request"
            self.replies[reply.token] = reply.response
        self.outputs.append(out)
        self.last = out
        self.held_jobs.extend(out.snapshot_jobs)

    def run_jobs(self, count: int | None = None) -> None:
        """Run held snapshot jobs in order (all, or the first `count`), as the driver does."""
        while self.held_jobs and (count is None or count > 0):
            job = self.held_jobs.pop(0)
            job.run()
            self.core.on_snapshot_job_done(job, self.now)
            if count is not None:
                count -= 1
            self._absorb(self.core.take_output())

    def deliver_async(self, request: Request) -> int:
        """Hand an inbound request to the core; return its token (the reply may come later)."""
        token = self._next_token
        self._next_token += 1
        self.core.handle_request(token, request, self.now)
        self.collect()
        return token

    def deliver(self, request: Request) -> Response | None:
        """Hand an inbound request to the core; return its reply, or None if it was parked."""
        return self.reply_for(self.deliver_async(request))

    def reply_for(self, token: int) -> Response | None:
        return self.replies.pop(token, None)

    def respond(self, out: OutboundRequest, response: Response) -> None:
        self.outbox.remove(out)
        self.core.handle_response(out.correlation_id, response, self.now)
        self.collect()

    def fail(self, out: OutboundRequest, unreachable: bool = False,
             timed_out: bool = False) -> None:
        self.outbox.remove(out)
        self.core.handle_failure(out.correlation_id, self.now, unreachable=unreachable,
                                 timed_out=timed_out)
        self.collect()

    def advance(self, ms: int) -> None:
        self.advance_to(self.now + ms)

    def advance_to(self, t: int) -> None:
        assert t >= self.now
        self.now = t
        self.core.poll(t)
        self.collect()

    def flush(self) -> None:
        self.log.flush()
        self.core.on_log_flushed(self.now)
        self.collect()

    def append(self, records: Sequence[bytes]) -> int:
        last = self.core.append(list(records), self.now)
        self.collect()
        return last

    def resign(self, epoch: int | None = None) -> None:
        self.core.resign(self.epoch if epoch is None else epoch, self.now)
        self.collect()

    def begin_shutdown(self) -> None:
        self.core.begin_shutdown(self.now)
        self.collect()

    def run_until(self, predicate: Callable[[], bool], limit_ms: int = 60_000) -> int:
        """Poll at each `next_deadline` until `predicate` holds; return the time it did."""
        stop = self.now + limit_ms
        while not predicate():
            deadline = self.core.next_deadline()
            if deadline > stop:
                raise AssertionError(f"condition not reached by t={stop} (now {self.now})")
            self.advance_to(max(self.now, math.ceil(deadline)))
        return self.now

    # -- views -----------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return self.core.status().state

    @property
    def epoch(self) -> int:
        return self.core.epoch

    @property
    def leader_id(self) -> int:
        return self.core.leader_id

    @property
    def hw(self) -> int:
        return self.core.high_watermark

    def sent(self, kind: type | None = None, to: int | None = None) -> list[OutboundRequest]:
        """Requests sent and still awaited by the core (those of a state it left, or that it
        timed out, are dropped from `outbox`)."""
        self._forget_abandoned()
        return [
            o for o in self.outbox
            if (kind is None or isinstance(o.request, kind))
            and (to is None or o.destination == to)
        ]

    def _forget_abandoned(self) -> None:
        def awaited(o: OutboundRequest) -> bool:
            entry = self.core.connections.in_flight_to(o.destination)
            return entry is not None and entry.correlation_id == o.correlation_id

        self.outbox = [o for o in self.outbox if awaited(o)]

    def only(self, kind: type, to: int | None = None) -> OutboundRequest:
        found = self.sent(kind, to)
        assert len(found) == 1, f"expected one {kind.__name__} to {to}, got {found}"
        return found[0]

    def destinations(self, kind: type) -> set[int]:
        return {o.destination for o in self.sent(kind)}

    def clear_outbox(self) -> None:
        """Forget what was sent (the requests stay in flight inside the core)."""
        self.outbox.clear()


# -- message builders --------------------------------------------------------------------------


def vote_request(
    replica_id: int,
    epoch: int,
    last_epoch: int,
    last_offset: int,
    pre_vote: bool = False,
    voter_id: int = -1,
    cluster_id: str | None = CLUSTER_ID,
) -> VoteRequest:
    return VoteRequest(cluster_id, replica_id, epoch, last_epoch, last_offset, pre_vote, voter_id)


def vote_response(
    epoch: int, granted: bool, leader_id: int = -1, error: Errors = Errors.NONE
) -> VoteResponse:
    return VoteResponse(error, leader_id, epoch, granted, endpoint(leader_id) if leader_id >= 0
                        else "")


def fetch_request(
    replica_id: int,
    epoch: int,
    fetch_offset: int,
    last_fetched_epoch: int,
    max_wait_ms: int = 0,
    high_watermark: int = -1,
    cluster_id: str | None = CLUSTER_ID,
    max_bytes: int = MAX_BYTES,
) -> FetchRequest:
    return FetchRequest(
        cluster_id, replica_id, epoch, fetch_offset, last_fetched_epoch, max_wait_ms, max_bytes,
        high_watermark,
    )


def fetch_response(
    leader_id: int,
    epoch: int,
    records: bytes = b"",
    high_watermark: int = -1,
    diverging: OffsetAndEpoch | None = None,
    error: Errors = Errors.NONE,
) -> FetchResponse:
    return FetchResponse(
        error, leader_id, epoch, high_watermark=high_watermark, records=records,
        diverging_epoch=diverging, leader_endpoint=endpoint(leader_id) if leader_id >= 0 else "",
    )


def begin_epoch(
    leader_id: int, epoch: int, voter_id: int = -1, cluster_id: str | None = CLUSTER_ID
) -> BeginQuorumEpochRequest:
    return BeginQuorumEpochRequest(cluster_id, leader_id, epoch, endpoint(leader_id), voter_id)


def begin_epoch_response(leader_id: int, epoch: int) -> BeginQuorumEpochResponse:
    return BeginQuorumEpochResponse(Errors.NONE, leader_id, epoch, endpoint(leader_id))


def end_epoch(
    leader_id: int, epoch: int, successors: Sequence[int], cluster_id: str | None = CLUSTER_ID
) -> EndQuorumEpochRequest:
    return EndQuorumEpochRequest(
        cluster_id, leader_id, epoch, tuple(successors), endpoint(leader_id)
    )


def end_epoch_response(leader_id: int, epoch: int) -> EndQuorumEpochResponse:
    return EndQuorumEpochResponse(Errors.NONE, leader_id, epoch, endpoint(leader_id))


# -- logs ----------------------------------------------------------------------------------------


def make_log(*runs: tuple[int, int], flushed: bool = True) -> MemoryLog:
    """A MemoryLog holding, for each (epoch, count), `count` one-record batches of that epoch."""
    log = MemoryLog()
    for epoch, count in runs:
        for _ in range(count):
            offset = log.end_offset
            log.append_as_leader([f"e{epoch}o{offset}".encode()], epoch, 0)
    if flushed:
        log.flush()
    return log


def batches(data: bytes) -> list[Batch]:
    return decode_batches(data)


def offsets_in(data: bytes) -> list[int]:
    return [b.base_offset + i for b in decode_batches(data) for i in range(len(b.records))]


# -- scenarios -----------------------------------------------------------------------------------


def elect(h: Harness) -> None:
    """Drive a voter through timeout → pre-vote → vote → Leader, with the lowest-numbered
    other voters granting just enough votes. Leaves the LeaderChange record unflushed."""
    h.run_until(lambda: h.state in ("Prospective", "Leader"))
    if h.state == "Leader":
        return  # a single voter needs nobody's vote
    others = sorted(v for v in h.config.voters if v != h.node_id)
    needed = len(h.config.voters) // 2
    for voter in others[:needed]:
        out = h.only(VoteRequest, to=voter)
        assert out.request.pre_vote
        h.respond(out, vote_response(h.epoch, True))
    assert h.state == "Candidate", h.state
    for voter in others[:needed]:
        out = h.only(VoteRequest, to=voter)
        assert not out.request.pre_vote
        h.respond(out, vote_response(h.epoch, True))
    assert h.state == "Leader", h.state


def leader(
    voter_ids: Iterable[int] = (1, 2, 3), node_id: int = 1, log: MemoryLog | None = None,
    persisted: ElectionState = PRIMORDIAL, **config: object,
) -> Harness:
    """A harness whose node leads, its LeaderChange record flushed and its outbox empty."""
    h = Harness(node_id, voter_ids, persisted=persisted, log=log, **config)
    if h.state != "Leader":
        elect(h)
    h.flush()
    h.clear_outbox()
    return h


def follower(
    leader_id: int = 1,
    epoch: int = 5,
    node_id: int = 2,
    voter_ids: Iterable[int] = (1, 2, 3),
    log: MemoryLog | None = None,
    **config: object,
) -> Harness:
    """A harness whose node restarted as Follower of `leader_id` in `epoch`."""
    h = Harness(
        node_id, voter_ids, persisted=ElectionState(epoch, leader_id=leader_id), log=log,
        **config,
    )
    assert h.state == "Follower", h.state
    return h


def route(
    src: Harness, dst: Harness, out: OutboundRequest, wait_ms: int = 0
) -> Response | None:
    """Carry one of `src`'s requests to `dst` and the reply back, unless it stays parked after
    `dst` spent `wait_ms` more."""
    assert dst.node_id == out.destination
    token = dst.deliver_async(out.request)
    reply = dst.reply_for(token)
    if reply is None and wait_ms:
        dst.advance(wait_ms)
        reply = dst.reply_for(token)
    if reply is not None:
        src.respond(out, reply)
    return reply


class Network:
    """A few harnesses wired together on one clock. Requests between connected nodes are
    delivered at once; replies (including parked Fetch replies, when they come) go straight
    back. A request to or from an isolated node is dropped: the sender's core times it out.
    Every node flushes its log on each step, as if its disk were instant."""

    def __init__(self, *nodes: Harness) -> None:
        self.nodes = {h.node_id: h for h in nodes}
        self.isolated: set[int] = set()
        self.refused: set[int] = set()  # crashed nodes (see crash)
        self._pending: list[tuple[Harness, OutboundRequest, Harness, int]] = []
        self.now = max(h.now for h in nodes)
        for h in nodes:
            h.advance_to(self.now)
        self.pump()

    def __getitem__(self, node_id: int) -> Harness:
        return self.nodes[node_id]

    def crash(self, node_id: int) -> None:
        """Node `node_id`'s process is gone: open connections to it reset, new ones are
        refused (the senders see handle_failure(..., unreachable=True))."""
        self.refused.add(node_id)
        for item in list(self._pending):
            src, out, dst, _ = item
            if dst.node_id == node_id:
                self._pending.remove(item)
                src.core.handle_failure(out.correlation_id, src.now, unreachable=True)
                src.collect()
        self.pump()

    def pump(self) -> None:
        progress = True
        while progress:
            progress = False
            for src in self.nodes.values():
                if src.node_id in self.refused:
                    src.clear_outbox()
                    continue
                if src.log.flushed_offset < src.log.end_offset:
                    src.flush()
                    progress = True
                for out in list(src.outbox):
                    src.outbox.remove(out)
                    progress = True
                    if out.destination in self.refused:
                        src.core.handle_failure(out.correlation_id, src.now, unreachable=True)
                        src.collect()
                        continue
                    dst = self.nodes.get(out.destination)
                    if dst is None or {src.node_id, out.destination} & self.isolated:
                        continue  # lost; the core times it out
                    token = dst.deliver_async(out.request)
                    self._pending.append((src, out, dst, token))
            for item in list(self._pending):
                src, out, dst, token = item
                if dst.node_id in self.refused or {src.node_id, dst.node_id} & self.isolated:
                    self._pending.remove(item)
                    dst.replies.pop(token, None)
                    continue
                if token in dst.replies:
                    self._pending.remove(item)
                    response = dst.replies.pop(token)
                    src.core.handle_response(out.correlation_id, response, src.now)
                    src.collect()
                    progress = True

    def advance_to(self, t: int) -> None:
        self.now = t
        for h in self.nodes.values():
            if h.node_id not in self.refused:
                h.advance_to(t)
        self.pump()

    def run(self, until: int, step_ms: int = 10) -> None:
        while self.now < until:
            self.advance_to(min(until, self.now + step_ms))

    def run_until(
        self, predicate: Callable[[], bool], limit_ms: int = 30_000, step_ms: int = 10
    ) -> int:
        stop = self.now + limit_ms
        while not predicate():
            if self.now >= stop:
                raise AssertionError(f"condition not reached by t={stop}")
            self.advance_to(self.now + step_ms)
        return self.now


__all__ = [
    "CLUSTER_ID",
    "MAX_BYTES",
    "Harness",
    "Network",
    "batches",
    "begin_epoch",
    "begin_epoch_response",
    "elect",
    "end_epoch",
    "end_epoch_response",
    "endpoint",
    "fetch_request",
    "fetch_response",
    "follower",
    "leader",
    "make_log",
    "offsets_in",
    "route",
    "vote_request",
    "vote_response",
]
