"""The simulator's state machine: a digest of every committed data record, with snapshots.

It plays the part the metadata loader plays in a real node: it replays committed records up to
the high watermark, loads a snapshot when the driver says so (start-up, or a snapshot fetched
from the leader), and snapshots itself every few records (with the voter set the core says the
snapshot must carry, KIP-853), after which the node cleans its log as retention would: the log
starts at the newest snapshot that is flushed over. The digest at an offset is a function of
the committed records below it, so two nodes, or a node that loaded a snapshot and one that
replayed, must agree on it (the checker compares them).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

from kraft.log.base import OffsetAndEpoch
from kraft.log.codec import decode_batches
from kraft.log.memory import MemoryLog
from kraft.log.memory_snapshots import MemorySnapshotStore

SNAPSHOT_EVERY = 12  # committed offsets between two snapshots of one node


@dataclass
class SimStateMachine:
    applied: int = 0  # next offset to apply
    last_epoch: int = 0  # epoch of the batch before `applied`
    digest: int = 0
    loads: int = 0
    snapshots_written: int = 0

    def load(self, store: MemorySnapshotStore, snapshot_id: OffsetAndEpoch) -> None:
        data = store.read_all(snapshot_id)
        records = [r for b in decode_batches(data) if not b.control for r in b.records]
        # The bootstrap snapshot (0-0) holds no state, only the initial voter set.
        self.digest = int(records[0]) if records else 0
        self.applied = snapshot_id.offset
        self.last_epoch = snapshot_id.epoch
        self.loads += 1

    def catch_up(self, log: MemoryLog, high_watermark: int) -> bool:
        """Apply what is committed and not applied; True when anything was."""
        if high_watermark <= self.applied:
            return False
        digest = self.digest
        for batch in log.batches(self.applied, high_watermark):
            self.last_epoch = batch.epoch
            if batch.control:
                continue
            for index, record in enumerate(batch.records):
                offset = batch.base_offset + index
                if self.applied <= offset < high_watermark:
                    digest = zlib.crc32(offset.to_bytes(8, "big") + record, digest)
        self.digest = digest
        self.applied = high_watermark
        return True

    def maybe_snapshot(
        self, store: MemorySnapshotStore, log: MemoryLog,
        control_records: Callable[[int], list[bytes]] | None = None,
    ) -> None:
        """Snapshot every SNAPSHOT_EVERY offsets, then clean: drop older snapshots and start
        the log at the newest one, once the log is flushed that far. `control_records(end)`
        is what a snapshot ending at `end` carries of the voter set (the core's
        `snapshot_control_records`)."""
        latest = store.latest_id()
        if self.applied - (latest.offset if latest is not None else 0) >= SNAPSHOT_EVERY:
            snapshot_id = OffsetAndEpoch(self.applied, self.last_epoch)
            builder = store.builder(
                snapshot_id, 0,
                control_records=control_records(self.applied) if control_records else [],
            )
            builder.append([str(self.digest).encode()])
            builder.freeze()
            self.snapshots_written += 1
        ids = store.ids()
        while len(ids) >= 2 and log.start_offset <= ids[1].offset <= log.flushed_offset:
            log.advance_start(ids[1].offset, ids[1].epoch)
            store.delete(ids[0])
            ids = ids[1:]
