"""The node's appends: Kafka's accumulator (what writers submit in one event-loop iteration
becomes one batch and one core step) and the appends waiting for the high watermark.

RaftNode owns one `AppendQueue`; the queue enters the core only through the node's guard
(`guarded`), so a failing step stops the node as any other does.
"""

from __future__ import annotations

import asyncio
import collections
import time
from collections.abc import Callable
from dataclasses import dataclass

from kraft.core.errors import Errors, NotLeaderError, RaftError
from kraft.core.raft import RaftCore
from kraft.node.metrics import RaftMetrics
from kraft.node.timer import monotonic_ms

# (records, the writer's future, when it was submitted)
Submitted = tuple[list[bytes], asyncio.Future[int], float]


@dataclass
class _PendingAppend:
    last_offset: int
    epoch: int
    started: float
    future: asyncio.Future[int]


class AppendQueue:
    def __init__(
        self,
        max_batch_bytes: int,
        metrics: RaftMetrics,
        guarded: Callable[[Callable[[RaftCore], object]], None],
        closed: Callable[[], bool],
    ) -> None:
        """`max_batch_bytes`: the core's batch limit (fetch_max_bytes); `guarded` runs a step
        on the core through the node's guard; `closed` says the node stopped or went fatal."""
        self._max_batch_bytes = max_batch_bytes
        self._metrics = metrics
        self._guarded = guarded
        self._closed = closed
        self._appends: collections.deque[_PendingAppend] = collections.deque()
        self._accumulated: list[Submitted] = []
        self._drain_scheduled = False

    def add(self, records: list[bytes], future: asyncio.Future[int]) -> None:
        """Queue a validated submission; it is appended at the end of this loop iteration."""
        self._accumulated.append((records, future, time.perf_counter()))
        if not self._drain_scheduled:
            self._drain_scheduled = True
            asyncio.get_running_loop().call_soon(self._drain_accumulated)

    def drain_before_control_batch(self) -> None:
        """The core may append a voter-change control batch in the next step: what the state
        machine submitted goes first, so its predicted offsets hold (RaftClient.submit)."""
        if self._accumulated:
            self._drain_accumulated()

    def _drain_accumulated(self) -> None:
        self._drain_scheduled = False
        pending, self._accumulated = self._accumulated, []
        if self._closed():
            for _, future, _ in pending:
                if not future.done():
                    future.set_exception(NotLeaderError("the node is stopping"))
            return
        self._guarded(lambda core: self._append_accumulated(core, pending))

    def _append_accumulated(self, core: RaftCore, pending: list[Submitted]) -> None:
        batch: list[Submitted] = []
        size = 0
        for entry in pending:
            entry_size = sum(len(r) for r in entry[0])
            if batch and size + entry_size > self._max_batch_bytes:
                self._append_batch(core, batch)
                batch, size = [], 0
            batch.append(entry)
            size += entry_size
        if batch:
            self._append_batch(core, batch)

    def _append_batch(self, core: RaftCore, entries: list[Submitted]) -> None:
        records = [record for entry in entries for record in entry[0]]
        try:
            last = core.append(records, monotonic_ms())
        except RaftError as exc:
            if len(entries) > 1 and exc.error == Errors.RECORD_BATCH_TOO_LARGE:
                for entry in entries:  # only the oversized one fails
                    self._append_batch(core, [entry])
                return
            for _, future, _ in entries:
                if not future.done():
                    future.set_exception(exc)
            return
        self._metrics.records_appended.inc(len(records))
        offset = last - len(records)
        for entry_records, future, started in entries:
            offset += len(entry_records)
            self._appends.append(_PendingAppend(offset, core.epoch, started, future))

    def on_leader_change(self, core: RaftCore, leader_id: int) -> None:
        """A follower's appends fail; a leader's of an earlier epoch too."""
        if not core.is_leader:
            self.fail(NotLeaderError(f"leadership moved to {leader_id}"))
        else:
            stale = [p for p in self._appends if p.epoch != core.epoch]
            self._appends = collections.deque(p for p in self._appends if p.epoch == core.epoch)
            for pending in stale:
                if not pending.future.done():
                    pending.future.set_exception(NotLeaderError("the epoch changed"))

    def complete(self, core: RaftCore, high_watermark: int) -> None:
        """The appends below the high watermark are committed, if still in their epoch."""
        now = time.perf_counter()
        while self._appends and self._appends[0].last_offset < high_watermark:
            pending = self._appends.popleft()
            if pending.future.done():
                continue
            if core.is_leader and core.epoch == pending.epoch:
                pending.future.set_result(pending.last_offset)
                self._metrics.commit_latency.observe(now - pending.started)
            else:
                pending.future.set_exception(NotLeaderError("leadership changed before commit"))

    def fail(self, error: RaftError) -> None:
        pending, self._appends = self._appends, collections.deque()
        for p in pending:
            if not p.future.done():
                p.future.set_exception(error)
