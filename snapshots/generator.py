"""The snapshot policy (Kafka's SnapshotGenerator): every node snapshots its own image.

After `metadata.log.max.record.bytes.between.snapshots` bytes of records were replayed since
the last snapshot, or `metadata.log.max.snapshot.interval.ms` passed and something new was
committed, the node writes the loader's latest image as a snapshot ending at the offset the
loader has applied (always committed and batch-aligned: the loader stops only at the high
watermark), once this node's own log is flushed that far. One snapshot at a time, written in
a worker thread; then the node cleans its log, which may move the log start to a newer
snapshot.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kraft.log.base import OffsetAndEpoch
from kraft.node.raft_node import RaftNode
from metadata.image import MetadataImage
from metadata.loader import MetadataLoader
from snapshots.writer import write_image_snapshot

log = logging.getLogger(__name__)


class SnapshotGenerator:
    def __init__(
        self, node: RaftNode, loader: MetadataLoader, max_bytes: int, max_interval_ms: int
    ) -> None:
        self.node = node
        self.loader = loader
        self.max_bytes = max_bytes
        self.max_interval_ms = max_interval_ms
        self._bytes_at_last = 0
        self._time_at_last = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self.snapshots_written = 0
        self.last_write_s = 0.0
        loader.subscribe(self._on_image)

    def _latest_offset(self) -> int:
        latest = self.node.snapshots.latest_id()
        return latest.offset if latest is not None else 0

    def _on_image(self, image: MetadataImage) -> None:
        applied = self.loader.applied
        if self._task is not None or applied.offset <= self._latest_offset():
            if applied.offset <= self._latest_offset():
                # A loaded snapshot (start-up, or the leader's) counts as the last snapshot.
                self._bytes_at_last = self.loader.applied_bytes
            return
        if applied.offset > self.node.log.flushed_offset:
            # A follower's HW can run ahead of its own fsync; a snapshot beyond its durable
            # log would make a crash now cost the whole local log. Wait for the flush.
            return
        due_bytes = self.loader.applied_bytes - self._bytes_at_last >= self.max_bytes
        elapsed_ms = (time.monotonic() - self._time_at_last) * 1000
        due_time = self.max_interval_ms > 0 and elapsed_ms >= self.max_interval_ms
        if due_bytes or due_time:
            self._bytes_at_last = self.loader.applied_bytes
            self._time_at_last = time.monotonic()
            self._task = asyncio.ensure_future(self._write(image, applied))

    async def _write(self, image: MetadataImage, snapshot_id: OffsetAndEpoch) -> None:
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        try:
            info = await loop.run_in_executor(
                None, write_image_snapshot, self.node.snapshots, image, snapshot_id,
                max(image.provenance.timestamp_ms, 0),
            )
            self.snapshots_written += 1
            self.last_write_s = time.perf_counter() - started
            log.info(
                "wrote snapshot %d-%d (%d records, %d bytes) in %.2f s", snapshot_id.offset,
                snapshot_id.epoch, info.records, info.size, self.last_write_s,
            )
            self.node.clean_log()
        except Exception:  # a failed snapshot costs disk space, never correctness: go on
            log.exception("writing snapshot %d-%d failed", snapshot_id.offset, snapshot_id.epoch)
        finally:
            self._task = None

    async def close(self) -> None:
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
