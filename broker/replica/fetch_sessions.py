"""Incremental fetch sessions (KIP-227, Fetch v7+): Kafka's FetchSession.scala on the leader
and its FetchSessionHandler on the fetching side. No I/O and no clock: times are passed in.

A full fetch (session id 0 or the session to replace, epoch 0) may get a session id; the
client's next fetches are incremental (that id, epoch 1, 2, ...): they list only the
partitions whose fetch parameters changed and, in `forgotten_topics_data`, those it no
longer wants, and the answer lists only the partitions with something new: records, a moved
high watermark, last stable offset or log start, an error or a diverging epoch. Epoch -1
closes the session (that fetch is answered without one).

The cache holds `max.incremental.fetch.session.cache.slots` sessions. A new one may evict an
old one (Kafka's FetchSessionCacheShard.tryEvict): one unused for 120 s first; else the
least valuable one the newcomer outranks by (privileged, partitions, id), where followers'
sessions are privileged and a session younger than 120 s can be evicted only by a privileged
newcomer, and a privileged one only once it is older than that.

The leader's read of an incremental fetch is in broker/replica/incremental_fetch.py.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.api import FetchPartition, FetchPartitionResult
from kraft.errors import Errors

if TYPE_CHECKING:
    from broker.replica.partition import Partition

INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SESSIONS_VERSION = 7  # the first Fetch version with session fields
TOPIC_IDS_VERSION = 13
EVICTION_MS = 120_000  # Kafka's MIN_INCREMENTAL_FETCH_SESSION_EVICTION_MS (not a config key)
DEFAULT_CACHE_SLOTS = 1000  # max.incremental.fetch.session.cache.slots
_MAX_EPOCH = 2**31 - 1

# A partition in a session: (topic id, partition) in a session by ids (v13+), else
# (topic name, partition).
PartitionKey = tuple[str, int]


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: after -1 stays -1; wraps to 1, never back to 0."""
    if epoch < 0:
        return FINAL_EPOCH
    return 1 if epoch == _MAX_EPOCH else epoch + 1


@dataclass(slots=True, eq=False)
class CachedPartition:
    """One partition of a session: the client's latest fetch parameters and what the last
    answer told it (Kafka's CachedPartition). `topic` is None for a topic id the metadata did
    not know when it was named (resolved later, as Kafka's maybeResolveUnknownName)."""

    topic: str | None
    topic_id: str | None
    partition: int
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1  # the fetching replica's own log start
    high_watermark: int = -1  # as last answered; -1: never, or an error (answer it again)
    last_stable_offset: int = -1
    local_log_start: int = -1  # this broker's log start as last answered
    # The leader's replica object and its epoch at the last answer, so the leader's scan of
    # an incremental fetch sees a new leadership or a re-created replica (incremental_fetch).
    replica: Partition | None = None
    seen_epoch: int = -1
    watched: tuple[str, int] | None = None  # the topic-partition the leader's index has it by

    @property
    def key(self) -> PartitionKey:
        name = self.topic_id if self.topic_id is not None else self.topic
        assert name is not None
        return name, self.partition

    def fetch_partition(self) -> FetchPartition:
        assert self.topic is not None
        return FetchPartition(self.topic, self.partition, self.fetch_offset, self.max_bytes,
                              self.current_leader_epoch, self.last_fetched_epoch,
                              self.log_start_offset, self.topic_id)

    def update_request(self, other: CachedPartition) -> None:
        """The client's new parameters (Kafka's updateRequestParams)."""
        self.fetch_offset = other.fetch_offset
        self.max_bytes = other.max_bytes
        self.current_leader_epoch = other.current_leader_epoch
        self.last_fetched_epoch = other.last_fetched_epoch
        self.log_start_offset = other.log_start_offset
        if other.topic is not None:
            self.topic = other.topic

    def must_respond(self, result: FetchPartitionResult) -> bool:
        """Whether an incremental answer lists this partition, remembering what it tells
        (Kafka's maybeUpdateResponseData): records, a moved HW, LSO or log start, an error
        (remembered as HW -1, so the partition is answered again once it clears), a
        diverging epoch."""
        respond = bool(result.records) or result.diverging_epoch is not None
        if result.high_watermark != self.high_watermark:
            self.high_watermark = result.high_watermark
            respond = True
        if result.last_stable_offset != self.last_stable_offset:
            self.last_stable_offset = result.last_stable_offset
            respond = True
        if result.log_start_offset != self.local_log_start:
            self.local_log_start = result.log_start_offset
            respond = True
        if result.error != Errors.NONE:
            self.high_watermark = -1
            respond = True
        return respond


