"""MetadataLoader (metadata/loader.py): the log's one listener, and its publishers."""

from __future__ import annotations

import asyncio
import gc
import sys
import threading

import pytest

from kraft.client import LeaderAndEpoch, OffsetAndEpoch, SnapshotReader
from kraft.log.base import Batch
from kraft.log.memory import MemoryLog
from kraft.log.snapshots import MemorySnapshotStore
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.loader import (
    LOAD_SWITCH_INTERVAL_S,
    LoaderManifest,
    MetadataLoader,
    MetadataLoadError,
)
from metadata.records import TopicRecord, encode_record

FOO = "AAAAAAAAAAAAAAAAAAAAAQ"
BAR = "AAAAAAAAAAAAAAAAAAAAAg"


class Recorder:
    def __init__(self, name: str, seen: list[tuple[str, str, object]]) -> None:
        self.name = name
        self.seen = seen

    def on_metadata_update(
        self, delta: MetadataDelta | None, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        kind = "snapshot" if manifest.from_snapshot else "log"
        self.seen.append((self.name, kind, (manifest.next_offset, sorted(image.topics.by_name))))

    def on_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        self.seen.append((self.name, "leader", (leader.leader_id, epoch_start_offset)))


def batches(*records: TopicRecord, base: int = 0, epoch: int = 1) -> list[Batch]:
    log = MemoryLog()
    log.reset_to(base, epoch)
    for record in records:
        log.append_as_leader([encode_record(record)], epoch, 0)
    return list(log.batches(base, log.end_offset))


def snapshot_of(*records: TopicRecord, end: int) -> SnapshotReader:
    store = MemorySnapshotStore()
    builder = store.builder(OffsetAndEpoch(end, 1), 0)
    builder.append([encode_record(r) for r in records])
    builder.freeze()
    snapshot_id = OffsetAndEpoch(end, 1)
    return SnapshotReader(snapshot_id, 0, lambda: store.read_all(snapshot_id))


def test_publishers_see_each_image_in_installation_order_then_leadership() -> None:
    seen: list[tuple[str, str, object]] = []
    loader = MetadataLoader(off_loop_snapshots=False)
    for name in ("cache", "controller", "generator"):
        loader.install(Recorder(name, seen))
    loader.handle_commit(batches(TopicRecord("foo", FOO)))
    loader.handle_leader_change(LeaderAndEpoch(1, 2), 1)
    assert [(name, kind) for name, kind, _ in seen] == [
        ("cache", "log"), ("controller", "log"), ("generator", "log"),
        ("cache", "leader"), ("controller", "leader"), ("generator", "leader"),
    ]
    assert seen[0][2] == (1, ["foo"])


def test_a_control_batch_moves_the_offset_without_a_new_image() -> None:
    loader = MetadataLoader(off_loop_snapshots=False)
    loader.handle_commit(batches(TopicRecord("foo", FOO)))
    image = loader.image
    log = MemoryLog()
    log.reset_to(1, 2)
    log.append_as_leader([b"leader-change"], 2, 0, control=True)
    loader.handle_commit(list(log.batches(1, 2)))
    assert loader.image is image and loader.next_offset == 2
    assert loader.applied == OffsetAndEpoch(2, 2)


def test_a_committed_record_that_cannot_be_replayed_stops_the_loader() -> None:
    loader = MetadataLoader(off_loop_snapshots=False)
    loader.handle_commit(batches(TopicRecord("foo", FOO)))
    with pytest.raises(MetadataLoadError, match="offset 1"):
        loader.handle_commit(batches(TopicRecord("again", FOO), base=1))  # a duplicate id


def test_a_snapshot_replays_off_the_event_loop_and_later_batches_wait_for_it() -> None:
    seen: list[tuple[str, str, object]] = []
    release = threading.Event()
    reader = snapshot_of(TopicRecord("foo", FOO), end=5)
    slow = SnapshotReader(reader.snapshot_id, 0,
                          lambda: (release.wait(10) and reader.read()) or b"")

    async def scenario() -> None:
        loader = MetadataLoader()
        loader.install(Recorder("p", seen))
        loader.handle_load_snapshot(slow)
        assert loader.loading_snapshot
        loader.handle_commit(batches(TopicRecord("bar", BAR), base=5))
        loader.handle_leader_change(LeaderAndEpoch(3, 4), -1)
        for _ in range(5):  # the loop keeps turning while the snapshot is replayed
            await asyncio.sleep(0)
        assert seen == []
        release.set()
        while len(seen) < 3:
            await asyncio.sleep(0.001)

    asyncio.run(scenario())
    assert seen == [
        ("p", "snapshot", (5, ["foo"])),
        ("p", "log", (6, ["bar", "foo"])),
        ("p", "leader", (3, -1)),
    ]


def test_a_snapshot_that_cannot_be_loaded_off_the_loop_is_fatal() -> None:
    broken = SnapshotReader(OffsetAndEpoch(5, 1), 0, lambda: b"not a snapshot")

    async def scenario() -> MetadataLoader:
        loader = MetadataLoader()
        loader.handle_load_snapshot(broken)
        while loader.loading_snapshot:
            await asyncio.sleep(0.001)
        return loader

    loader = asyncio.run(scenario())
    assert loader.fatal_error is not None
    with pytest.raises(MetadataLoadError, match="stopped"):
        loader.handle_commit(batches(TopicRecord("bar", BAR), base=5))


def test_load_snapshot_returns_once_the_image_is_installed() -> None:
    """A restarting node awaits it before it joins the quorum; the Raft client's delivery of
    the same snapshot afterwards is skipped."""
    seen: list[tuple[str, str, object]] = []
    reader = snapshot_of(TopicRecord("foo", FOO), end=5)

    async def scenario() -> MetadataLoader:
        loader = MetadataLoader()
        loader.install(Recorder("p", seen))
        await loader.load_snapshot(reader)
        assert not loader.loading_snapshot and loader.applied == reader.snapshot_id
        assert seen == [("p", "snapshot", (5, ["foo"]))]
        loader.handle_load_snapshot(reader)
        assert not loader.loading_snapshot
        return loader

    asyncio.run(scenario())
    assert seen == [("p", "snapshot", (5, ["foo"]))]


def test_load_snapshot_raises_when_the_snapshot_cannot_be_loaded() -> None:
    broken = SnapshotReader(OffsetAndEpoch(5, 1), 0, lambda: b"not a snapshot")
    with pytest.raises(MetadataLoadError):
        asyncio.run(MetadataLoader().load_snapshot(broken))


def test_an_off_loop_load_holds_the_collector_and_the_switch_interval_then_restores_them() -> None:
    release = threading.Event()
    reader = snapshot_of(TopicRecord("foo", FOO), end=5)
    slow = SnapshotReader(reader.snapshot_id, 0,
                          lambda: (release.wait(10) and reader.read()) or b"")
    interval = sys.getswitchinterval()

    async def scenario() -> tuple[bool, float]:
        loader = MetadataLoader()
        loader.handle_load_snapshot(slow)
        during = (gc.isenabled(), sys.getswitchinterval())
        release.set()
        while loader.loading_snapshot:
            await asyncio.sleep(0.001)
        return during

    collecting, switch = asyncio.run(scenario())
    assert not collecting and switch <= LOAD_SWITCH_INTERVAL_S  # no full collection mid-build
    assert gc.isenabled() and sys.getswitchinterval() == interval
