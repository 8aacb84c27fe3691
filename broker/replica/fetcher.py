"""Replica fetchers: a follower pulls its partitions from their leaders (Kafka's
ReplicaFetcherThread). One fetcher per source broker multiplexes every partition this broker
follows there into one long-polling Fetch, over one Kafka-protocol connection, in one fetch
session (KIP-227, broker/replica/fetch_sessions.py): after the first full fetch each one
lists only the partitions whose fetch state changed (log end, log start, epochs) and gets
back only those with news, so an idle follower's fetch of thousands of partitions lists none.

Per partition answer (reference/kafka-data-plane.md §3.4): a diverging epoch truncates first
and ignores that answer's data and HW (KAFKA-14704); OFFSET_OUT_OF_RANGE asks the leader's
offsets and truncates or restarts the log, never halts (KAFKA-7414); records are appended as
the leader sent them and the HW becomes min(leader HW, own LEO).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from broker.api import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    DivergingEpoch,
    FetchParams,
    FetchPartition,
    FetchPartitionResult,
    ListOffsetsPartition,
    ListOffsetsResult,
)
from broker.records import AppendError
from broker.replica.config import ReplicaConfig, TopicPartition
from broker.replica.fetch_sessions import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    FetchSessionHandler,
    SessionResponse,
)
from kraft.errors import Errors, error_name
from kraft.log.base import CorruptRecordError
from metadata.image import MetadataImage

if TYPE_CHECKING:
    from broker.log.log_manager import LogManager
    from broker.replica.partition import Partition

log = logging.getLogger(__name__)

# Errors after which the leader will know better soon: retry after a short pause.
_RETRIABLE_SOON = {Errors.UNKNOWN_LEADER_EPOCH, Errors.NOT_LEADER_OR_FOLLOWER,
                   Errors.FENCED_LEADER_EPOCH, Errors.UNKNOWN_TOPIC_OR_PARTITION,
                   Errors.LEADER_NOT_AVAILABLE, Errors.KAFKA_STORAGE_ERROR,
                   Errors.UNKNOWN_TOPIC_ID, Errors.INCONSISTENT_TOPIC_ID}


class LeaderClient(Protocol):
    """What a fetcher needs of a Kafka-protocol connection to the leader broker."""

    async def fetch_session(
        self, params: FetchParams, session_id: int, epoch: int,
        forgotten: Sequence[FetchPartition], names: Mapping[str, str],
    ) -> SessionResponse:
        """A Fetch listing params.partitions in session `session_id` at `epoch`; the
        answer's partitions by (topic, partition), topic ids named by `names`."""
        ...

    async def list_offsets(
        self, replica_id: int, partitions: list[ListOffsetsPartition]
    ) -> list[ListOffsetsResult]: ...

    async def close(self) -> None: ...


class FollowedReplicas(Protocol):
    """What the fetchers need of the replicas they feed (ReplicaManager, which imports this
    module: the fetchers call up through this, never import the manager)."""

    @property
    def image(self) -> MetadataImage: ...

    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]: ...

    @property
    def logs(self) -> LogManager: ...

    def follower(self, tp: TopicPartition, leader: int) -> Partition | None:
        """The partition if this broker still follows `leader` for it."""
        ...

    def on_follower_append(self, partition: Partition, leader_hw: int) -> None: ...

    def on_truncated(self, partition: Partition, offset: int, cut: tuple[int, int],
                     why: str) -> None: ...


Connect = Callable[[str, int], Awaitable[LeaderClient]]
BLOCKED_POLL_S = 0.05
# How often a fetcher looks over every partition it follows, not only those marked since its
# last round: a log start moved by local retention is noticed this late (nothing marks it; it
# only matters to the leader's low watermark, which DeleteRecords waits on through the
# leader's own log start, reported back at once).
SWEEP_S = 1.0
# How long a closing fetcher waits for the leader's answer to its session's close (the
# leader drops the session when the request arrives; the answer may queue behind a long poll).
CLOSE_SESSION_WAIT_S = 0.2


