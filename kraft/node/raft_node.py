"""RaftNode: the asyncio driver that feeds the sans-I/O core with real time, real gRPC traffic
and a real log, and carries out what the core asks.

Everything that touches the core runs on the event loop thread, one call at a time, so the core
needs no locks. After every call `_process` carries out the core's output in the required
order: persist the election state (fsync, on the loop: elections are rare and the reply must
not leave first), then send requests and replies. Log durability is a separate task: one flush
job at a time in a worker thread (group commit), then `on_log_flushed`. Snapshot file I/O the
core asks for (`Output.snapshot_jobs`: chunk reads, a fetched snapshot's writes, freeze and
deletions) runs in worker threads too, handed back with `on_snapshot_job_done`.

Its parts: the appends and their commit (kraft/node/appends.py), the flush job
(kraft/node/flush.py), the loop timer at the core's next deadline (kraft/node/timer.py), the
gRPC transport (kraft/node/transport.py) and the metrics (kraft/node/metrics.py).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import itertools
import logging
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import aiofiles
import aiofiles.os

from kraft.client import RaftClient, RaftClientListener
from kraft.core.config import RaftConfig
from kraft.core.errors import Errors, NotLeaderError, RaftError
from kraft.core.messages import (
    ApiVersionsResponse,
    FetchResponse,
    QuorumDescription,
    Request,
    Response,
    VoterChangeRequest,
)
from kraft.core.raft import LeaderAndEpoch, NodeStatus, Output, RaftCore
from kraft.core.voters import SnapshotVoters, VoterSet
from kraft.delivery import ListenerContext, announcement
from kraft.log.base import (
    DurableLog,
    FlushJob,
    OffsetAndEpoch,
    SnapshotInfo,
    SnapshotJob,
    SnapshotStore,
)
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.snapshots import (
    MemorySnapshotStore,
    align_log_with_snapshots,
    read_control_records,
)
from kraft.node.appends import AppendQueue
from kraft.node.flush import LogFlusher
from kraft.node.metrics import LoopLagSampler, RaftMetrics
from kraft.node.timer import CoreTimer
from kraft.node.timer import monotonic_ms as monotonic_ms  # server/main.py imports it here
from kraft.node.transport import RaftTransport
from kraft.security.tls import TlsConfig

log = logging.getLogger(__name__)


HOUSEKEEPING_INTERVAL_S = 1.0


class NodeStoppedError(NotLeaderError):
    """The node went fatal (a broken invariant, a failed durable write): it answers nothing
    and accepts nothing more; the process exits."""


@dataclass(frozen=True)
class Retention:
    """Kafka's metadata.max.retention.bytes / .ms (-1: no limit) and how often to check."""

    max_bytes: int = 100 * 1024 * 1024
    max_ms: int = 7 * 24 * 3600 * 1000
    check_interval_s: float = 60.0


