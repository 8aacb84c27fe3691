"""MetadataLoader: replays committed records from the Raft log into the next immutable image.

Every node runs one (controllers, brokers, tools); it is the only way state changes. It reads
the log between the offset it has applied and the high watermark, skips the Raft's own control
batches, replays each metadata record into a MetadataDelta and publishes the new image. A
record that cannot be decoded or replayed is fatal: every node must reach the same image from
the same log, so continuing would make this node's view silently different.

Snapshots replace a prefix of the log: `load_snapshot` rebuilds the image from a snapshot's
records alone (on start-up, and when a follower or broker installed the leader's snapshot), and
replay continues from the snapshot's end offset.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable

from kraft.core.raft import Output
from kraft.log.base import OffsetAndEpoch, ReplicatedLog
from kraft.log.codec import decode_batches
from kraft.log.snapshots import SnapshotStore
from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.image import EMPTY_IMAGE, MetadataImage, MetadataProvenance
from metadata.record_decoder import RecordDecoder
from metadata.records import RecordDecodeError

log = logging.getLogger(__name__)

ImageListener = Callable[[MetadataImage], None]


class MetadataLoadError(Exception):
    """A committed record this node cannot apply; the node must stop."""


ProgressCallback = Callable[[int], None]


def image_from_records(
    records: Iterable[bytes],
    offset: int,
    epoch: int,
    timestamp_ms: int,
    progress: ProgressCallback | None = None,
) -> MetadataImage:
    """Replay a snapshot's encoded records onto the empty image. `offset`, `epoch` and
    `timestamp_ms` are the snapshot's last contained record (end offset - 1), which becomes
    the provenance: a loader started on the result continues at `offset + 1`. Every record is
    replayed at that offset, as Kafka does. Raises RecordDecodeError or MetadataReplayError on
    bad records; `progress` gets the count of records replayed every 100,000 records."""
    delta = MetadataDelta(EMPTY_IMAGE)
    replay = delta.replay
    decode = RecordDecoder().decode
    count = 0
    for count, data in enumerate(records, 1):
        replay(decode(data), offset, epoch, timestamp_ms)
        if progress is not None and count % 100_000 == 0:
            progress(count)
    if progress is not None:
        progress(count)
    # The provenance is the snapshot's, even when the state is empty.
    provenance = MetadataProvenance(offset, epoch, timestamp_ms)
    return dataclasses.replace(delta.apply(), provenance=provenance)


class MetadataLoader:
    def __init__(
        self, raft_log: ReplicatedLog, image: MetadataImage = EMPTY_IMAGE,
        snapshots: SnapshotStore | None = None,
    ) -> None:
        self._log = raft_log
        self._snapshots = snapshots
        self.image = image
        self.next_offset = image.provenance.offset + 1
        # Where a snapshot of `image` would end: (next_offset, epoch of the batch before it).
        self.applied = OffsetAndEpoch(self.next_offset, max(image.provenance.epoch, 0))
        self.applied_bytes = 0  # record bytes replayed so far (the snapshot policy's measure)
        self.load_time_s = 0.0  # how long the last snapshot load took
        self._decoder = RecordDecoder()
        self._listeners: list[ImageListener] = []

    def subscribe(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    def follow(self, out: Output) -> MetadataImage:
        """Act on one Raft step: load the snapshot it installed, then replay up to its high
        watermark. Idempotent, so every component sharing this loader may call it."""
        if out.snapshot_loaded is not None and self.applied != out.snapshot_loaded:
            self.load_snapshot(out.snapshot_loaded)
        if out.high_watermark is not None:
            self.catch_up(out.high_watermark)
        return self.image

    def load_snapshot(self, snapshot_id: OffsetAndEpoch) -> MetadataImage:
        """Replace the image with the one in the node's snapshot `snapshot_id`."""
        if self._snapshots is None:
            raise MetadataLoadError("this loader has no snapshot store")
        started = time.perf_counter()
        data = self._snapshots.read_all(snapshot_id)
        timestamp = self._snapshots.last_contained_timestamp(snapshot_id)
        records = (r for b in decode_batches(data) if not b.control for r in b.records)
        try:
            self.image = image_from_records(
                records, snapshot_id.offset - 1, snapshot_id.epoch, timestamp
            )
        except (RecordDecodeError, MetadataReplayError) as exc:
            raise MetadataLoadError(
                f"cannot load snapshot {snapshot_id.offset}-{snapshot_id.epoch}: {exc}"
            ) from exc
        self.next_offset = snapshot_id.offset
        self.applied = snapshot_id
        self.load_time_s = time.perf_counter() - started
        log.info(
            "loaded snapshot %d-%d in %.2f s", snapshot_id.offset, snapshot_id.epoch,
            self.load_time_s,
        )
        self._publish()
        return self.image

    def catch_up(self, high_watermark: int) -> MetadataImage:
        """Apply every committed record below `high_watermark` not applied yet."""
        if high_watermark <= self.next_offset:
            return self.image
        delta = MetadataDelta(self.image)
        decode = self._decoder.decode
        applied = False
        last_epoch = self.applied.epoch
        for batch in self._log.batches(self.next_offset, high_watermark):
            last_epoch = batch.epoch
            if batch.control:
                continue
            for index, data in enumerate(batch.records):
                offset = batch.base_offset + index
                if offset < self.next_offset or offset >= high_watermark:
                    continue
                try:
                    delta.replay(decode(data), offset, batch.epoch, batch.max_timestamp_ms)
                except (RecordDecodeError, MetadataReplayError) as exc:
                    raise MetadataLoadError(
                        f"cannot apply the committed record at offset {offset}: {exc}"
                    ) from exc
                self.applied_bytes += len(data)
                applied = True
        self.next_offset = high_watermark
        self.applied = OffsetAndEpoch(high_watermark, last_epoch)
        if applied:
            self.image = delta.apply()
            self._publish()
        return self.image

    def _publish(self) -> None:
        for listener in self._listeners:
            listener(self.image)