@dataclass
class _Fetching:
    leader_epoch: int
    retry_at: float = 0.0  # loop time before which the partition sits out (after an error)
    # The replica as of the last round, and the partition as last asked for: the same
    # FetchPartition object while its fetch state is unchanged, so the session handler skips
    # it with an identity check. Every round checks every partition: keep this cheap.
    partition: Partition | None = None
    request: FetchPartition | None = None

    def request_for(self, tp: TopicPartition, partition: Partition, max_bytes: int
                    ) -> FetchPartition:
        log_ = partition.log
        last = self.request
        if last is None or last.fetch_offset != log_.end_offset \
                or last.log_start_offset != log_.start_offset \
                or last.last_fetched_epoch != log_.latest_epoch \
                or partition is not self.partition or last.partition_max_bytes != max_bytes:
            # (The leader epoch and topic id change only with a new replica or epoch, which
            # starts a new _Fetching.)
            self.partition = partition
            last = self.request = FetchPartition(
                tp[0], tp[1], log_.end_offset, max_bytes,
                current_leader_epoch=partition.leader_epoch,
                last_fetched_epoch=log_.latest_epoch, log_start_offset=log_.start_offset,
                topic_id=log_.topic_id)
        return last


class FetcherManager:
    def __init__(self, broker_id: int, config: ReplicaConfig,
                 broker_epoch: Callable[[], int], connect: Connect) -> None:
        self.broker_id = broker_id
        self.config = config
        self.broker_epoch = broker_epoch
        self.connect = connect
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._manager: FollowedReplicas | None = None
        # Leaders whose port refused a connection (no process listens: it died), with the
        # broker epoch they had then; cleared by a successful connect or a new registration.
        self.unreachable: dict[int, int] = {}
        # Brokers this one may not reach: the chaos tool's injected network partition
        # (internal.test.faults.dir `blocked`), applied by server/data_plane_faults.py.
        self.blocked: frozenset[int] = frozenset()
        self.replication_bytes_in = 0  # record bytes appended as a follower (a metric)
        # While a large metadata change is applied in turns (ReplicaManager), partitions added
        # to a fetcher join its next round instead of cutting its long poll short at every
        # turn: each cut starts a new session, a full fetch of all its partitions, so
        # thousands of partitions added turn by turn cost O(n^2) to encode and to answer.
        # The end of the change cuts each such long poll once.
        self._holds = 0
        self._held: set[ReplicaFetcher] = set()

    def bind(self, manager: FollowedReplicas) -> None:
        self._manager = manager

    @property
    def manager(self) -> FollowedReplicas:
        assert self._manager is not None
        return self._manager

    def add(self, tp: TopicPartition, leader: int) -> None:
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = ReplicaFetcher(self, leader)
            fetcher.start()
        partition = self.manager.partitions[tp]
        fetcher.add(tp, partition.leader_epoch)

    def remove(self, tp: TopicPartition) -> None:
        for fetcher in self.fetchers.values():
            fetcher.remove(tp)

    @property
    def holding(self) -> bool:
        return self._holds > 0

    def hold(self) -> None:
        """Added partitions wait for their fetcher's next round until `release`."""
        self._holds += 1

    def release(self) -> None:
        self._holds -= 1
        if self._holds == 0:
            held, self._held = self._held, set()
            for fetcher in held:
                fetcher.restart()

    def held(self, fetcher: ReplicaFetcher) -> None:
        self._held.add(fetcher)

    def refresh(self, image: MetadataImage) -> None:
        """Brokers changed: a fetcher whose leader moved to a new address reconnects; a
        broker registered again (a new process) is no longer taken for dead."""
        for fetcher in self.fetchers.values():
            fetcher.check_endpoint(image)
        for broker_id, epoch in list(self.unreachable.items()):
            registration = image.cluster.broker(broker_id)
            if registration is None or registration.epoch != epoch:
                del self.unreachable[broker_id]

    def mark_unreachable(self, broker_id: int) -> None:
        registration = self.manager.image.cluster.broker(broker_id)
        if registration is not None and broker_id not in self.unreachable:
            log.info("broker %d refuses connections: taking it for dead until it registers "
                     "again or answers (clients are told its partitions have no leader)",
                     broker_id)
            self.unreachable[broker_id] = registration.epoch

    def mark_reachable(self, broker_id: int) -> None:
        self.unreachable.pop(broker_id, None)

    async def close(self) -> None:
        fetchers, self.fetchers = list(self.fetchers.values()), {}
        await asyncio.gather(*(f.close() for f in fetchers), return_exceptions=True)


