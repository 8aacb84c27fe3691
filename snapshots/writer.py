"""Write a metadata image as a snapshot file (kraft/log/snapshots.py does the file format)."""

from __future__ import annotations

from kraft.log.base import OffsetAndEpoch, SnapshotInfo
from kraft.log.snapshots import FileSnapshotStore, MemorySnapshotStore
from metadata.image import MetadataImage
from snapshots.image_records import image_to_records


def write_image_snapshot(
    store: FileSnapshotStore | MemorySnapshotStore,
    image: MetadataImage,
    snapshot_id: OffsetAndEpoch,
    timestamp_ms: int,
) -> SnapshotInfo:
    """Write `image` as snapshot `snapshot_id` (end offset, epoch) and freeze it: verified,
    fsynced and renamed into place. The image must reflect every record below
    `snapshot_id.offset` and nothing more (provenance.offset < snapshot_id.offset).
    Blocking I/O: run it off the event loop."""
    if image.provenance.offset >= snapshot_id.offset:
        raise ValueError(
            f"the image includes offset {image.provenance.offset}, at or beyond the snapshot "
            f"end offset {snapshot_id.offset}"
        )
    records = image_to_records(image)
    builder = store.builder(snapshot_id, timestamp_ms)
    try:
        builder.append_all(records)
        return builder.freeze()
    except BaseException:
        builder.abort()
        raise
