"""The in-memory snapshot store: the simulator's, and the core's when the driver gives it none.
No I/O; frozen snapshots survive a simulated crash, partial ones do not."""

from __future__ import annotations

from collections.abc import Sequence

from kraft.log.base import OffsetAndEpoch, SnapshotInfo
from kraft.log.snapshot_format import (
    SnapshotBuilder,
    earliest_id_of,
    latest_id_of,
    verify_snapshot_bytes,
)


class _MemoryPartial:
    def __init__(self, store: MemorySnapshotStore, snapshot_id: OffsetAndEpoch) -> None:
        self.snapshot_id = snapshot_id
        self._store = store
        self._chunks: list[bytes] = []
        self._size = 0
        self._generation = store.generation

    @property
    def size(self) -> int:
        return self._size

    def write(self, data: bytes) -> None:
        self._chunks.append(bytes(data))
        self._size += len(data)

    def freeze(self) -> SnapshotInfo:
        data = b"".join(self._chunks)
        info = verify_snapshot_bytes(data, self.snapshot_id)
        if self._generation == self._store.generation:  # a crash in between loses it
            self._store._add(self.snapshot_id, data, info)
        return info

    def abort(self) -> None:
        self._chunks = []


class MemorySnapshotStore:
    """Frozen snapshots survive a crash (freezing is durable); partial ones do not."""

    def __init__(self) -> None:
        self.generation = 0
        self._files: dict[OffsetAndEpoch, tuple[bytes, SnapshotInfo]] = {}

    def _add(self, snapshot_id: OffsetAndEpoch, data: bytes, info: SnapshotInfo) -> None:
        self._files[snapshot_id] = (data, info)

    def ids(self) -> list[OffsetAndEpoch]:
        return sorted(self._files, key=lambda i: (i.offset, i.epoch))

    def latest_id(self) -> OffsetAndEpoch | None:
        return latest_id_of(self.ids())

    def earliest_id(self) -> OffsetAndEpoch | None:
        return earliest_id_of(self.ids())

    def size(self, snapshot_id: OffsetAndEpoch) -> int:
        return len(self._files[snapshot_id][0])

    def last_contained_timestamp(self, snapshot_id: OffsetAndEpoch) -> int:
        return self._files[snapshot_id][1].last_contained_timestamp_ms

    def total_bytes(self) -> int:
        return sum(len(data) for data, _ in self._files.values())

    def read_chunk(self, snapshot_id: OffsetAndEpoch, position: int, max_bytes: int) -> bytes:
        return self._files[snapshot_id][0][position : position + max_bytes]

    def read_all(self, snapshot_id: OffsetAndEpoch) -> bytes:
        return self._files[snapshot_id][0]

    def begin_transfer(self, snapshot_id: OffsetAndEpoch) -> _MemoryPartial:
        return _MemoryPartial(self, snapshot_id)

    def builder(
        self, snapshot_id: OffsetAndEpoch, last_contained_timestamp_ms: int,
        control_records: Sequence[bytes] = (),
    ) -> SnapshotBuilder:
        return SnapshotBuilder(self, snapshot_id, last_contained_timestamp_ms, control_records)

    def delete(self, snapshot_id: OffsetAndEpoch) -> None:
        self._files.pop(snapshot_id, None)

    def crash(self) -> None:
        self.generation += 1

    def wipe(self) -> None:
        self.generation += 1
        self._files.clear()