@dataclass(eq=False)
class FetchSession:
    id: int
    privileged: bool  # a follower's
    uses_topic_ids: bool
    creation_ms: int
    last_used_ms: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[PartitionKey, CachedPartition] = field(default_factory=dict)
    # As of the last touch (Kafka keeps these in its sorted sets): the size it counted for,
    # and which newcomers may evict it.
    cached_size: int = -1
    evictable_by_all: bool = False
    evictable_by_privileged: bool = False
    # The leader's read (incremental_fetch): partitions that moved since the last read, and
    # those every read looks at until they settle (never read, in error, a follower outside
    # the ISR); when the last read began (data-plane clock) and for which replica.
    changed: set[PartitionKey] = field(default_factory=set)
    unsettled: set[PartitionKey] = field(default_factory=set)
    read_ms: int = 0
    replica_id: int = -1

    def update(self, requested: Iterable[CachedPartition], forgotten: Iterable[PartitionKey]
               ) -> tuple[set[PartitionKey], list[CachedPartition]]:
        """Add or update the partitions a request lists, drop the forgotten ones; the keys
        listed and the entries dropped."""
        listed = set()
        for wanted in requested:
            key = wanted.key
            cached = self.partitions.get(key)
            if cached is None:
                self.partitions[key] = wanted
            else:
                cached.update_request(wanted)
            listed.add(key)
        dropped = []
        for key in forgotten:
            gone = self.partitions.pop(key, None)
            if gone is not None:
                dropped.append(gone)
                self.changed.discard(key)
                self.unsettled.discard(key)
            listed.discard(key)
        return listed, dropped

    def rotate_to_end(self, key: PartitionKey) -> None:
        """A partition that just got records goes last, so the next fetch's byte budget
        reaches the others first (Kafka's fairness rule)."""
        cached = self.partitions.pop(key, None)
        if cached is not None:
            self.partitions[key] = cached


@dataclass(frozen=True, slots=True)
class SessionError:
    """Answer this error (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH,
    FETCH_SESSION_TOPIC_ID_ERROR) with no partitions and session id 0."""

    error: int


@dataclass(frozen=True, slots=True)
class Sessionless:
    """Answer the listed partitions in full, session id 0."""


@dataclass(frozen=True, slots=True)
class FullFetch:
    """Answer the listed partitions in full, then try to create a session of them."""

    privileged: bool
    uses_topic_ids: bool


@dataclass(frozen=True, slots=True)
class IncrementalFetch:
    """Read the session's partitions, answer those with something new (incremental_fetch).
    `expected_epoch` is the session's epoch once this request was taken: a different one
    when answering means another request overtook it (INVALID_FETCH_SESSION_EPOCH)."""

    session: FetchSession
    expected_epoch: int
    listed: frozenset[PartitionKey]
    forgotten: tuple[CachedPartition, ...] = ()


FetchContext = SessionError | Sessionless | FullFetch | IncrementalFetch