class ReplicaFetcher:
    def __init__(self, owner: FetcherManager, leader: int) -> None:
        self.owner = owner
        self.leader = leader
        self.partitions: dict[TopicPartition, _Fetching] = {}
        self._task: asyncio.Task[None] | None = None
        self._wakeup = asyncio.Event()
        self._restart = False
        self._client: LeaderClient | None = None
        self._endpoint: tuple[str, int] | None = None
        self.session = FetchSessionHandler()
        self._names: dict[str, str] = {}  # topic id -> name, for the session's answers
        # What the next fetch asks for, kept from round to round: a round looks only at the
        # partitions marked since the last one (added, removed, answered, out of their
        # back-off) and, every SWEEP_S, at all of them. With thousands followed and a few
        # written to, a round per leader append walking them all was a third of a busy
        # broker's event loop (issue 28's paced producer at 3,000 partitions).
        self._wanted: dict[TopicPartition, FetchPartition] = {}
        self._states: dict[TopicPartition, _Fetching] = {}  # the state each was built from
        self._marked: set[TopicPartition] = set()
        self._backing_off: set[TopicPartition] = set()
        self._next_sweep = 0.0
        # The partitions of _wanted updated since the session handler last saw it (None: any).
        self._unsent: set[TopicPartition] | None = None
        self.fetches = 0

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = _Fetching(leader_epoch)
        self._marked.add(tp)
        if self.owner.holding:
            self.owner.held(self)
            self._wakeup.set()  # an idle fetcher starts; one in a long poll waits it out
            return
        self.restart()

    def restart(self) -> None:
        """A new partition must not wait out a long poll that does not include it."""
        self._restart = True
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        if self.partitions.pop(tp, None) is not None or tp in self._wanted:
            self._marked.add(tp)

    def check_endpoint(self, image: MetadataImage) -> None:
        if self._endpoint is not None and self._resolve(image) != self._endpoint:
            self._restart = True
            self._wakeup.set()

    def _resolve(self, image: MetadataImage) -> tuple[str, int] | None:
        broker = image.cluster.broker(self.leader)
        if broker is None:
            return None
        for endpoint in broker.endpoints:
            if endpoint.name == self.owner.config.inter_broker_listener:
                return endpoint.host, endpoint.port
        return None

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._close_session()
        await self._disconnect()

    async def _close_session(self) -> None:
        """Leaving: the leader drops our session now (epoch -1) instead of holding its slot
        until it is evicted. Best effort: a leader gone or slow keeps it until then."""
        client, session_id = self._client, self.session.session_id
        if client is None or session_id == INVALID_SESSION_ID:
            return
        params = FetchParams((), max_wait_ms=0, replica_id=self.owner.broker_id,
                             replica_epoch=self.owner.broker_epoch())
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CLOSE_SESSION_WAIT_S):
                await client.fetch_session(params, session_id, FINAL_EPOCH, (), {})

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()

    async def _run(self) -> None:
        backoff = self.owner.config.replica_fetch_backoff_ms / 1000
        just_failed = False
        while True:
            loop = asyncio.get_running_loop()
            if self.leader in self.owner.blocked:
                await self._disconnect()  # partitioned: nothing gets through either way
                await asyncio.sleep(BLOCKED_POLL_S)
                continue
            now = loop.time()
            self._refresh(now)
            if not self._wanted:
                self._wakeup.clear()
                waits = [state.retry_at - now for tp in self._backing_off
                         if (state := self.partitions.get(tp)) is not None]
                if self.partitions:
                    waits.append(self._next_sweep - now)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wakeup.wait(), min(waits, default=None))
                continue
            try:
                client = await self._connected()
                if client is None:
                    await asyncio.sleep(backoff)
                    continue
                self._restart = False
                await self._fetch_once(client)
                just_failed = False
            except (ConnectionError, OSError, TimeoutError) as exc:
                if getattr(exc, "refused", False):
                    self.owner.mark_unreachable(self.leader)
                log.info("fetching from broker %d failed (%s); reconnecting", self.leader, exc)
                await self._disconnect()
                # One immediate reconnect after a broken fetch tells a dead leader (refused)
                # from a hiccup; after that, back off.
                if just_failed or getattr(exc, "refused", False):
                    await asyncio.sleep(backoff)
                just_failed = True
            except Exception:
                # A bug must not end replication from this leader for good: log it loudly,
                # start over with a fresh connection after a pause, as Kafka's fetcher does.
                log.exception("fetching from broker %d failed unexpectedly; retrying",
                              self.leader)
                await self._disconnect()
                await asyncio.sleep(backoff)

    async def _connected(self) -> LeaderClient | None:
        manager = self.owner.manager
        endpoint = self._resolve(manager.image)
        if endpoint != self._endpoint:
            await self._disconnect()
        if self._client is None:
            if endpoint is None:
                return None
            self._endpoint = endpoint
            self._client = await self.owner.connect(*endpoint)
            self.owner.mark_reachable(self.leader)
        return self._client

    def _refresh(self, now: float) -> None:
        """Bring the next fetch's partitions up to date: those marked since the last round,
        or all of them once per SWEEP_S."""
        marked, self._marked = self._marked, set()
        for tp in [tp for tp in self._backing_off
                   if (s := self.partitions.get(tp)) is None or s.retry_at <= now]:
            self._backing_off.discard(tp)
            marked.add(tp)
        if now < self._next_sweep:
            for tp in marked:
                self._update(tp, self.partitions.get(tp), now)
            return
        self._next_sweep = now + SWEEP_S
        for tp in marked:
            self._update(tp, self.partitions.get(tp), now)
        # The sweep rebuilds only what may have moved unmarked: a log start (retention), a
        # replica, or a state out of step with what is asked. Rebuilding every request was
        # 8 % of a follower's loop with 2,000 partitions followed (issue 28).
        replicas = self.owner.manager.partitions
        wanted, states = self._wanted, self._states
        for tp, state in self.partitions.items():
            request = wanted.get(tp)
            if request is None or states.get(tp) is not state \
                    or (partition := replicas.get(tp)) is not state.partition \
                    or partition is None \
                    or partition.log.start_offset != request.log_start_offset:
                self._update(tp, state, now)
        if not wanted.keys() <= self.partitions.keys():  # (a set comparison in C)
            for tp in [tp for tp in wanted if tp not in self.partitions]:
                self._update(tp, None, now)

    def _update(self, tp: TopicPartition, state: _Fetching | None, now: float | None) -> None:
        """What to ask for `tp`, or nothing: gone, backing off (unless `now` is None), or
        no longer following this leader in this epoch (the leader is never this broker)."""
        if self._unsent is not None:
            self._unsent.add(tp)
        partition = None
        if state is not None and (now is None or state.retry_at <= now):
            partition = self.owner.manager.partitions.get(tp)
        if partition is None or state is None or partition.leader != self.leader \
                or partition.leader_epoch != state.leader_epoch:
            self._wanted.pop(tp, None)
            self._states.pop(tp, None)
            return
        request = state.request_for(tp, partition, self.owner.config.replica_fetch_max_bytes)
        self._wanted[tp] = request
        self._states[tp] = state
        if request.topic_id is not None and request.topic_id not in self._names:
            self._names[request.topic_id] = tp[0]

    async def _fetch_once(self, client: LeaderClient,
                          ready: dict[TopicPartition, _Fetching] | None = None) -> None:
        """One fetch: of the partitions kept up to date round by round, or of exactly
        `ready` (tests drive single rounds so)."""
        config = self.owner.config
        names = self._names
        if ready is None:
            self._refresh(asyncio.get_running_loop().time())
        else:
            self._unsent = None
            for tp in [tp for tp in self._wanted if tp not in ready]:
                self._update(tp, None, None)
            for tp, state in ready.items():
                self._update(tp, state, None)
            self._next_sweep = 0.0  # the next round of the loop looks at every partition
        wanted = self._wanted
        if not wanted:
            await asyncio.sleep(0)
            return
        plan = self.session.build(wanted, self._unsent)
        self._unsent = set()
        params = FetchParams(
            plan.partitions, max_wait_ms=config.replica_fetch_wait_max_ms, min_bytes=1,
            max_bytes=config.replica_fetch_response_max_bytes,
            replica_id=self.owner.broker_id, replica_epoch=self.owner.broker_epoch())
        fetch = asyncio.ensure_future(
            client.fetch_session(params, plan.session_id, plan.epoch, plan.forgotten, names))
        wake = asyncio.ensure_future(self._wakeup.wait())
        try:
            await asyncio.wait({fetch, wake}, return_when=asyncio.FIRST_COMPLETED)
            if not fetch.done():
                # The partition set grew or the leader moved: drop this long poll instead of
                # waiting it out (the client discards the late answer; a moved leader's
                # connection is replaced by _connected).
                self._wakeup.clear()
                if self._restart:
                    return
                await fetch
        finally:
            wake.cancel()
            if not fetch.done():
                fetch.cancel()
                await asyncio.gather(fetch, return_exceptions=True)
            if fetch.cancelled() or fetch.exception() is not None:
                # The leader may have moved the session on with an answer we never read.
                self.session.handle_error()
        self._wakeup.clear()
        response = fetch.result()
        self.fetches += 1
        if not self.session.handle_response(plan, response):
            if response.error not in (Errors.NONE, Errors.FETCH_SESSION_ID_NOT_FOUND):
                log.info("fetch session %d with broker %d: %s; starting a new one",
                         plan.session_id, self.leader, error_name(response.error))
            return
        manager = self.owner.manager
        # Answered partitions' logs may have moved: the next round looks at them again.
        self._marked.update(response.results)
        states = self._states
        for tp, result in response.results.items():
            sent = states.get(tp)
            partition = None if sent is None else sent.partition
            if sent is None or self.partitions.get(tp) is not sent or partition is None \
                    or manager.follower(tp, self.leader) is not partition \
                    or partition.leader_epoch != sent.leader_epoch:
                continue  # metadata moved on while the fetch was out
            await self._handle(client, tp, partition, result)

    async def _handle(self, client: LeaderClient, tp: TopicPartition, partition: Partition,
                      result: FetchPartitionResult) -> None:
        manager = self.owner.manager
        state = self.partitions.get(tp)
        if state is None:
            return
        if result.diverging_epoch is not None:
            self._truncate_diverging(partition, result.diverging_epoch)
            return
        if result.error == Errors.OFFSET_OUT_OF_RANGE:
            await self._handle_out_of_range(client, tp, partition)
            return
        if result.error != Errors.NONE:
            if result.error not in _RETRIABLE_SOON:
                log.warning("fetching %s-%d from broker %d: %s", *tp, self.leader,
                            error_name(result.error))
            self._back_off(tp, state)
            return
        if result.records:
            try:
                partition.log.append_as_follower(result.records)
            except (AppendError, CorruptRecordError, ValueError) as exc:
                log.error("cannot append what broker %d sent for %s-%d: %s", self.leader,
                          *tp, exc)
                if isinstance(exc, AppendError) and exc.code == Errors.KAFKA_STORAGE_ERROR:
                    manager.logs.fail_dir(partition.log.directory, exc)
                self._back_off(tp, state)
                return
            self.owner.replication_bytes_in += len(result.records)
        if result.log_start_offset > partition.log.start_offset:
            partition.log.advance_start_offset(
                min(result.log_start_offset, partition.log.end_offset))
        manager.on_follower_append(partition, result.high_watermark)

    def _back_off(self, tp: TopicPartition, state: _Fetching) -> None:
        """The partition sits out fetches for replica.fetch.backoff.ms."""
        state.retry_at = asyncio.get_running_loop().time() + \
            self.owner.config.replica_fetch_backoff_ms / 1000
        self._backing_off.add(tp)
        self._marked.add(tp)

    def _truncate_diverging(self, partition: Partition, diverging: DivergingEpoch) -> None:
        """§3.4: truncate to where our log and the leader's agree on `diverging.epoch`."""
        log_ = partition.log
        local_epoch, local_end = log_.end_offset_for_epoch(diverging.epoch)
        leo = log_.end_offset
        if local_epoch == diverging.epoch:
            target = min(diverging.end_offset, local_end, leo)
        elif local_epoch >= 0:
            target = min(local_end, leo)  # we never had that epoch: check again next fetch
        else:
            target = min(diverging.end_offset, leo)
        cut = partition.truncate_to(target)
        self.owner.manager.on_truncated(
            partition, target, cut,
            f"diverging epoch {diverging.epoch} ending at {diverging.end_offset} on leader "
            f"{self.leader}")

    async def _handle_out_of_range(self, client: LeaderClient, tp: TopicPartition,
                                   partition: Partition) -> None:
        """KAFKA-7414: ask the leader's ends; truncate to its end or restart at its start.

        Each answer is acted on only if this broker still follows the same leader in the same
        epoch: metadata applied while a ListOffsets was out may have made it the leader (an
        unclean election, say), and its log then holds writes it acknowledged. Kafka holds the
        partition's fetcher lock across this and makeLeader waits for it; here every
        metadata change runs on the event loop, so a re-check after each await is the same."""
        me = self.owner.broker_id
        epoch = partition.leader_epoch
        latest = (await client.list_offsets(
            me, [ListOffsetsPartition(tp[0], tp[1], LATEST_TIMESTAMP, epoch)]))[0]
        if not self._still_following(tp, partition, epoch):
            return
        if latest.error != Errors.NONE:
            state = self.partitions.get(tp)
            if state is not None:
                self._back_off(tp, state)
            return
        log_ = partition.log
        if latest.offset < log_.end_offset:
            cut = partition.truncate_to(latest.offset)
            self.owner.manager.on_truncated(partition, latest.offset, cut,
                                            "the leader's log ends below ours")
            return
        earliest = (await client.list_offsets(
            me, [ListOffsetsPartition(tp[0], tp[1], EARLIEST_TIMESTAMP, epoch)]))[0]
        if not self._still_following(tp, partition, epoch):
            return
        if earliest.error == Errors.NONE and earliest.offset > log_.end_offset:
            log.info("%s-%d: the leader's log starts at %d, past our end %d: starting over",
                     *tp, earliest.offset, log_.end_offset)
            log_.truncate_fully_and_start_at(earliest.offset)
            partition.high_watermark = earliest.offset

    def _still_following(self, tp: TopicPartition, partition: Partition, epoch: int) -> bool:
        """This broker still follows this fetcher's leader for `tp`, with the same replica
        object in the same leader epoch (an epoch change restarts the partition's fetching)."""
        return (self.owner.manager.follower(tp, self.leader) is partition
                and partition.leader_epoch == epoch and tp in self.partitions)
