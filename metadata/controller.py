"""QuorumController: the active controller is the Raft leader.

A write runs a rule (a pure function of the latest image, see topics.py / replication.py) one
at a time, as Kafka's single event queue does. Its records are applied at once to a
*speculative* image — committed state plus every write still in flight — so the next write
validates against them, then appended as one atomic batch; the caller gets the response only
after the batch commits. Writes are pipelined: each waits for its own commit outside the queue.

Brokers are fenced when their session expires (no heartbeat for broker.session.timeout.ms,
timed on a monotonic clock, so a step of the wall clock changes nothing) and, much sooner,
when their liveness stream breaks and is not reopened within a grace window
(metadata/broker_liveness.py): both write the same fencing records.

State still changes only by replaying records: the controller is one of the MetadataLoader's
publishers, so the committed image is the loader's, and the speculative one comes from
replaying the same records a step ahead. Losing leadership (or any failed append) drops the
speculative image and fails every waiting write with NOT_CONTROLLER. Gaining it needs no reload:
the Raft client announces this node's leadership only once the loader holds everything
committed before the new epoch began, and the controller starts from that image.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from kraft.client import LeaderAndEpoch, RaftClient, RaftError
from kraft.errors import Errors
from metadata.broker_liveness import (
    DEFAULT_GRACE_MS,
    BrokerLivenessTracker,
    LivenessProbe,
    LivenessStream,
    StreamState,
)
from metadata.brokers import (
    BrokerHeartbeatManager,
    BrokerHeartbeatReply,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    process_heartbeat,
    register_broker,
)
from metadata.configs import METADATA_VERSION, SUPPORTED_FEATURES
from metadata.delta import MetadataDelta
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.loader import LoaderManifest
from metadata.producer_ids import ProducerIdsBlock, allocate_producer_ids, check_broker_epoch
from metadata.records import Endpoint, FeatureLevelRecord, NoOpRecord, Record, encode_record
from metadata.replication import balance_partition_leaders, elect_unclean_leaders, fence_broker

log = logging.getLogger(__name__)

# Kafka splits non-atomic results into batches of 10,000 records; in Python 10,000 records
# of encoding and replay hold the event loop too long, so slices are smaller.
NON_ATOMIC_SLICE = 1_000
PERIODIC_TICK_S = 1.0
UNCLEAN_ELECTION_INTERVAL_S = 300  # Kafka's unclean.leader.election.interval.ms (internal)


def _wall_ms() -> int:
    return int(time.time() * 1000)


def _monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


T = TypeVar("T")
Rule = Callable[[MetadataImage], ControllerResult[T]]


class NotControllerError(ControllerApiError):
    """This node is not the active controller; `leader_id` says who may be (-1: unknown)."""

    def __init__(self, leader_id: int, message: str) -> None:
        super().__init__(Errors.NOT_CONTROLLER, message)
        self.leader_id = leader_id


# Between probes of a broker whose stream broke (it answered: alive, or not yet all gone).
PROBE_FIRST_PAUSE_S = 0.01
PROBE_MAX_PAUSE_S = 0.1


class QuorumController:
    def __init__(
        self,
        client: RaftClient,
        noop_interval_ms: int = 500,
        session_timeout_ms: int = 9000,
        liveness_grace_ms: int = DEFAULT_GRACE_MS,
        liveness_probe: LivenessProbe | None = None,
        session_clock_ms: Callable[[], int] = _monotonic_ms,
        wall_clock_ms: Callable[[], int] = _wall_ms,
        bootstrap_records: Sequence[Record] = (),
    ) -> None:
        """Install it as a publisher of the process's MetadataLoader. `liveness_grace_ms`
        (broker.liveness.grace.ms; 0 turns the fast path off): how long a broker whose
        liveness stream broke has to open a new one before it is fenced. `liveness_probe`
        (broker.liveness.probe.enable): asked with the broker's registered listeners when its
        stream breaks; True (every one refused a connection) ends the window at once.

        Broker sessions and liveness windows run on `session_clock_ms`, a monotonic clock as
        in Kafka's BrokerHeartbeatManager: a step of the wall clock must neither fence every
        broker (forward) nor stop fencing (backward). `wall_clock_ms` only stamps records.
        `bootstrap_records` (the format's bootstrap.checkpoint: SCRAM credentials) follow
        metadata.version in a new cluster's first batch."""
        self.client = client
        self._bootstrap_records = tuple(bootstrap_records)
        self._session_clock = session_clock_ms
        self._wall_clock = wall_clock_ms
        self.noop_interval_ms = noop_interval_ms
        self.heartbeats = BrokerHeartbeatManager(session_timeout_ms)
        self.liveness = BrokerLivenessTracker(liveness_grace_ms)
        self._liveness_probe = liveness_probe
        self._probes: set[asyncio.Task[None]] = set()
        self._liveness_task: asyncio.Task[None] | None = None
        self._liveness_changed = asyncio.Event()
        self._inactive = asyncio.Event()  # set whenever this controller is not active
        self._inactive.set()
        self._fencing_task: asyncio.Task[None] | None = None
        self._bootstrap_task: asyncio.Task[None] | None = None
        self._periodic_task: asyncio.Task[None] | None = None
        self._queue = asyncio.Lock()
        self._latest: MetadataImage | None = None  # set only while active
        self._active_epoch = -1
        self._renounced_epoch = -1
        self._next_offset = 0
        self._control_records_seen = 0
        self._noop_task: asyncio.Task[None] | None = None
        self._committed = EMPTY_IMAGE
        self._committed_next = 0  # the offset after the last batch the loader published
        self._applied = asyncio.Event()  # set whenever the loader moves or leadership changes

    # -- queries -------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._latest is not None

    @property
    def active_epoch(self) -> int:
        """The Raft epoch this controller is active in (-1: not active)."""
        return self._active_epoch

    @property
    def latest_image(self) -> MetadataImage | None:
        """The speculative image — committed state plus writes in flight — while active."""
        return self._latest

    @property
    def committed_image(self) -> MetadataImage:
        return self._committed

    @property
    def leader_id(self) -> int:
        """The Raft leader as this node knows it (-1: unknown)."""
        return self.client.leader_and_epoch().leader_id

    @property
    def node_id(self) -> int:
        node_id = self.client.node_id
        return -1 if node_id is None else node_id

    # -- writes ------------------------------------------------------------------------------------

    async def write(self, rule: Rule[T]) -> T:
        """Run `rule` on the latest image; append its records; answer once they commit."""
        append: Awaitable[int] | None = None
        pending: list[asyncio.Future[int]] | None = None
        async with self._queue:
            latest = self._require_active()
            result = rule(latest)  # ControllerApiError propagates: nothing was written
            if not result.records:
                pass
            elif result.atomic:
                # The common case, without a task of its own: `submit` queues the records
                # now, so appends reach the log in the order their rules ran, ahead of any
                # voter-change control batch the Raft layer appends later, and concurrent
                # writes still share one Raft batch per loop turn.
                append = self.client.submit(self._apply(result.records))
            else:
                # A big non-atomic result (fencing a broker in 100,000 ISRs) is applied and
                # appended a slice at a time, yielding to the event loop between slices, so
                # the Raft leader keeps answering fetches (check-quorum) meanwhile.
                pending = []
                try:
                    for start in range(0, len(result.records), NON_ATOMIC_SLICE):
                        if start:
                            await asyncio.sleep(0)
                            self._require_active()
                        pending.append(self._apply_and_append(
                            result.records[start : start + NON_ATOMIC_SLICE]))
                except NotControllerError:
                    # Leadership went mid-way: what was appended fails or commits on its own.
                    await asyncio.gather(*pending, return_exceptions=True)
                    raise
            expected_last = self._next_offset - 1
        if append is not None:
            await self._committed_as(append, expected_last)
        elif pending is not None:
            await self._committed_as(asyncio.gather(*pending), expected_last)
        else:
            await self._barrier()  # a write with no records waits for the writes before it
        return result.response

    async def _committed_as(self, appended: Awaitable[Any], expected_last: int) -> None:
        """Wait for an append (or the slices of one write) to commit where the speculative
        image put it; otherwise renounce: that image can no longer be trusted."""
        try:
            last = await appended
        except RaftError as exc:
            self._renounce(f"append failed: {exc}")
            raise NotControllerError(self.leader_id, str(exc)) from exc
        if isinstance(last, list):
            last = last[-1]
        if last != expected_last:
            self._renounce(f"records landed at {last}, expected {expected_last}")
            raise NotControllerError(-1, "the log moved under the controller")

    def _apply(self, records: Sequence[Record]) -> list[bytes]:
        """Replay `records` onto the speculative image; their encoding, to append."""
        # Encode first: a record that cannot be encoded must not reach the image.
        encoded = [encode_record(record) for record in records]
        self._skip_control_records()
        base = self._next_offset
        assert self._latest is not None
        delta = MetadataDelta(self._latest)
        now = self._wall_clock()
        for index, record in enumerate(records):
            delta.replay(record, base + index, self._active_epoch, now)
        self._latest = delta.apply()
        self._next_offset = base + len(records)
        return encoded

    def _apply_and_append(self, records: Sequence[Record]) -> asyncio.Future[int]:
        """Replay `records` onto the speculative image and append them as one batch."""
        return asyncio.ensure_future(self.client.submit(self._apply(records)))

    # -- broker lifecycle ----------------------------------------------------------------------

    async def register_broker(self, request: BrokerRegistrationRequest, cluster_id: str) -> int:
        """The broker's epoch: the offset of its registration record, once committed."""
        return await self.write(lambda image: register_broker(
            image, request, cluster_id, self._next_offset, self.heartbeats,
            self._session_clock()))

    async def broker_heartbeat(self, request: BrokerHeartbeatRequest) -> BrokerHeartbeatReply:
        def rule(image: MetadataImage) -> ControllerResult[BrokerHeartbeatReply]:
            result = process_heartbeat(image, request, self.heartbeats, self._session_clock())
            if result.response.in_controlled_shutdown:
                self.heartbeats.note_controlled_shutdown(
                    request.broker_id, self._next_offset + len(result.records))
            return result

        return await self.write(rule)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> ProducerIdsBlock:
        """The next block of producer ids for a registered broker, once its record commits."""
        return await self.write(functools.partial(
            allocate_producer_ids, broker_id=broker_id, broker_epoch=broker_epoch))

    # -- liveness streams ------------------------------------------------------------------------

    def open_liveness_stream(self, broker_id: int, broker_epoch: int) -> LivenessStream:
        """A broker opened its liveness stream here: NOT_CONTROLLER unless active,
        STALE_BROKER_EPOCH unless registered with that epoch."""
        check_broker_epoch(self._require_active(), broker_id, broker_epoch)
        self._liveness_changed.set()
        log.info("broker %d opened its liveness stream (broker epoch %d)", broker_id,
                 broker_epoch)
        return self.liveness.opened(broker_id, broker_epoch)

    def close_liveness_stream(self, stream: LivenessStream) -> None:
        """The broker ended its stream with a goodbye: only the session timeout applies."""
        self.liveness.closed(stream)
        self._liveness_changed.set()

    def lose_liveness_stream(self, stream: LivenessStream) -> None:
        """The stream ended without a goodbye: the broker's grace window starts."""
        if self._latest is None:
            return  # streams ending because this controller stepped down mean nothing
        deadline = self.liveness.lost(stream, self._session_clock())
        if deadline is not None:
            log.info("broker %d's liveness stream broke; fencing it unless it reconnects "
                     "within %d ms", stream.broker_id, self.liveness.grace_ms)
            registration = self._latest.cluster.broker(stream.broker_id)
            if self._liveness_probe is not None and registration is not None:
                probe = asyncio.ensure_future(self._probe(stream, registration.endpoints))
                self._probes.add(probe)
                probe.add_done_callback(self._probes.discard)
        self._liveness_changed.set()

    async def _probe(self, stream: LivenessStream, endpoints: tuple[Endpoint, ...]) -> None:
        """Ask the broker's listeners until every one refuses (its grace window ends now), the
        window ends, or a new stream replaces this one. Asked again after an answer because a
        dying process's sockets close one by one: its stream can break a moment before its
        listeners go."""
        assert self._liveness_probe is not None
        deadline = self._session_clock() + self.liveness.grace_ms
        pause_s = PROBE_FIRST_PAUSE_S
        while self.liveness.state(stream.broker_id) is StreamState.LOST:
            left_s = (deadline - self._session_clock()) / 1000
            if left_s <= 0:
                return
            if await self._liveness_probe(endpoints, left_s):
                if self.liveness.refused(stream):
                    log.info("broker %d's listeners refuse connections: its process is gone",
                             stream.broker_id)
                    self._liveness_changed.set()
                return
            await asyncio.sleep(pause_s)
            pause_s = min(2 * pause_s, PROBE_MAX_PAUSE_S)

    async def until_inactive(self) -> None:
        """Returns once this controller is not (or no longer) active."""
        await self._inactive.wait()

    async def _fence_dead_brokers(self, epoch: int) -> None:
        """Fence brokers whose liveness stream broke and stayed broken for the grace window,
        one per write (as session expiry does), re-checked inside the rule."""
        held: list[int] = []
        while self._active_epoch == epoch:
            latest = self._latest
            if latest is None:
                return
            now = self._session_clock()
            if (new_held := self.liveness.held_back(latest, now)) != held and new_held:
                log.warning("liveness streams of brokers %s broke together with those of "
                            "most others: leaving them to broker.session.timeout.ms", new_held)
            held = new_held
            dead = self.liveness.dead_brokers(latest, now)
            if dead:
                broker_id = dead[0]
                log.info("fencing broker %d: its liveness stream broke and it did not "
                         "reconnect within %d ms (or its listeners refused)", broker_id,
                         self.liveness.grace_ms)
                try:
                    await self.write(functools.partial(self._fence_if_dead, broker_id=broker_id))
                    continue  # look again at once: another window may have ended meanwhile
                except ControllerApiError as exc:
                    log.warning("fencing broker %d failed: %s", broker_id, exc)
            deadline = self.liveness.next_deadline_ms(now)
            timeout = None if deadline is None else max(0, deadline - now) / 1000
            self._liveness_changed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._liveness_changed.wait(), timeout)

    def _fence_if_dead(self, image: MetadataImage, broker_id: int) -> ControllerResult[None]:
        if not self.liveness.is_dead(image, broker_id, self._session_clock()):
            return ControllerResult((), None)  # it reconnected meanwhile
        return fence_broker(image, broker_id)

    async def _fence_stale_brokers(self, epoch: int) -> None:
        """Fence brokers whose session expired, one per step (Kafka's maybeFenceOneStaleBroker)."""
        interval = max(0.01, min(0.25, self.heartbeats.session_timeout_ms / 10_000))
        loop = asyncio.get_running_loop()
        skipped = False
        while self._active_epoch == epoch:
            slept_from = loop.time()
            await asyncio.sleep(interval)
            if loop.time() - slept_from > 2 * interval and not skipped:
                # The process stood still (SIGSTOP, a VM pause): every session looks expired,
                # and the quorum has likely moved on. One round later the Raft layer has run
                # its overdue timers, so a deposed controller knows it before fencing anyone.
                skipped = True
                continue
            skipped = False
            if self._latest is None:
                return
            with contextlib.suppress(ControllerApiError):
                await self.fence_stale_broker()

    async def fence_stale_broker(self) -> int | None:
        """One step of session expiry: fence the unfenced broker whose session expired
        longest ago, if any; returns it."""
        stale = self.heartbeats.stale_broker(self._require_active(), self._session_clock())
        if stale is None:
            return None
        log.info("fencing broker %d: no heartbeat for %d ms", stale,
                 self.heartbeats.session_timeout_ms)
        await self.write(functools.partial(fence_broker, broker_id=stale))
        return stale

    async def _barrier(self) -> None:
        async with self._queue:
            self._require_active()
            target = self._next_offset
        while self._committed_next < target:
            self._applied.clear()
            await self._applied.wait()
            self._require_active()

    def _skip_control_records(self) -> None:
        """The Raft layer appended control batches of its own (a voter change) after all this
        controller submitted before: the next records land that much further on."""
        appended = self.client.control_records_appended()
        if appended != self._control_records_seen:
            self._next_offset += appended - self._control_records_seen
            self._control_records_seen = appended

    def _require_active(self) -> MetadataImage:
        """The latest image, to write on; also moves the next write's offset past control
        batches the Raft layer appended meanwhile (a rule may use that offset)."""
        if self._latest is not None:
            self._skip_control_records()
        if self._latest is None:
            leader = self.leader_id
            raise NotControllerError(
                leader,
                "This is not the active controller"
                + (f"; the active controller is {leader}" if leader >= 0 else ""),
            )
        return self._latest

    # -- leadership ------------------------------------------------------------------------------

    def on_metadata_update(
        self, delta: MetadataDelta | None, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self._committed = image
        self._committed_next = manifest.next_offset
        self._applied.set()

    def on_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        self._applied.set()
        if self._latest is not None and (
            epoch_start_offset < 0 or leader.epoch != self._active_epoch
        ):
            self._deactivate(f"leadership moved to {leader.leader_id} in epoch {leader.epoch}")
        if self._latest is None and epoch_start_offset >= 0:
            self._activate(leader.epoch)

    def _activate(self, epoch: int) -> None:
        """The loader holds everything before the epoch's LeaderChange batch (the client's
        promise), so the first write can validate against the committed image."""
        if epoch <= self._renounced_epoch:
            return  # its speculative state was dropped: only a new epoch starts clean
        self._active_epoch = epoch
        self._latest = self._committed
        self._next_offset = self.client.log_end_offset()
        self._control_records_seen = self.client.control_records_appended()
        self.heartbeats.reset(self._latest, self._session_clock())
        self.liveness.reset()
        self._inactive.clear()
        log.info("active controller for epoch %d from offset %d", epoch, self._next_offset)
        if self.noop_interval_ms > 0:
            self._noop_task = asyncio.ensure_future(self._write_noops(epoch))
        self._fencing_task = asyncio.ensure_future(self._fence_stale_brokers(epoch))
        self._liveness_task = asyncio.ensure_future(self._fence_dead_brokers(epoch))
        self._periodic_task = asyncio.ensure_future(self._periodic_elections(epoch))
        if METADATA_VERSION not in self._latest.features:
            self._bootstrap_task = asyncio.ensure_future(self._bootstrap())

    async def _bootstrap(self) -> None:
        """A new cluster's log begins with the metadata.version it is written in and the
        other bootstrap records, in one batch (Kafka's bootstrap records)."""
        level = SUPPORTED_FEATURES[METADATA_VERSION][1]
        records = (FeatureLevelRecord(METADATA_VERSION, level), *self._bootstrap_records)
        with contextlib.suppress(ControllerApiError):
            await self.write(lambda image: ControllerResult(
                () if METADATA_VERSION in image.features else records, None))

    def _renounce(self, reason: str) -> None:
        """A write failed after its records reached the speculative image: that image can no
        longer be trusted in this epoch. Step down as Raft leader too (Kafka's renounce), so
        the next active controller — maybe this node, in a new epoch — starts from the log."""
        epoch = self._active_epoch
        self._deactivate(reason)
        self._renounced_epoch = max(self._renounced_epoch, epoch)
        self.client.resign(epoch)

    def _deactivate(self, reason: str) -> None:
        if self._latest is None:
            return
        log.info("no longer the active controller: %s", reason)
        self._latest = None
        self._active_epoch = -1
        self._inactive.set()  # liveness streams end: brokers reopen them at the new controller
        self.liveness.reset()
        tasks = (self._noop_task, self._fencing_task, self._periodic_task, self._bootstrap_task,
                 self._liveness_task)
        for task in (*tasks, *self._probes):
            if task is not None:
                task.cancel()
        self._noop_task = self._fencing_task = self._periodic_task = self._bootstrap_task = None
        self._liveness_task = None

    def _cluster_setting(self, key: str) -> Any:
        """A controller setting, parsed: the cluster-wide dynamic broker default, else
        Kafka's default."""
        return (self._latest or self._committed).cluster_setting(key)

    async def _periodic_elections(self, epoch: int) -> None:
        """Auto leader rebalance every `leader.imbalance.check.interval.seconds` (when
        `auto.leader.rebalance.enable`), honouring `leader.imbalance.per.broker.percentage`,
        and unclean elections for leaderless partitions of topics that allow them (Kafka's
        `unclean.leader.election.interval.ms`, 5 min). A run that hit its cap runs again at
        once. The settings are read each time, so a config change applies at the next tick."""
        loop = asyncio.get_running_loop()  # its clock, so a simulation's is virtual too
        last_rebalance = last_unclean = loop.time()
        while self._active_epoch == epoch:
            await asyncio.sleep(PERIODIC_TICK_S)
            now = loop.time()
            interval = self._cluster_setting("leader.imbalance.check.interval.seconds")
            if now - last_rebalance >= interval:
                last_rebalance = now
                if self._cluster_setting("auto.leader.rebalance.enable"):
                    percentage = self._cluster_setting("leader.imbalance.per.broker.percentage")
                    await self._run_until_done(functools.partial(
                        balance_partition_leaders, imbalance_percentage=percentage))
            if now - last_unclean >= UNCLEAN_ELECTION_INTERVAL_S:
                last_unclean = now
                await self._run_until_done(elect_unclean_leaders)

    async def _run_until_done(self, rule: Rule[bool]) -> None:
        with contextlib.suppress(ControllerApiError):
            while self._latest is not None and await self.write(rule):
                pass

    async def _write_noops(self, epoch: int) -> None:
        """A NoOp record every metadata.max.idle.interval.ms keeps followers' HW moving, so
        brokers can tell a quiet cluster from a stale one."""
        noop: ControllerResult[None] = ControllerResult((NoOpRecord(),), None)
        while self._active_epoch == epoch:
            await asyncio.sleep(self.noop_interval_ms / 1000)
            with contextlib.suppress(ControllerApiError):
                await self.write(lambda _image: noop)

    async def close(self) -> None:
        self._deactivate("closing")
