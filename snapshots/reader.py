"""Load a snapshot file into a metadata image, naming the byte position of any problem."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator

from kraft.log.base import CorruptRecordError
from kraft.log.codec import decode_batches
from kraft.log.snapshots import parse_snapshot_file_name, verify_snapshot_bytes
from metadata.delta import MetadataReplayError
from metadata.image import MetadataImage
from metadata.loader import image_from_records
from metadata.records import RecordDecodeError


def load_snapshot_image(
    path: str, progress: Callable[[int, int], None] | None = None
) -> MetadataImage:
    """The image a `%020d-%010d.checkpoint` file holds, its provenance the snapshot's last
    contained record (end offset - 1, the snapshot's epoch, the header's timestamp).
    CorruptRecordError (with path and byte position) for a damaged or foreign file, a name
    that is not a snapshot's, or records that do not decode or replay. `progress` gets
    (records replayed, records in the snapshot) now and then."""
    snapshot_id = parse_snapshot_file_name(os.path.basename(path))
    if snapshot_id is None:
        raise CorruptRecordError(
            "not a snapshot file name (expected <end offset %020d>-<epoch %010d>.checkpoint)",
            0, path,
        )
    with open(path, "rb") as file:
        data = file.read()
    info = verify_snapshot_bytes(data, snapshot_id, path)
    position = [0]

    def records() -> Iterator[bytes]:
        for batch in decode_batches(data, path):
            if not batch.control:
                yield from batch.records
            position[0] += batch.size_in_bytes

    try:
        return image_from_records(
            records(), snapshot_id.offset - 1, snapshot_id.epoch,
            info.last_contained_timestamp_ms,
            None if progress is None else lambda done: progress(done, info.records),
        )
    except (RecordDecodeError, MetadataReplayError) as exc:
        raise CorruptRecordError(str(exc), position[0], path) from exc
