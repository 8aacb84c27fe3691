"""MetadataLoader: the one listener of the Raft log in a process, and the only way state changes.

Every node runs one (controllers, brokers; the offline tools run one over files). The Raft
client hands it committed batches, snapshots and leader changes (kraft/client.py); it replays
each metadata record into a MetadataDelta, applies the delta to the next immutable image and
hands `(delta, image, manifest)` to its publishers — the controller, the broker's metadata
cache, the ISR expander, the snapshot generator — in the order they were installed, as Kafka's
MetadataLoader does. A record that cannot be decoded or replayed is fatal: every node must reach
the same image from the same log, so continuing would make this node's view silently different.

A snapshot replaces the image: its records are replayed onto the empty image in a worker
thread (a million partitions take seconds, which the event loop must not wait for); batches
and leader changes that arrive meanwhile queue behind it, so publishers see everything in log
order.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import gc
import logging
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kraft.client import Batch, LeaderAndEpoch, OffsetAndEpoch, SnapshotReader
from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.image import EMPTY_IMAGE, MetadataImage, MetadataProvenance
from metadata.record_decoder import RecordDecoder
from metadata.records import RecordDecodeError

log = logging.getLogger(__name__)

NO_LEADER = LeaderAndEpoch(-1, -1)
LOAD_SWITCH_INTERVAL_S = 0.001


class MetadataLoadError(Exception):
    """A committed record this node cannot apply; the node must stop."""


@dataclass(frozen=True)
class LoaderManifest:
    """What one publication covers (Kafka's LogDeltaManifest / SnapshotManifest).

    `next_offset` is the offset after the last batch applied (control batches included) and
    `applied` the id a snapshot of the image would have; `from_snapshot` says the image was
    rebuilt from a snapshot rather than advanced by batches; `record_bytes` counts the record
    bytes replayed for this publication."""

    next_offset: int
    applied: OffsetAndEpoch
    leader: LeaderAndEpoch
    from_snapshot: bool
    batches: int
    record_bytes: int
    elapsed_s: float


class BatchSource(Protocol):
    """A log read from files by the offline tools (kraft.log's logs satisfy it)."""

    def batches(self, start: int, end: int) -> Iterable[Batch]: ...


class MetadataPublisher(Protocol):
    """Receives every image the loader makes, and leadership news, in log order."""

    def on_metadata_update(
        self, delta: MetadataDelta | None, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        """`delta` is None when the image did not change (control batches only) or was
        rebuilt from a snapshot."""

    def on_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        """As RaftClientListener.handle_leader_change, after every batch before it was
        published."""


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


def _image_from_snapshot(reader: SnapshotReader) -> MetadataImage:
    snapshot_id = reader.snapshot_id
    try:
        return image_from_records(
            reader.records(), snapshot_id.offset - 1, snapshot_id.epoch,
            reader.last_contained_timestamp_ms,
        )
    except (RecordDecodeError, MetadataReplayError) as exc:
        raise MetadataLoadError(
            f"cannot load snapshot {snapshot_id.offset}-{snapshot_id.epoch}: {exc}"
        ) from exc


class MetadataLoader:
    """A RaftClientListener. `off_loop_snapshots` replays snapshots in a worker thread when
    an event loop runs (always, in a node); the offline tools replay in the caller."""

    def __init__(self, image: MetadataImage = EMPTY_IMAGE, off_loop_snapshots: bool = True) -> None:
        self.image = image
        self.next_offset = image.provenance.offset + 1
        # Where a snapshot of `image` would end: (next_offset, epoch of the batch before it).
        self.applied = OffsetAndEpoch(self.next_offset, max(image.provenance.epoch, 0))
        self.applied_bytes = 0  # record bytes replayed so far (the snapshot policy's measure)
        self.load_time_s = 0.0  # how long the last snapshot load took
        self.leader = NO_LEADER
        self.fatal_error: BaseException | None = None
        self._off_loop = off_loop_snapshots
        self._decoder = RecordDecoder()
        self._publishers: list[MetadataPublisher] = []
        self._loading: asyncio.Future[MetadataImage] | None = None  # a snapshot being replayed
        self._waiting: collections.deque[Callable[[], None]] = collections.deque()

    def install(self, publisher: MetadataPublisher) -> None:
        """Publishers are called in installation order."""
        self._publishers.append(publisher)

    # -- RaftClientListener ------------------------------------------------------------------------

    def handle_commit(self, batches: Sequence[Batch]) -> None:
        def apply() -> None:
            self.replay(batches, batches[-1].next_offset)

        self._in_order(apply)

    def handle_load_snapshot(self, reader: SnapshotReader) -> None:
        if self.applied == reader.snapshot_id:
            return  # this image already is the snapshot's (one fetched from the leader)
        self._in_order(lambda: self._load_snapshot(reader))

    def handle_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        def publish() -> None:
            self.leader = leader
            for publisher in self._publishers:
                publisher.on_leader_change(leader, epoch_start_offset)

        self._in_order(publish)

    # -- replay ------------------------------------------------------------------------------------

    def replay(self, batches: Iterable[Batch], until: int) -> MetadataImage:
        """Apply every record of `batches` in [next_offset, until) and publish. The offline
        tools call it with a log's batches and any offset; a node's batches are whole."""
        if until <= self.next_offset:
            return self.image
        started = time.perf_counter()
        delta = MetadataDelta(self.image)
        decode = self._decoder.decode
        applied = False
        count = size = 0
        last_epoch = self.applied.epoch
        for batch in batches:
            if batch.next_offset <= self.next_offset:
                continue
            if batch.base_offset >= until:
                break
            count += 1
            last_epoch = batch.epoch
            if batch.control:
                continue
            for index, data in enumerate(batch.records):
                offset = batch.base_offset + index
                if offset < self.next_offset or offset >= until:
                    continue
                try:
                    delta.replay(decode(data), offset, batch.epoch, batch.max_timestamp_ms)
                except (RecordDecodeError, MetadataReplayError) as exc:
                    raise MetadataLoadError(
                        f"cannot apply the committed record at offset {offset}: {exc}"
                    ) from exc
                size += len(data)
                applied = True
        self.next_offset = until
        self.applied = OffsetAndEpoch(until, last_epoch)
        self.applied_bytes += size
        if applied:
            self.image = delta.apply()
        self._publish(delta if applied else None, LoaderManifest(
            until, self.applied, self.leader, False, count, size,
            time.perf_counter() - started))
        return self.image

    def catch_up(self, log: BatchSource, until: int) -> MetadataImage:
        """The offline tools' replay: every record of `log` below `until` not applied yet."""
        return self.replay(log.batches(self.next_offset, until), until)

    def load_snapshot_now(self, reader: SnapshotReader) -> MetadataImage:
        """Replace the image with the snapshot's, in the caller's thread."""
        started = time.perf_counter()
        self._install_snapshot(reader, _image_from_snapshot(reader), started)
        return self.image

    async def load_snapshot(self, reader: SnapshotReader) -> None:
        """Replace the image with the snapshot's as a delivered snapshot is (off the loop) and
        return once it is installed. A restarting node calls it before it joins the quorum;
        the Raft client's delivery of the same snapshot is then skipped."""
        self.handle_load_snapshot(reader)
        loading = self._loading
        if loading is not None:
            # Its done callback, added first, installs the image before this task wakes.
            await asyncio.wait([loading])
        if self.fatal_error is not None:
            raise MetadataLoadError(str(self.fatal_error)) from self.fatal_error

    def _load_snapshot(self, reader: SnapshotReader) -> None:
        try:
            loop = asyncio.get_running_loop() if self._off_loop else None
        except RuntimeError:
            loop = None
        if loop is None:
            self.load_snapshot_now(reader)
            return
        started = time.perf_counter()
        # Building a million partitions' objects would set off full garbage collections that
        # stop every thread — the event loop's too — for up to ~90 ms each. The collector
        # waits until the image is built, then its objects go to the permanent generation
        # (they live until the next snapshot; reference counting still frees them).
        # And the replaying thread would hold the interpreter for 5 ms at a time (Python's
        # switch interval) whenever the loop wants it back: 1 ms while it runs.
        collecting = gc.isenabled()
        gc.disable()
        switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(switch_interval, LOAD_SWITCH_INTERVAL_S))
        self._loading = loop.run_in_executor(None, _image_from_snapshot, reader)

        def done(future: asyncio.Future[MetadataImage]) -> None:
            self._loading = None
            sys.setswitchinterval(switch_interval)
            if collecting:
                gc.freeze()
                gc.enable()
            try:
                self._install_snapshot(reader, future.result(), started)
                self._drain()
            except Exception as exc:
                self._fail(exc)

        self._loading.add_done_callback(done)

    def _install_snapshot(
        self, reader: SnapshotReader, image: MetadataImage, started: float
    ) -> None:
        snapshot_id = reader.snapshot_id
        self.image = image
        self.next_offset = snapshot_id.offset
        self.applied = snapshot_id
        self.load_time_s = time.perf_counter() - started
        log.info("loaded snapshot %d-%d in %.2f s", snapshot_id.offset, snapshot_id.epoch,
                 self.load_time_s)
        self._publish(None, LoaderManifest(
            self.next_offset, snapshot_id, self.leader, True, 0, 0, self.load_time_s))

    # -- ordering ----------------------------------------------------------------------------------

    def _in_order(self, step: Callable[[], None]) -> None:
        """Run `step` now, or after the snapshot being loaded and the steps queued behind it.
        An error now propagates to the Raft client, which stops the node."""
        if self.fatal_error is not None:
            raise MetadataLoadError(f"the metadata loader stopped: {self.fatal_error}")
        if self._loading is not None or self._waiting:
            self._waiting.append(step)
        else:
            step()

    def _drain(self) -> None:
        while self._waiting and self._loading is None:
            self._waiting.popleft()()

    def _fail(self, exc: BaseException) -> None:
        """An error off the Raft client's call stack: nothing more is applied; the process
        sees `fatal_error` and exits."""
        log.critical("the metadata loader stopped: %s", exc, exc_info=exc)
        self.fatal_error = exc
        self._waiting.clear()

    def _publish(
        self, delta: MetadataDelta | None, manifest: LoaderManifest
    ) -> None:
        for publisher in self._publishers:
            publisher.on_metadata_update(delta, self.image, manifest)

    @property
    def loading_snapshot(self) -> bool:
        return self._loading is not None
