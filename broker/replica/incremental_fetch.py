"""The leader's side of an incremental fetch (KIP-227): which of a session's partitions to
read, how long to park, what to answer.

Kafka reads every partition of a session on every fetch and leaves the unchanged ones out
of the answer. Reading (and, for a follower, recording) thousands of partitions twice a
second per follower is what kept idle brokers busy, so here the leader keeps an index of
its sessions' partitions and the data plane's notifications (Waiters: a new log end or log
start, a new HW, a leadership change) mark the partitions that moved. A read looks at those,
at the ones the request lists, and at the unsettled ones (never read yet, answered with an
error, or a follower outside the ISR, whose every fetch may expand it); a consumer's read
looks at all of its partitions, each authorized again as Kafka does. Partitions it looks at
are read when the leader has something to tell or do, then answered if something changed.
An idle follower's fetch so touches no partition and parks until one of its partitions moves
or max_wait passes — Kafka's delayed fetch.

A follower's unchanged partitions are not recorded on every fetch as Kafka records them
(lastCaughtUpTimeMs), but the ISR rule needs that only once the leader's log end moves past
them: when it does, the index credits the follower with its last fetch if that fetch was at
the old log end — what Kafka's record of that fetch would say.

Reads go through ReplicaManager.fetch (max_wait 0), so follower bookkeeping, fencing,
divergence and the byte limits are the ones every fetch gets.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Hashable, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from broker.api import FetchParams, FetchPartitionResult
from broker.replica.fetch_sessions import (
    CachedPartition,
    FetchSession,
    FetchSessionCache,
    IncrementalFetch,
    PartitionKey,
)
from broker.replica.manager import _hw_key, _leo_key
from broker.replica.waiters import FETCH
from kraft.errors import Errors

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaManager
    from broker.replica.partition import Partition

# A partition's answer with the replica object and leader epoch it was read from.
_Answer = tuple[CachedPartition, FetchPartitionResult, "Partition | None", int]
# Errors that do not end a long poll (as ReplicaManager.fetch: a new leader confirming its HW).
_WAITING = (Errors.NONE, Errors.OFFSET_NOT_AVAILABLE)
# Why a session partition is refused without a read (authorization, unknown topic id), or None.
Refusal = Callable[[CachedPartition], int | None]


class FetchSessions:
    """The broker's session cache, its index of the partitions sessions hold, and the
    incremental read against its ReplicaManager."""

    def __init__(self, manager: ReplicaManager, cache: FetchSessionCache,
                 clock_ms: Callable[[], int] | None = None) -> None:
        self.manager = manager
        self.cache = cache
        # The cache's clock (session age and idleness): monotonic, unlike record timestamps.
        self.clock_ms = clock_ms or (lambda: int(time.monotonic() * 1000))
        # Waiters key -> (a log-end key?, session id -> its entry for that partition).
        self._index: dict[Hashable, tuple[bool, dict[int, CachedPartition]]] = {}
        self._wake: dict[int, asyncio.Event] = {}  # a session's parked read
        cache.on_remove = self._drop_session
        manager.waiters.observers.append(self._moved)

    async def read(self, context: IncrementalFetch, params: FetchParams, refusal: Refusal
                   ) -> list[tuple[CachedPartition, FetchPartitionResult]] | int:
        """The partitions the answer lists, or INVALID_FETCH_SESSION_EPOCH if another
        request of the session overtook this one. `params` carries the request's limits and
        replica (its partitions are ignored: the session's are read)."""
        manager = self.manager
        session = context.session
        for c in context.forgotten:
            self._unwatch(session, c)
        if params.from_follower and params.replica_id in manager.fetchers.blocked:
            # An injected network partition (as ReplicaManager.fetch): lost, answered late.
            await asyncio.sleep(max(0, params.max_wait_ms) / 1000)
            lost = FetchPartitionResult(Errors.REQUEST_TIMED_OUT)
            return self._answer(context, {c.key: (c, lost, None, -1)
                                          for c in session.partitions.values()})
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, params.max_wait_ms) / 1000
        session.read_ms, session.replica_id = manager.now_ms(), params.replica_id
        wake = self._wake.setdefault(session.id, asyncio.Event())
        answers: dict[PartitionKey, _Answer] = {}
        looked: set[PartitionKey] = set()  # taken from `changed`: put back if overtaken
        size, first = 0, True
        while True:
            wake.clear()
            keys = self._to_look_at(context, params, first)
            looked |= keys
            reads = self._scan(session, keys, params, refusal, answers, first)
            first = False
            urgent = False
            if reads:
                results = await manager.fetch(replace(
                    params, partitions=[c.fetch_partition() for c, _, _ in reads],
                    max_wait_ms=0, max_bytes=max(1, params.max_bytes - size)))
                for (c, replica, epoch), result in zip(reads, results, strict=True):
                    answers[c.key] = (c, result, replica, epoch)
                    size += len(result.records)
                    urgent = urgent or result.error not in _WAITING \
                        or result.diverging_epoch is not None
            remaining = deadline - loop.time()
            if urgent or size >= params.min_bytes or remaining <= 0:
                break
            # Parked until one of the session's partitions moves (the index wakes it).
            with contextlib.suppress(TimeoutError), \
                    manager.waiters.counted(FETCH, len(session.partitions)):
                async with asyncio.timeout(remaining):
                    await wake.wait()
            if not wake.is_set() or self.cache.sessions.get(session.id) is not session:
                break  # the time is up, or the session was closed or evicted meanwhile
        out = self._answer(context, answers)
        if isinstance(out, int):
            session.changed |= looked  # this read's news belongs to the one that overtook it
            wake.set()
        return out

    def _to_look_at(self, context: IncrementalFetch, params: FetchParams, first: bool
                    ) -> set[PartitionKey]:
        session = context.session
        if not params.from_follower or (first and self._stale_incarnation(params)):
            # A consumer's partitions are each authorized on every fetch; a stale follower
            # incarnation gets its refusal on every partition.
            keys = set(session.partitions) if first else set(session.changed)
        elif first:
            keys = session.unsettled | session.changed | context.listed
        else:
            keys = set(session.changed)
        session.changed.clear()
        return keys

    def _scan(self, session: FetchSession, keys: set[PartitionKey], params: FetchParams,
              refusal: Refusal, answers: dict[PartitionKey, _Answer], touch: bool
              ) -> list[tuple[CachedPartition, Partition | None, int]]:
        """Answers known without a read go to `answers`; the partitions to read are returned
        with their replica and epoch, in session order when there are many (the byte budget
        goes to the partitions that waited longest). With `touch`, a follower's partitions
        that need no read record this fetch, as a read would."""
        partitions = self.manager.partitions
        follower = params.from_follower
        replica, replica_epoch = params.replica_id, params.replica_epoch
        reads: list[tuple[CachedPartition, Partition | None, int]] = []
        looking: Iterable[PartitionKey] = keys if 4 * len(keys) < len(session.partitions) \
            else [k for k in session.partitions if k in keys]
        for key in looking:
            c = session.partitions.get(key)
            if c is None:
                continue
            error = refusal(c)
            if error is not None:
                answers[key] = (c, FetchPartitionResult(error), None, -1)
                continue
            self._watch(session, c)
            p = partitions.get((c.topic, c.partition))  # type: ignore[arg-type]
            if p is None:
                reads.append((c, None, -1))
                continue
            hw = p.high_watermark
            log_ = p.log
            if (p is not c.replica or p.leader_epoch != c.seen_epoch or not p.is_leader
                    or hw != c.high_watermark or hw != c.last_stable_offset
                    or log_.start_offset != c.local_log_start):
                # (The LSO is the HW until transactions write markers; then it needs its own
                # comparison here.)
                reads.append((c, p, p.leader_epoch))
                continue
            end = log_.end_offset
            if not follower:
                if c.fetch_offset < hw or c.fetch_offset > end:
                    reads.append((c, p, p.leader_epoch))
                continue
            state = p.followers.get(replica)
            if (c.fetch_offset != end or state is None or state.leo != end
                    or state.broker_epoch != replica_epoch or replica not in p.isr):
                reads.append((c, p, p.leader_epoch))
            else:
                session.unsettled.discard(key)
                if touch:  # what reading it would record: fetched at the log end, now
                    state.on_fetch(end, c.log_start_offset, end, session.read_ms)
        return reads

    def _stale_incarnation(self, params: FetchParams) -> bool:
        """The follower's broker epoch is older than its registration (KIP-903): every
        partition is read, so each gets its refusal."""
        registered = self.manager.image.cluster.broker(params.replica_id)
        return params.replica_epoch >= 0 and registered is not None \
            and params.replica_epoch < registered.epoch

    @staticmethod
    def _answer(context: IncrementalFetch, answers: dict[PartitionKey, _Answer]
                ) -> list[tuple[CachedPartition, FetchPartitionResult]] | int:
        session = context.session
        if session.epoch != context.expected_epoch:
            return Errors.INVALID_FETCH_SESSION_EPOCH
        out = []
        follower = session.replica_id >= 0
        for key, (c, result, replica, epoch) in answers.items():
            c.replica, c.seen_epoch = replica, epoch
            # Looked at by every read until settled: errors, a follower outside the ISR.
            if result.error != Errors.NONE or replica is None or (
                    follower and session.replica_id not in replica.isr):
                session.unsettled.add(key)
            else:
                session.unsettled.discard(key)
            if c.must_respond(result):
                out.append((c, result))
        for c, result in out:
            if result.records:
                session.rotate_to_end(c.key)
        return out

    # -- the index ---------------------------------------------------------------------------

    def _watch(self, session: FetchSession, c: CachedPartition) -> None:
        """Index a partition of a session under its Waiters keys (once, on its first read):
        a follower's under its log end and HW, a consumer's under its HW."""
        if c.watched is not None or c.topic is None:
            return
        tp = c.watched = (c.topic, c.partition)
        keys = [(False, _hw_key(tp))]
        if session.privileged:
            keys.append((True, _leo_key(tp)))
        for log_end, key in keys:
            entry = self._index.get(key)
            if entry is None:
                entry = self._index[key] = (log_end, {})
            entry[1][session.id] = c

    def _unwatch(self, session: FetchSession, c: CachedPartition) -> None:
        tp, c.watched = c.watched, None
        if tp is None:
            return
        for key in (_hw_key(tp), _leo_key(tp)):
            entry = self._index.get(key)
            if entry is not None:
                entry[1].pop(session.id, None)
                if not entry[1]:
                    del self._index[key]

    def _drop_session(self, session: FetchSession) -> None:
        for c in session.partitions.values():
            self._unwatch(session, c)
        wake = self._wake.pop(session.id, None)
        if wake is not None:
            wake.set()  # a read still parked answers now; the client finds the session gone

    def _moved(self, key: Hashable) -> None:
        """A Waiters notification: mark the partition in every session holding it, wake
        their parked reads."""
        entry = self._index.get(key)
        if entry is None:
            return
        log_end, watchers = entry
        stale = []
        for session_id, c in watchers.items():
            session = self.cache.sessions.get(session_id)
            pk = c.key
            if session is None or session.partitions.get(pk) is not c:
                stale.append(session_id)  # left the session without a read to unindex it
                continue
            if log_end and pk not in session.changed and pk not in session.unsettled:
                self._credit_last_fetch(session, c)
            session.changed.add(pk)
            wake = self._wake.get(session_id)
            if wake is not None:
                wake.set()
        for session_id in stale:
            del watchers[session_id]
        if not watchers:
            del self._index[key]

    def _credit_last_fetch(self, session: FetchSession, c: CachedPartition) -> None:
        """The leader's log end just moved past a follower that was at it on its last fetch,
        which recorded nothing for this partition: record it caught up as of that fetch
        (Kafka's updateFollowerFetchState at that fetch), so the ISR rule sees when it last
        was caught up, not when its log end last moved."""
        p = self.manager.partitions.get((c.topic, c.partition))  # type: ignore[arg-type]
        if p is None or p is not c.replica:
            return
        state = p.followers.get(session.replica_id)
        if state is not None and state.leo == c.fetch_offset == state.last_fetch_leader_leo:
            state.last_caught_up_ms = max(state.last_caught_up_ms, session.read_ms)
