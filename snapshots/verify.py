"""`kraft-snapshot verify`: is every byte of a snapshot, a segment or a whole metadata log
directory intact? Every CRC, every record, snapshot header and footer, offsets numbered from 0
in a snapshot and contiguous across segments, one epoch per snapshot, epochs that never
decrease in the log, and a snapshot at the log start offset once the log has been cleaned."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from kraft.log.base import CorruptRecordError, OffsetAndEpoch
from kraft.log.codec import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    decode_control_record,
)
from kraft.log.snapshots import parse_snapshot_file_name
from snapshots.frames import Damage, Frame, describe_record, walk
from snapshots.source import Source


@dataclass(frozen=True, slots=True)
class Problem:
    path: str
    position: int
    reason: str

    def text(self) -> str:
        return f"{self.path}: byte {self.position}: {self.reason}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path, "position": self.position, "reason": self.reason}


@dataclass
class FileReport:
    path: str
    kind: str  # "segment" or "snapshot"
    size: int = 0
    batches: int = 0
    records: int = 0
    first_offset: int | None = None
    next_offset: int | None = None
    problems: list[Problem] = field(default_factory=list)
    # (base offset, epoch) of each intact batch, for the checks across files
    epochs: list[tuple[int, int]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"file": self.path, "kind": self.kind, "size": self.size,
                "batches": self.batches, "records": self.records,
                "firstOffset": self.first_offset, "nextOffset": self.next_offset,
                "ok": not self.problems, "problems": [p.to_json() for p in self.problems]}


def _read(path: str, report: FileReport) -> bytes | None:
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as exc:
        report.problems.append(Problem(path, 0, f"cannot read: {exc.strerror}"))
        return None
    report.size = len(data)
    return data


def _frames(path: str, data: bytes, report: FileReport) -> list[Frame]:
    """The intact batches; damage and undecodable records become problems."""
    frames = []
    for item in walk(data, path):
        if isinstance(item, Damage):
            note = (" (a torn tail: kraft-server cuts it when it opens the log)"
                    if item.torn_tail and report.kind == "segment" else "")
            report.problems.append(Problem(path, item.position, item.reason + note))
            continue
        frames.append(item)
        report.batches += 1
        for index in range(len(item.batch.records)):
            _, error = describe_record(item.batch, index)
            if error is not None:
                report.problems.append(Problem(
                    path, item.position,
                    f"record at offset {item.batch.base_offset + index}: {error}"))
    return frames


def verify_segment(path: str, base: int | None, last: bool) -> FileReport:
    report = FileReport(path, "segment")
    data = _read(path, report)
    if data is None:
        return report
    frames = _frames(path, data, report)
    if not frames and not last and not report.problems:
        report.problems.append(Problem(path, 0, "empty segment before the last one"))
    offset = base
    epoch = 0
    expected_position = 0
    for frame in frames:
        batch = frame.batch
        if frame.position != expected_position:
            offset = None  # a damaged batch lies between: its offsets are unknown
        expected_position = frame.position + batch.size_in_bytes
        if offset is not None and batch.base_offset != offset:
            what = "file name says" if frame is frames[0] else "previous batch ends at"
            report.problems.append(Problem(
                path, frame.position,
                f"batch starts at offset {batch.base_offset}; {what} {offset}"))
        if batch.epoch < epoch:
            report.problems.append(Problem(
                path, frame.position,
                f"epoch {batch.epoch} is below the previous batch's epoch {epoch}"))
        epoch = max(epoch, batch.epoch)
        offset = batch.next_offset
        report.records += len(batch.records)
        report.epochs.append((batch.base_offset, batch.epoch))
    report.first_offset = frames[0].batch.base_offset if frames else base
    report.next_offset = offset
    return report


def verify_snapshot(path: str) -> FileReport:
    report = FileReport(path, "snapshot")
    snapshot_id = parse_snapshot_file_name(os.path.basename(path))
    if snapshot_id is None:
        report.problems.append(Problem(
            path, 0, "not a snapshot file name (<end offset %020d>-<epoch %010d>.checkpoint)"))
    data = _read(path, report)
    if data is None:
        return report
    if not data:
        report.problems.append(Problem(path, 0, "empty file: a snapshot starts with a header"))
        return report
    frames = _frames(path, data, report)
    if not frames:
        return report
    epoch = snapshot_id.epoch if snapshot_id is not None else frames[0].batch.epoch
    offset: int | None = 0
    expected_position = 0
    for index, frame in enumerate(frames):
        batch = frame.batch
        if frame.position != expected_position:
            offset = None  # a damaged batch lies between: its offsets are unknown
        expected_position = frame.position + batch.size_in_bytes
        if offset is not None and batch.base_offset != offset:
            report.problems.append(Problem(
                path, frame.position, f"batch starts at offset {batch.base_offset}, "
                f"expected {offset}"))
        if batch.epoch != epoch:
            report.problems.append(Problem(
                path, frame.position,
                f"batch epoch {batch.epoch} differs from the snapshot epoch {epoch}"))
        expected = (SNAPSHOT_HEADER if index == 0 else
                    SNAPSHOT_FOOTER if index == len(frames) - 1 else None)
        if expected is None:
            if batch.control and not (index == 1 and _voter_set_batch(frame)):
                report.problems.append(Problem(path, frame.position,
                                               "control batch inside the snapshot"))
            elif not batch.control:
                report.records += len(batch.records)
        else:
            _check_control(report, frame, expected)
        offset = batch.next_offset
    report.first_offset, report.next_offset = 0, offset
    if len(frames) == 1:
        report.problems.append(Problem(path, len(data), "no footer: the snapshot ends early"))
    return report


def _voter_set_batch(frame: Frame) -> bool:
    """The one control batch a snapshot may hold after its header: the voter set (KIP-853)."""
    try:
        kinds = {decode_control_record(r)[0] for r in frame.batch.records}
    except CorruptRecordError:
        return False
    return kinds <= {KRAFT_VERSION, KRAFT_VOTERS}


def _check_control(report: FileReport, frame: Frame, expected: int) -> None:
    name = "header" if expected == SNAPSHOT_HEADER else "footer"
    batch = frame.batch
    kind = None
    if batch.control and len(batch.records) == 1:
        try:
            kind, _ = decode_control_record(batch.records[0])
        except CorruptRecordError:  # already reported by _frames as a bad record
            return
    if kind != expected:
        report.problems.append(Problem(
            report.path, frame.position,
            f"expected the snapshot {name} (a control batch with one "
            f"{'SNAPSHOT_HEADER' if expected == SNAPSHOT_HEADER else 'SNAPSHOT_FOOTER'} "
            f"record)"))


@dataclass
class Report:
    files: list[FileReport]
    problems: list[Problem]  # every problem, the cross-file ones included

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "files": [f.to_json() for f in self.files],
                "problems": [p.to_json() for p in self.problems]}


def verify_source(source: Source) -> Report:
    if source.lone_snapshot is not None:
        files = [verify_snapshot(source.lone_snapshot)]
        return Report(files, [p for f in files for p in f.problems])
    snapshots = [(sid, verify_snapshot(path)) for sid, path in source.snapshots]
    segments = [verify_segment(path, base, i == len(source.segments) - 1)
                for i, (base, path) in enumerate(source.segments)]
    problems = [p for _, f in snapshots for p in f.problems]
    problems += [p for f in segments for p in f.problems]
    problems += _across_segments(segments)
    if not os.path.isfile(source.path):  # one segment alone says nothing about the log start
        problems += _snapshots_against_log(snapshots, segments)
    return Report([f for _, f in snapshots] + segments, problems)


def _across_segments(segments: list[FileReport]) -> list[Problem]:
    problems = []
    previous: FileReport | None = None
    for segment in segments:
        if previous is not None and previous.next_offset is not None \
                and segment.first_offset != previous.next_offset:
            problems.append(Problem(
                segment.path, 0, f"segment starts at offset {segment.first_offset} but the "
                f"log before it ends at {previous.next_offset}"))
        if previous is not None and previous.epochs and segment.epochs \
                and segment.epochs[0][1] < max(e for _, e in previous.epochs):
            problems.append(Problem(
                segment.path, 0, f"first epoch {segment.epochs[0][1]} is below the previous "
                f"segment's epoch {max(e for _, e in previous.epochs)}"))
        previous = segment
    return problems


def _snapshots_against_log(
    snapshots: list[tuple[OffsetAndEpoch, FileReport]], segments: list[FileReport]
) -> list[Problem]:
    problems = []
    if segments and segments[0].first_offset:
        # Cleaning deletes whole segments below a snapshot, so some snapshot must end at or
        # after the first segment's base offset (and within the log).
        start, end = segments[0].first_offset, segments[-1].next_offset or 0
        if not any(start <= sid.offset <= max(start, end) for sid, _ in snapshots):
            problems.append(Problem(
                segments[0].path, 0, f"the log starts at offset {start} but no snapshot ends "
                f"at or after it: the records before it are lost"))
    epochs = sorted(e for segment in segments for e in segment.epochs)
    for sid, report in snapshots:
        # The epoch of the batch holding the snapshot's last offset, when the log still has it.
        holding = [epoch for base, epoch in epochs if base <= sid.offset - 1]
        covered = segments and segments[0].first_offset is not None \
            and segments[0].first_offset <= sid.offset - 1 \
            and segments[-1].next_offset is not None and sid.offset <= segments[-1].next_offset
        if covered and holding and holding[-1] != sid.epoch:
            problems.append(Problem(
                report.path, 0, f"snapshot epoch {sid.epoch} differs from the log's epoch "
                f"{holding[-1]} at offset {sid.offset - 1}"))
    return problems
