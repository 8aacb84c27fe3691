"""QuorumController: the active controller is the Raft leader.

A write runs a rule (a pure function of the latest image, see topics.py / replication.py) one
at a time, as Kafka's single event queue does. Its records are applied at once to a
*speculative* image — committed state plus every write still in flight — so the next write
validates against them, then appended as one atomic batch; the caller gets the response only
after the batch commits. Writes are pipelined: each waits for its own commit outside the queue.

State still changes only by replaying records: the committed image comes from the
MetadataLoader, the speculative one from replaying the same records a step ahead. Losing
leadership (or any failed append) drops the speculative image and fails every waiting write
with NOT_CONTROLLER. Gaining it needs no reload: the controller becomes active once its loader
has applied everything committed before the new epoch began, and starts from that image.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import TypeVar

from kraft.core.errors import RaftError
from kraft.core.raft import Output
from kraft.node.raft_node import RaftNode
from metadata.delta import MetadataDelta
from metadata.errors import ApiErrors, ControllerApiError, ControllerResult
from metadata.image import MetadataImage
from metadata.loader import MetadataLoader
from metadata.records import NoOpRecord, encode_record

log = logging.getLogger(__name__)

T = TypeVar("T")
Rule = Callable[[MetadataImage], ControllerResult[T]]


class NotControllerError(ControllerApiError):
    """This node is not the active controller; `leader_id` says who may be (-1: unknown)."""

    def __init__(self, leader_id: int, message: str) -> None:
        super().__init__(ApiErrors.NOT_CONTROLLER, message)
        self.leader_id = leader_id


class QuorumController:
    def __init__(
        self,
        node: RaftNode,
        loader: MetadataLoader,
        noop_interval_ms: int = 500,
    ) -> None:
        self.node = node
        self.loader = loader
        self.noop_interval_ms = noop_interval_ms
        self._queue = asyncio.Lock()
        self._latest: MetadataImage | None = None  # set only while active
        self._active_epoch = -1
        self._next_offset = 0
        self._noop_task: asyncio.Task[None] | None = None
        self._applied = asyncio.Event()  # set whenever the loader moves or leadership changes
        node.add_listener(self._on_raft_output)

    # -- queries -------------------------------------------------------------------------------

    @property
    def is_active(self) -> bool:
        return self._latest is not None

    @property
    def committed_image(self) -> MetadataImage:
        return self.loader.image

    # -- writes ------------------------------------------------------------------------------------

    async def write(self, rule: Rule[T]) -> T:
        """Run `rule` on the latest image; append its records; answer once they commit."""
        async with self._queue:
            latest = self._require_active()
            result = rule(latest)  # ControllerApiError propagates: nothing was written
            if not result.records:
                pending = None
            else:
                # Encode first: a record that cannot be encoded must not reach the image.
                encoded = [encode_record(record) for record in result.records]
                base = self._next_offset
                delta = MetadataDelta(latest)
                now = int(time.time() * 1000)
                for index, record in enumerate(result.records):
                    delta.replay(record, base + index, self._active_epoch, now)
                self._latest = delta.apply()
                self._next_offset = base + len(result.records)
                pending = asyncio.ensure_future(self.node.append(encoded))
                expected_last = self._next_offset - 1
        if pending is None:
            await self._barrier()  # a write with no records waits for the writes before it
            return result.response
        try:
            last = await pending
        except RaftError as exc:
            self._deactivate(f"append failed: {exc}")
            raise NotControllerError(self.node.status().leader_id, str(exc)) from exc
        if last != expected_last:
            self._deactivate(f"records landed at {last}, expected {expected_last}")
            raise NotControllerError(-1, "the log moved under the controller")
        return result.response

    async def _barrier(self) -> None:
        async with self._queue:
            self._require_active()
            target = self._next_offset
        while self.loader.next_offset < target:
            self._applied.clear()
            await self._applied.wait()
            self._require_active()

    def _require_active(self) -> MetadataImage:
        if self._latest is None:
            leader = self.node.status().leader_id
            raise NotControllerError(
                leader,
                "This is not the active controller"
                + (f"; the active controller is {leader}" if leader >= 0 else ""),
            )
        return self._latest

    # -- leadership ------------------------------------------------------------------------------

    def _on_raft_output(self, out: Output) -> None:
        if out.high_watermark is not None:
            self.loader.catch_up(out.high_watermark)
        self._applied.set()
        core = self.node.core
        assert core is not None
        if out.leader is not None and self._latest is not None and (
            not core.is_leader or core.epoch != self._active_epoch
        ):
            self._deactivate(f"leadership moved to {out.leader.leader_id}")
        if self._latest is None and core.is_leader and not core.shutting_down:
            self._maybe_activate()

    def _maybe_activate(self) -> None:
        core = self.node.core
        assert core is not None
        leader_state = core.quorum.state
        epoch_start = getattr(leader_state, "epoch_start_offset", None)
        # Everything before the LeaderChange record must be applied before the first write.
        if epoch_start is None or self.loader.next_offset <= epoch_start:
            return
        self._active_epoch = core.epoch
        self._latest = self.loader.image
        self._next_offset = self.node.log.end_offset
        log.info("active controller for epoch %d from offset %d", core.epoch, self._next_offset)
        if self.noop_interval_ms > 0:
            self._noop_task = asyncio.ensure_future(self._write_noops(core.epoch))

    def _deactivate(self, reason: str) -> None:
        if self._latest is None:
            return
        log.info("no longer the active controller: %s", reason)
        self._latest = None
        self._active_epoch = -1
        if self._noop_task is not None:
            self._noop_task.cancel()
            self._noop_task = None

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