class FetchSessionCache:
    """The leader's sessions (Kafka's FetchSessionCacheShard + FetchManager.newContext)."""

    def __init__(self, max_entries: int = DEFAULT_CACHE_SLOTS, eviction_ms: int = EVICTION_MS,
                 new_id: Callable[[], int] | None = None) -> None:
        if max_entries < 0:
            raise ValueError(f"max.incremental.fetch.session.cache.slots must be >= 0, "
                             f"not {max_entries}")
        self.max_entries = max_entries
        self.eviction_ms = eviction_ms
        self.sessions: dict[int, FetchSession] = {}
        self.evictions = 0
        self.total_partitions = 0  # as of each session's last touch (Kafka's metric)
        # Told each session that leaves the cache (the leader's index drops its partitions).
        self.on_remove: Callable[[FetchSession], None] | None = None
        self._by_follower: dict[int, int] = {}  # a follower's broker id -> its session
        # Random ids, hard to guess: another client's session is not one to take over.
        self._new_id = new_id or (lambda: 1 + secrets.randbelow(_MAX_EPOCH - 1))

    def __len__(self) -> int:
        return len(self.sessions)

    def get(self, session_id: int) -> FetchSession | None:
        return self.sessions.get(session_id)

    def new_context(self, version: int, session_id: int, epoch: int, is_follower: bool,
                    requested: Sequence[CachedPartition], forgotten: Sequence[PartitionKey],
                    now_ms: int) -> FetchContext:
        """What to do with a Fetch (Kafka's FetchManager.newContext)."""
        if version < SESSIONS_VERSION:
            return Sessionless()
        uses_ids = version >= TOPIC_IDS_VERSION
        if epoch in (INITIAL_EPOCH, FINAL_EPOCH):
            if session_id != INVALID_SESSION_ID:
                self.remove(session_id)  # a full fetch naming a session closes it
            if epoch == FINAL_EPOCH:
                return Sessionless()
            return FullFetch(is_follower, uses_ids)
        session = self.sessions.get(session_id)
        if session is None:
            return SessionError(Errors.FETCH_SESSION_ID_NOT_FOUND)
        if session.epoch != epoch:
            return SessionError(Errors.INVALID_FETCH_SESSION_EPOCH)
        if session.uses_topic_ids != uses_ids:
            return SessionError(Errors.FETCH_SESSION_TOPIC_ID_ERROR)
        listed, dropped = session.update(requested, forgotten)
        if not session.partitions:
            self.remove(session_id)  # nothing left to fetch: the session ends
            return Sessionless()
        self.touch(session, now_ms)
        session.epoch = next_epoch(session.epoch)
        return IncrementalFetch(session, session.epoch, frozenset(listed), tuple(dropped))

    def maybe_create_session(self, now_ms: int, privileged: bool, uses_topic_ids: bool,
                             partitions: Sequence[CachedPartition], follower: int = -1) -> int:
        """A new session of `partitions` if there is room or one may be evicted; its id, or
        INVALID_SESSION_ID (the client then keeps sending full fetches).

        A follower (`follower`: its broker id) fetches from this broker in one session, so its
        new session replaces its old one. Kafka keeps both until the old one is evicted, but
        a follower's fetcher drops a long poll when partitions are added (fetcher.py), and a
        dropped full fetch's session is one the follower never learns of: at topic creation
        that left dozens of sessions of a thousand partitions each, all watched."""
        if follower >= 0 and (old := self._by_follower.get(follower)) is not None:
            self.remove(old)
        if len(self.sessions) >= self.max_entries and not self._try_evict(
                privileged, len(partitions), now_ms):
            return INVALID_SESSION_ID
        session_id = self._new_id()
        while session_id in self.sessions or session_id == INVALID_SESSION_ID:
            session_id = self._new_id()
        session = FetchSession(session_id, privileged, uses_topic_ids, now_ms, now_ms,
                               next_epoch(INITIAL_EPOCH), {p.key: p for p in partitions})
        session.unsettled.update(session.partitions)  # the first read looks at each once
        self.sessions[session_id] = session
        if follower >= 0:
            session.replica_id = follower
            self._by_follower[follower] = session_id
        self.touch(session, now_ms)
        return session_id

    def _try_evict(self, privileged: bool, size: int, now_ms: int) -> bool:
        if not self.sessions:
            return False
        stalest = min(self.sessions.values(), key=lambda s: (s.last_used_ms, s.id))
        if now_ms - stalest.last_used_ms > self.eviction_ms:
            self._evict(stalest)
            return True
        candidates = [s for s in self.sessions.values()
                      if (s.evictable_by_privileged if privileged else s.evictable_by_all)]
        if not candidates:
            return False
        cheapest = min(candidates, key=lambda s: (s.privileged, s.cached_size, s.id))
        # The newcomer's key is (privileged, size, 0): it must not rank below the victim.
        if (privileged, size, 0) < (cheapest.privileged, cheapest.cached_size, cheapest.id):
            return False
        self._evict(cheapest)
        return True

    def _evict(self, session: FetchSession) -> None:
        self.evictions += 1
        self.remove(session.id)

    def remove(self, session_id: int) -> FetchSession | None:
        session = self.sessions.pop(session_id, None)
        if session is not None:
            if self._by_follower.get(session.replica_id) == session_id:
                del self._by_follower[session.replica_id]
            if session.cached_size >= 0:
                self.total_partitions -= session.cached_size
            if self.on_remove is not None:
                self.on_remove(session)
        return session

    def touch(self, session: FetchSession, now_ms: int) -> None:
        """Mark it used now and place it for eviction (Kafka's touch)."""
        session.last_used_ms = now_ms
        if session.cached_size >= 0:
            self.total_partitions -= session.cached_size
        session.cached_size = len(session.partitions)
        self.total_partitions += session.cached_size
        old = now_ms - session.creation_ms > self.eviction_ms
        session.evictable_by_privileged = not session.privileged or old
        session.evictable_by_all = old


