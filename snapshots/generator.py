"""The snapshot policy (Kafka's SnapshotGenerator): every node snapshots its own image.

A publisher of the MetadataLoader. After `metadata.log.max.record.bytes.between.snapshots`
bytes of records were replayed since the last snapshot, or `metadata.log.max.snapshot.interval.ms`
passed and something new was committed, it asks the Raft client to write the latest image as a
snapshot ending at the offset the loader has applied (always committed and batch-aligned: the
loader is handed whole committed batches). The client writes it in a worker thread once its
own log is durable that far, then cleans its log, which may move the log start to a newer
snapshot. One snapshot at a time.
"""

from __future__ import annotations

import asyncio
import logging
import time

from kraft.client import LeaderAndEpoch, OffsetAndEpoch, RaftClient
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.loader import LoaderManifest
from snapshots.image_records import image_to_records

log = logging.getLogger(__name__)


class SnapshotGenerator:
    def __init__(self, client: RaftClient, max_bytes: int, max_interval_ms: int) -> None:
        self.client = client
        self.max_bytes = max_bytes
        self.max_interval_ms = max_interval_ms
        self._bytes_since_last = 0
        self._time_at_last = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self.snapshots_written = 0
        self.last_write_s = 0.0

    def _latest_offset(self) -> int:
        latest = self.client.latest_snapshot_id()
        return latest.offset if latest is not None else 0

    def on_metadata_update(
        self, delta: MetadataDelta | None, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self._bytes_since_last += manifest.record_bytes
        applied = manifest.applied
        if applied.offset <= self._latest_offset():
            # A loaded snapshot (start-up, or the leader's) counts as the last snapshot.
            self._bytes_since_last = 0
            return
        if self._task is not None:
            return
        due_bytes = self._bytes_since_last >= self.max_bytes
        elapsed_ms = (time.monotonic() - self._time_at_last) * 1000
        due_time = self.max_interval_ms > 0 and elapsed_ms >= self.max_interval_ms
        if due_bytes or due_time:
            self._task = asyncio.ensure_future(
                self._write(image, applied, self._bytes_since_last))

    def on_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        pass

    async def _write(
        self, image: MetadataImage, snapshot_id: OffsetAndEpoch, covered_bytes: int
    ) -> None:
        started = time.perf_counter()
        try:
            info = await self.client.create_snapshot(
                snapshot_id, max(image.provenance.timestamp_ms, 0),
                lambda: image_to_records(image),
            )
            if info is None:
                return  # not durable here yet (or taken already): the next image tries again
            self._bytes_since_last = max(0, self._bytes_since_last - covered_bytes)
            self._time_at_last = time.monotonic()
            self.snapshots_written += 1
            self.last_write_s = time.perf_counter() - started
            log.info(
                "wrote snapshot %d-%d (%d records, %d bytes) in %.2f s", snapshot_id.offset,
                snapshot_id.epoch, info.records, info.size, self.last_write_s,
            )
        except Exception:  # a failed snapshot costs disk space, never correctness: go on
            log.exception("writing snapshot %d-%d failed", snapshot_id.offset, snapshot_id.epoch)
        finally:
            self._task = None

    async def close(self) -> None:
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)