class RaftNode:
    def __init__(
        self,
        config: RaftConfig,
        log_: DurableLog,
        store: QuorumStateStore,
        metrics: RaftMetrics | None = None,
        rng: random.Random | None = None,
        snapshots: SnapshotStore | None = None,
        retention: Retention | None = None,
        hw_path: str | None = None,
        tls: TlsConfig | None = None,
    ) -> None:
        """`snapshots` defaults to none at all (an empty in-memory store); `hw_path` names a
        file where the node leaves its high watermark for offline tools (the audit)."""
        self.config = config
        self.log = log_
        self.store = store
        self.snapshots: SnapshotStore = (
            snapshots if snapshots is not None else MemorySnapshotStore()
        )
        self.retention = retention or Retention()
        self._hw_path = hw_path
        self._hw_written = -1
        self.metrics = metrics or RaftMetrics(config.node_id)
        self.rng = rng or random.Random()
        self.transport = RaftTransport(self._on_response, self._on_failure, tls)
        self.core: RaftCore | None = None
        self._replies: dict[int, asyncio.Future[Response]] = {}
        self._tokens = itertools.count(1)
        self._appends = AppendQueue(
            config.fetch_max_bytes, self.metrics, self._guarded,
            lambda: self._stopped or self._fatal is not None,
        )
        self._timer = CoreTimer(
            lambda: self._guarded(lambda c: c.poll(monotonic_ms())), lambda: self._stopped
        )
        self._flusher = LogFlusher(
            log_, self._run_flush_job, self.metrics.fsync_duration,
            lambda: self._guarded(lambda c: c.on_log_flushed(monotonic_ms())), self._go_fatal,
        )
        self._state_changed = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._io = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="kraft-log")
        # Snapshots are written apart from the log's flushes, which must never wait behind one.
        self._snapshot_io = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="kraft-snapshot")
        # The core's snapshot jobs: a follower's install runs in order on one thread; the
        # chunks a leader serves are read on another, never behind an install's fsync.
        self._install_io = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="kraft-snapshot-install")
        self._chunk_io = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix="kraft-snapshot-read")
        self.loop_lag = LoopLagSampler(self.metrics.event_loop_lag)
        self._listeners: list[ListenerContext] = []
        self._listeners_behind = False  # a delivery stopped at its size cap: poll again
        self._listeners_due = True  # the first step after start polls them
        self._leaderless_since: float | None = time.monotonic()
        self._stopped = False
        self._last_end_offset = log_.end_offset
        self._fatal: BaseException | None = None

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        align_log_with_snapshots(self.log, self.snapshots)
        self.core = RaftCore(
            self.config, self.log, self.store.read(), monotonic_ms(), self.rng, self.snapshots,
            self._snapshot_voters(),
        )
        self.core.wall_clock_offset_ms = int(time.time() * 1000) - monotonic_ms()
        # The state machine starts from the newest snapshot, then replays the log after it.
        self.core.snapshot_to_load = self.snapshots.latest_id()
        self.metrics.bind(self)
        self._process()
        self._tasks = [
            asyncio.create_task(self._flusher.run(), name="kraft-flush"),
            asyncio.create_task(self._housekeeping_loop(), name="kraft-housekeeping"),
            asyncio.create_task(self.loop_lag.run(), name="kraft-loop-lag"),
        ]

    async def shutdown(self, timeout_s: float) -> bool:
        """Graceful: a leader resigns and waits (bounded) for a successor. True when the
        handover completed in time."""
        core = self._core()
        self._listeners_due = True  # a resigning leader is no longer announced as leading
        self._guarded(lambda c: c.begin_shutdown(monotonic_ms()))
        deadline = time.monotonic() + timeout_s
        while (
            not core.shutdown_complete() and self._fatal is None and time.monotonic() < deadline
        ):
            self._state_changed.clear()
            try:
                await asyncio.wait_for(self._state_changed.wait(), deadline - time.monotonic())
            except TimeoutError:
                break
        return core.shutdown_complete()

    async def stop(self) -> None:
        """Stop the tasks, flush what is appended, close the log."""
        if self._stopped:
            return
        self._stopped = True
        self._timer.cancel()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.transport.close()
        for future in self._replies.values():
            if not future.done():
                future.cancel()
        self._appends.fail(NotLeaderError("the node is stopping"))
        await asyncio.get_running_loop().run_in_executor(self._io, self.log.flush)
        if self.core is not None:
            await self._write_high_watermark(self.core.high_watermark)
        self.log.close()
        self._io.shutdown(wait=True)
        self._snapshot_io.shutdown(wait=True)
        self._install_io.shutdown(wait=True)
        self._chunk_io.shutdown(wait=True)

    @property
    def fatal_error(self) -> BaseException | None:
        """Set when the core hit a broken invariant; the process must exit."""
        return self._fatal

    # -- queries -------------------------------------------------------------------------------

    def status(self) -> NodeStatus:
        return self._core().status()

    def describe_quorum(self) -> QuorumDescription:
        return self._core().describe_quorum(monotonic_ms())

    def voters(self) -> VoterSet:
        """The latest voter set of the local log (KIP-853), committed or not."""
        return self._core().voters

    def kraft_version(self) -> int:
        return self._core().kraft_version

    def voter_endpoints(self) -> dict[int, str]:
        if self.core is None:  # before start: what the configuration says
            return dict(self.config.voters)
        return self.core.voters.endpoints()

    def _snapshot_voters(self) -> SnapshotVoters | None:
        """What the latest snapshot (the bootstrap one included) says of the voter set."""
        latest = self.snapshots.latest_id()
        if latest is None:
            return None
        return SnapshotVoters.from_control_records(
            latest.offset, read_control_records(self.snapshots, latest)
        )

    def wall_clock_ms(self, monotonic: int) -> int:
        return monotonic + self._core().wall_clock_offset_ms if monotonic >= 0 else -1

    def leader_endpoint(self) -> str:
        return self._core().leader_endpoint()

    # -- the RaftClient API (kraft/client.py) ------------------------------------------------------

    @property
    def node_id(self) -> int | None:
        return self.config.node_id

    def register(self, listener: RaftClientListener) -> None:
        """Before `start`. The listener is called on the loop, in log order (see
        kraft/client.py); an exception from it stops the node."""
        self._listeners.append(ListenerContext(listener))

    def leader_and_epoch(self) -> LeaderAndEpoch:
        status = self._core().status()
        return LeaderAndEpoch(status.leader_id, status.epoch)

    def high_watermark(self) -> int:
        # 0 before start: a restarting node publishes its snapshot's image before the node
        # starts (server/main.py), and a publisher may ask then (the broker's cache does).
        return self.core.high_watermark if self.core is not None else 0

    def log_end_offset(self) -> int:
        return self.log.end_offset

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return self.snapshots.latest_id()

    async def create_snapshot(
        self, snapshot_id: OffsetAndEpoch, last_contained_timestamp_ms: int,
        records: Callable[[], Iterable[bytes]],
    ) -> SnapshotInfo | None:
        latest = self.snapshots.latest_id()
        durable = min(self._core().high_watermark, self.log.flushed_offset)
        if (latest is not None and snapshot_id.offset <= latest.offset) or (
            snapshot_id.offset > durable
        ):
            # Past the local durable log, a crash now would cost the whole log: wait for it.
            return None
        control_records = self._core().snapshot_control_records(snapshot_id.offset)
        info = await asyncio.get_running_loop().run_in_executor(
            self._snapshot_io, self._write_snapshot, snapshot_id, last_contained_timestamp_ms,
            control_records, records,
        )
        self._guarded(lambda _core: self.clean_log())
        return info

    def _write_snapshot(
        self, snapshot_id: OffsetAndEpoch, timestamp_ms: int, control_records: list[bytes],
        records: Callable[[], Iterable[bytes]],
    ) -> SnapshotInfo:
        builder = self.snapshots.builder(snapshot_id, timestamp_ms, control_records)
        try:
            builder.append_all(list(records()))
            return builder.freeze()
        except BaseException:
            builder.abort()
            raise

    def _poll_listeners(self) -> None:
        core = self._core()
        leader, epoch_start = announcement(core)
        behind = False
        for context in self._listeners:
            behind |= context.poll(self.log, self.snapshots, core.high_watermark, leader,
                                   epoch_start)
        if behind and not self._listeners_behind:
            self._listeners_behind = True
            asyncio.get_running_loop().call_soon(self._poll_listeners_again)

    def _poll_listeners_again(self) -> None:
        self._listeners_behind = False
        self._listeners_due = True
        self._guarded(lambda _core: None)  # _process polls the listeners

    # -- snapshots and log cleaning ---------------------------------------------------------------

    def clean_log(self) -> int:
        """Kafka's snapshot-based retention: while log + snapshots exceed the retention size,
        or the oldest snapshot is older than the retention time, delete the oldest snapshot
        and start the log at the next one — never leaving the log start without a snapshot.
        Returns how many snapshots were deleted."""
        deleted = 0
        if self.core is not None and self.core.installing_snapshot:
            return 0  # a fetched snapshot may be in the index before it is installed
        now_ms = int(time.time() * 1000)
        while len(ids := self.snapshots.ids()) >= 2:
            oldest, following = ids[0], ids[1]
            size = self.log.size_in_bytes + self.snapshots.total_bytes()
            too_big = 0 <= self.retention.max_bytes < size
            age = now_ms - self.snapshots.last_contained_timestamp(oldest)
            too_old = 0 <= self.retention.max_ms < age
            if not (too_big or too_old) or following.offset > self.log.flushed_offset:
                break
            self.log.advance_start(following.offset, following.epoch)
            self.snapshots.delete(oldest)
            deleted += 1
            log.info(
                "log start moved to snapshot %d-%d (%s)", following.offset, following.epoch,
                "size" if too_big else "age",
            )
        if deleted:
            self._flusher.wanted.set()  # the segment deletions are queued for the flush job
        return deleted

    async def _housekeeping_loop(self) -> None:
        last_clean = time.monotonic()
        while True:
            await asyncio.sleep(HOUSEKEEPING_INTERVAL_S)
            core = self._core()
            await self._write_high_watermark(core.high_watermark)
            if time.monotonic() - last_clean >= self.retention.check_interval_s:
                last_clean = time.monotonic()
                self._guarded(lambda _core: self.clean_log())

    async def _write_high_watermark(self, high_watermark: int) -> None:
        """A hint for offline tools, not a durability point: written without fsync, at most
        once per housekeeping interval; a lower bound of what is committed. Through aiofiles
        (worker threads): a slow disk must not stall the loop for a hint."""
        if self._hw_path is None or high_watermark == self._hw_written:
            return
        temporary = self._hw_path + ".tmp"
        try:
            async with aiofiles.open(temporary, "w") as file:
                await file.write(f"{high_watermark}\n")
            await aiofiles.os.replace(temporary, self._hw_path)
            self._hw_written = high_watermark
        except OSError as exc:
            log.warning("cannot write %s: %s", self._hw_path, exc)

    # -- inbound requests (from the gRPC servicer) ----------------------------------------------

    async def handle_request(self, request: Request) -> Response:
        """The core's answer. Raises NodeStoppedError once the node has gone fatal (before or
        while this request waits): a broken node answers nothing."""
        self._refuse_if_fatal()
        token = next(self._tokens)
        future: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._replies[token] = future
        try:
            if isinstance(request, VoterChangeRequest):
                self._drain_before_control_batch()
            # Should this step stop the node, _go_fatal fails the future with NodeStoppedError.
            self._guarded(lambda core: core.handle_request(token, request, monotonic_ms()))
            return await future
        finally:
            self._replies.pop(token, None)

    def _refuse_if_fatal(self) -> None:
        if self._fatal is not None:
            raise NodeStoppedError(f"the node stopped after a fatal error: {self._fatal}")

    # -- the append API the controller uses ---------------------------------------------------

    async def append(self, records: list[bytes]) -> int:
        """Append records atomically (never split across batches) and wait until they are
        committed; returns the last offset. Raises NotLeaderError when this node is not (or
        stops being) the leader, RaftError(RECORD_BATCH_TOO_LARGE) when they cannot fit one
        batch.

        Appends made in the same event-loop iteration share one batch (Kafka's accumulator,
        without its linger): concurrent writers cost one log batch and one core step, and a
        lone writer waits for nothing."""
        return await self.submit(records)

    def submit(self, records: list[bytes]) -> asyncio.Future[int]:
        """`append`'s queueing, done before it returns (RaftClient.submit); a refusal comes
        out of the future, as from `append`."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[int] = loop.create_future()
        try:
            self._refuse_if_fatal()
            if not records:
                raise ValueError("nothing to append")
            if self._flusher.disk_full:
                raise RaftError(
                    Errors.KAFKA_STORAGE_ERROR,
                    "the metadata log's disk is full; free space on it and the node resumes",
                )
        except (NodeStoppedError, ValueError, RaftError) as exc:
            future.set_exception(exc)
            return future
        self._appends.add(records, future)
        return future

    def control_records_appended(self) -> int:
        return self._core().leader_control_records

    def _drain_before_control_batch(self) -> None:
        """The core may append a voter-change control batch in the next step: what the state
        machine submitted goes first, so its predicted offsets hold (RaftClient.submit)."""
        self._appends.drain_before_control_batch()

    def resign(self, epoch: int) -> None:
        """Step down as leader of `epoch` (EndQuorumEpoch to the voters); ignored unless this
        node leads that epoch."""
        core = self._core()
        if not (core.is_leader and core.epoch == epoch):
            return
        self._listeners_due = True
        self._guarded(lambda core: core.resign(epoch, monotonic_ms()))

    # -- the core's output -----------------------------------------------------------------------

    def _process(self) -> None:
        core = self._core()
        out = core.take_output()
        if out.election_state is not None:
            # A failed write raises: _guarded stops the node, and nothing below leaves.
            self.store.write(out.election_state)
            core.election_state_persisted(out.election_state)
        if out.high_watermark is not None:
            # Writers first: a writer that appends again at once lets the answers to parked
            # fetches below carry its records along with the new high watermark.
            self._appends.complete(core, out.high_watermark)
        for reply in out.replies:
            if type(reply.response) is FetchResponse and reply.response.error == Errors.NONE:
                (self.metrics.fetch_answers_with_records if reply.response.records
                 else self.metrics.fetch_answers_without_records).inc()
            future = self._replies.pop(reply.token, None)
            if future is not None and not future.done():
                future.set_result(reply.response)
        for request in out.requests:
            self.transport.send(request)
        for job in out.snapshot_jobs:
            self._run_snapshot_job(job)
        if out.leader is not None:
            self._on_leader_change(out)
        if out.snapshot_loaded is not None:
            self._flusher.wanted.set()  # the emptied log's deletions
        if self._listeners and (
            self._listeners_due or out.leader is not None or out.high_watermark is not None
            or out.snapshot_loaded is not None
        ):
            self._listeners_due = False
            try:
                self._poll_listeners()
            except Exception as exc:  # e.g. a committed record that cannot be replayed
                log.critical("a Raft listener failed: %s", exc, exc_info=True)
                self._go_fatal(exc)
        end = self.log.end_offset
        if not core.is_leader and end > self._last_end_offset:
            self.metrics.records_fetched.inc(end - self._last_end_offset)
        self._last_end_offset = end
        self._flusher.wanted.set()
        deadline = core.next_deadline()
        self._timer.after_step(deadline)
        self._state_changed.set()

    def _on_leader_change(self, out: Output) -> None:
        assert out.leader is not None
        core = self._core()
        status = core.status()
        log.info("state %s epoch %d leader %d", status.state, status.epoch, status.leader_id)
        self.metrics.leader_changes.inc()
        if out.leader.leader_id < 0:
            self._leaderless_since = self._leaderless_since or time.monotonic()
        elif self._leaderless_since is not None:
            self.metrics.election_latency.observe(time.monotonic() - self._leaderless_since)
            self._leaderless_since = None
        self._appends.on_leader_change(core, out.leader.leader_id)

    def _run_snapshot_job(self, job: SnapshotJob) -> None:
        executor = self._install_io if job.ordered else self._chunk_io
        future = asyncio.get_running_loop().run_in_executor(executor, job.run)
        future.add_done_callback(functools.partial(self._snapshot_job_done, job))

    def _snapshot_job_done(self, job: SnapshotJob, future: asyncio.Future[None]) -> None:
        """Back on the loop, in completion order (the ordered jobs complete in their order:
        one thread runs them)."""
        if self._stopped or future.cancelled():
            return
        exc = future.exception()
        if exc is not None:  # a job records the failures it expects; anything else is a bug
            log.critical("snapshot job %s failed: %s", type(job).__name__, exc, exc_info=exc)
            self._go_fatal(exc)
            return
        self._guarded(lambda core: core.on_snapshot_job_done(job, monotonic_ms()))

    # -- transport callbacks ----------------------------------------------------------------------

    def _on_response(self, correlation_id: int, response: Response) -> None:
        if self._stopped:
            return
        if isinstance(response, ApiVersionsResponse):
            self._drain_before_control_batch()  # it may let an AddRaftVoter append
        self._guarded(lambda core: core.handle_response(correlation_id, response, monotonic_ms()))

    def _on_failure(self, correlation_id: int, unreachable: bool, timed_out: bool) -> None:
        if self._stopped:
            return
        self._guarded(lambda core: core.handle_failure(
            correlation_id, monotonic_ms(), unreachable, timed_out))

    def _guarded(self, step: Callable[[RaftCore], object]) -> None:
        """Every entry into the core goes through here. A broken invariant, or a failed write
        of the election state (the disk refused: a vote or a leadership cannot be made
        durable), stops the node: it answers nothing more and the process exits."""
        if self._fatal is not None:
            return
        try:
            step(self._core())
            self._process()
        except Exception as exc:  # never limp on
            log.critical("raft core failed: %s", exc, exc_info=True)
            self._go_fatal(exc)

    def _go_fatal(self, exc: BaseException) -> None:
        self._fatal = exc
        for future in self._replies.values():
            if not future.done():
                future.set_exception(NodeStoppedError(f"the node stopped: {exc}"))
        self._appends.fail(NotLeaderError(f"the node stopped: {exc}"))
        self._state_changed.set()

    # -- background tasks --------------------------------------------------------------------------

    def _run_flush_job(self, job: FlushJob) -> asyncio.Future[None]:
        """In the log thread (bench/quorum_bench.py times it by swapping `_io`)."""
        return asyncio.get_running_loop().run_in_executor(self._io, job.run)

    @property
    def disk_full(self) -> bool:
        """Flushes are refused for want of space: nothing is acknowledged."""
        return self._flusher.disk_full

    def _core(self) -> RaftCore:
        if self.core is None:
            raise RuntimeError("the node has not started")
        return self.core


if TYPE_CHECKING:  # mypy proves that the node implements the Raft client API

    def _implements_raft_client(node: RaftNode) -> RaftClient:
        return node
