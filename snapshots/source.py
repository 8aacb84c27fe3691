"""What the CLI reads: a node's metadata log directory (segments and snapshots) or one file,
opened read-only, and the image as of an offset ("time travel").

Segments are decoded straight from the files (kraft/log/codec.py): opening a SegmentedLog would
cut a torn tail, and an inspection tool must not write. A torn tail at the end of the last
segment is skipped with a warning, as kraft-server would cut it; any other damage is an error
naming the file and byte position.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from kraft.log.base import Batch, CorruptRecordError, OffsetAndEpoch
from kraft.log.codec import BatchHeader, decode_batches, is_torn_tail, scan_prefix
from kraft.log.segmented import list_segments
from kraft.log.snapshots import parse_snapshot_file_name
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.loader import MetadataLoader, MetadataLoadError
from metadata.topics import METADATA_PARTITION_DIR
from snapshots.progress import Progress
from snapshots.reader import load_snapshot_image

Warn = Callable[[str], None]


class SourceError(Exception):
    """Input the tool cannot use. The message names the path and, for damaged bytes, the
    byte position."""


def corrupt_message(error: CorruptRecordError) -> str:
    where = f"{error.path}: byte {error.position}" if error.path else f"byte {error.position}"
    return f"{where}: {error.reason}"


@dataclass
class Source:
    """The files behind one CLI argument: segments and snapshots, oldest first."""

    path: str
    segments: list[tuple[int, str]] = field(default_factory=list)
    snapshots: list[tuple[OffsetAndEpoch, str]] = field(default_factory=list)
    # A lone snapshot file: its name says its id, or it is not a snapshot file at all.
    lone_snapshot: str | None = None


def open_source(path: str) -> Source:
    """A `.checkpoint` file, a `.log` segment, a `__cluster_metadata-0` directory, or the
    metadata.log.dir above one."""
    if not os.path.exists(path):
        raise SourceError(f"{path}: no such file or directory")
    if os.path.isfile(path):
        name = os.path.basename(path)
        if name.endswith(".log"):
            base = name[: -len(".log")]
            return Source(path, segments=[(int(base) if base.isdigit() else 0, path)])
        return Source(path, lone_snapshot=path)
    directory = path
    source = _scan_directory(directory)
    nested = os.path.join(directory, METADATA_PARTITION_DIR)
    if not source.segments and not source.snapshots and os.path.isdir(nested):
        source = _scan_directory(nested)
    if not source.segments and not source.snapshots:
        raise SourceError(
            f"{path}: no log segments (%020d.log) or snapshots (.checkpoint) here, nor in a "
            f"{METADATA_PARTITION_DIR} directory below it"
        )
    return source


def _scan_directory(directory: str) -> Source:
    snapshots = []
    for name in os.listdir(directory):
        snapshot_id = parse_snapshot_file_name(name)
        if snapshot_id is not None:
            snapshots.append((snapshot_id, os.path.join(directory, name)))
    snapshots.sort(key=lambda item: (item[0].offset, item[0].epoch))
    return Source(directory, list_segments(directory), snapshots)


# -- the log, read-only ------------------------------------------------------------------------


@dataclass
class _Segment:
    base_offset: int
    path: str
    data: bytes
    headers: list[BatchHeader]


class LogView:
    """The segments of a directory, every frame and CRC checked, offsets contiguous and epochs
    non-decreasing (the rules kraft-server applies when it opens the log)."""

    def __init__(self, segments: list[tuple[int, str]], warn: Warn) -> None:
        self.segments: list[_Segment] = []
        self.start_offset = segments[0][0] if segments else 0
        self.end_offset = self.start_offset
        epoch = 0
        for index, (base, path) in enumerate(segments):
            last = index == len(segments) - 1
            with open(path, "rb") as file:
                data = file.read()
            headers, stop, error = scan_prefix(data, path)
            if error is not None:
                if not (last and is_torn_tail(data, stop)):
                    raise error
                warn(f"{corrupt_message(error)} (a torn tail at the end of the log, which "
                     f"kraft-server cuts when it starts; ignored)")
            if not headers and not last:
                raise CorruptRecordError("empty segment before the last one", 0, path)
            if headers and headers[0].base_offset != base:
                raise CorruptRecordError(
                    f"file name says offset {base} but the first batch starts at "
                    f"{headers[0].base_offset}", 0, path)
            if index and base != self.end_offset:
                raise CorruptRecordError(
                    f"segment starts at offset {base} but the log before it ends at "
                    f"{self.end_offset}", 0, path)
            offset = base
            for header in headers:
                if header.base_offset != offset:
                    raise CorruptRecordError(
                        f"batch starts at offset {header.base_offset}, expected {offset}",
                        header.position, path)
                if header.epoch < epoch:
                    raise CorruptRecordError(
                        f"epoch {header.epoch} is below the previous batch's epoch {epoch}",
                        header.position, path)
                epoch = header.epoch
                offset = header.next_offset
            self.end_offset = offset
            self.segments.append(_Segment(base, path, data, headers))
        self.total_bytes = sum(len(s.data) for s in self.segments)
        self.bytes_read = 0
        self.on_read: Callable[[int, int], None] | None = None  # (bytes read, total)

    def batches(self, start: int, end: int) -> Iterator[Batch]:
        """Decoded batches covering [start, end) (what a Raft node hands its MetadataLoader)."""
        for segment in self.segments:
            for header in segment.headers:
                if header.next_offset <= start:
                    continue
                if header.base_offset >= end:
                    return
                self.bytes_read += header.size
                if self.on_read is not None:
                    self.on_read(self.bytes_read, self.total_bytes)
                yield decode_batches(
                    segment.data[header.position : header.position + header.size],
                    segment.path, header.position,
                )[0]

    def path_of(self, offset: int) -> str:
        for segment in reversed(self.segments):
            if segment.base_offset <= offset:
                return segment.path
        return self.segments[0].path if self.segments else ""


# -- time travel -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Built:
    image: MetadataImage
    snapshot: str | None  # the snapshot it started from
    replayed_from: int  # first log offset replayed
    replayed_to: int  # replay stopped below this offset


def _load_snapshot(path: str, show_progress: bool | None) -> MetadataImage:
    progress = Progress(f"loading {os.path.basename(path)}", 1, enabled=show_progress)
    try:
        return load_snapshot_image(path, progress.update)
    except CorruptRecordError as exc:
        raise SourceError(corrupt_message(exc)) from None
    except OSError as exc:
        raise SourceError(f"{path}: {exc.strerror}") from None
    finally:
        progress.close()


def build_image(
    source: Source, at_offset: int | None, warn: Warn, show_progress: bool | None = None,
    after: MetadataImage | None = None,
) -> Built:
    """The image holding every record below `at_offset` (exclusive: what a MetadataLoader
    has after catch_up(at_offset), and what a snapshot with end offset `at_offset` holds),
    or everything on disk when None. Starts from the latest snapshot at or below the offset
    that the log continues from, then replays log records as the loader does. `after`, an
    image built earlier from this source below the offset, is continued instead when the log
    holds what follows it (diff does this, so both sides share one starting snapshot)."""
    if source.lone_snapshot is not None:
        image = _load_snapshot(source.lone_snapshot, show_progress)
        end = image.provenance.offset + 1
        if at_offset is not None and at_offset != end:
            raise SourceError(
                f"{source.lone_snapshot}: a snapshot file alone holds the state at offset "
                f"{end} only; give its log directory to travel to offset {at_offset}")
        return Built(image, source.lone_snapshot, end, end)
    try:
        log = LogView(source.segments, warn)
    except CorruptRecordError as exc:
        raise SourceError(corrupt_message(exc)) from None
    newest = max([log.end_offset] + [s.offset for s, _ in source.snapshots])
    target = newest if at_offset is None else at_offset
    if target > newest:
        raise SourceError(f"{source.path}: offset {target} is past the end of the metadata "
                          f"log ({newest})")
    usable = [(sid, path) for sid, path in source.snapshots
              if sid.offset == target or (sid.offset <= target
                                          and log.start_offset <= sid.offset <= log.end_offset)]
    base, snapshot = EMPTY_IMAGE, None
    if after is not None and log.start_offset <= after.provenance.offset + 1 <= target \
            <= log.end_offset:
        base = after
    elif usable:
        snapshot = usable[-1][1]
        base = _load_snapshot(snapshot, show_progress)
    first = base.provenance.offset + 1
    if first < target and not log.start_offset <= first <= target <= log.end_offset:
        held = (f"the log holds offsets {log.start_offset} to {log.end_offset - 1}"
                if log.end_offset > log.start_offset else "the log is empty")
        raise SourceError(
            f"{source.path}: no snapshot at or below offset {target} that the log continues "
            f"from ({held})")
    # The loader itself replays, so time travel and a node share one set of rules.
    loader = MetadataLoader(base, off_loop_snapshots=False)
    start = loader.next_offset
    progress = Progress("replaying the log", log.total_bytes, enabled=show_progress)
    log.on_read = progress.update
    try:
        image = loader.catch_up(log, target)
    except MetadataLoadError as exc:
        offset = getattr(exc.__cause__, "offset", None)
        where = source.path if offset is None else log.path_of(offset)
        raise SourceError(f"{where}: {exc}") from None
    except CorruptRecordError as exc:
        raise SourceError(corrupt_message(exc)) from None
    finally:
        progress.close()
    return Built(image, snapshot, start, target)