# -- the fetching side ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """One fetch as the handler plans it: the partitions to list, those to forget, and the
    session id and epoch to send."""

    session_id: int
    epoch: int
    partitions: Sequence[FetchPartition]
    forgotten: Sequence[FetchPartition]

    @property
    def full(self) -> bool:
        return self.epoch in (INITIAL_EPOCH, FINAL_EPOCH)


@dataclass(frozen=True, slots=True)
class SessionResponse:
    """A Fetch answer: its top-level error, the session id it gives, and the partitions it
    lists by (topic name, partition)."""

    error: int
    session_id: int
    results: Mapping[tuple[str, int], FetchPartitionResult]


class FetchSessionHandler:
    """One fetching client's session with one broker (Kafka's FetchSessionHandler): what to
    list in each fetch, and how the answer moves the session on."""

    def __init__(self) -> None:
        self.session_id = INVALID_SESSION_ID
        self.epoch = INITIAL_EPOCH
        self._sent: dict[tuple[str, int], FetchPartition] = {}  # the session as the broker has it

    def build(self, wanted: Mapping[tuple[str, int], FetchPartition],
              maybe_changed: Iterable[tuple[str, int]] | None = None) -> SessionRequest:
        """The next fetch for `wanted` (every partition to fetch now, by topic and
        partition): all of them when the session is new, else only the changed ones.
        Passing the same FetchPartition object for an unchanged partition keeps this cheap.

        `maybe_changed`, when given, names every key that may differ from the last fetch
        (added, changed or dropped from `wanted`): only those are compared, so a fetcher
        following thousands of partitions, of which a few moved, does not walk them all at
        every round. Without it every key is compared."""
        if self.epoch == INITIAL_EPOCH:
            self._sent = dict(wanted)
            return SessionRequest(self.session_id, self.epoch, list(wanted.values()), ())
        if maybe_changed is None:
            sent, self._sent = self._sent, dict(wanted)
            changed = [p for key, p in wanted.items()
                       if (before := sent.get(key)) is not p and before != p]
            forgotten = [p for key, p in sent.items() if key not in wanted]
            return SessionRequest(self.session_id, self.epoch, changed, forgotten)
        sent = self._sent
        changed, forgotten = [], []
        for key in maybe_changed:
            now, before = wanted.get(key), sent.get(key)
            if now is None:
                if before is not None:
                    forgotten.append(before)
                    del sent[key]
            elif before is not now:
                if before != now:
                    changed.append(now)
                sent[key] = now
        return SessionRequest(self.session_id, self.epoch, changed, forgotten)

    def handle_response(self, request: SessionRequest, response: SessionResponse) -> bool:
        """Move the session on; False when the answer cannot be used (a session error or
        partitions it should not hold: the next fetch starts a new session)."""
        if response.error != Errors.NONE:
            if response.error == Errors.FETCH_SESSION_ID_NOT_FOUND:
                self._restart(INVALID_SESSION_ID)
            else:
                self._restart(self.session_id)
            return False
        answered = response.results.keys()
        if request.full:
            if set(answered) != {(p.topic, p.partition) for p in request.partitions}:
                self._restart(INVALID_SESSION_ID)
                return False
            self.session_id = response.session_id
            self.epoch = (INITIAL_EPOCH if response.session_id == INVALID_SESSION_ID
                          else next_epoch(INITIAL_EPOCH))
            return True
        if any(key not in self._sent for key in answered):
            self._restart(self.session_id)
            return False
        if response.session_id == INVALID_SESSION_ID:
            self._restart(INVALID_SESSION_ID)  # the broker closed the session
        else:
            self.epoch = next_epoch(self.epoch)
        return True

    def handle_error(self) -> None:
        """The fetch failed or its answer was dropped: the broker's session may have moved
        on without us, so the next fetch is full and replaces it (nextCloseExisting)."""
        self._restart(self.session_id)

    def _restart(self, session_id: int) -> None:
        self.session_id = session_id
        self.epoch = INITIAL_EPOCH
        self._sent = {}

