"""`kraft-snapshot dump`: every batch and record of segments and snapshots, like
`kafka-dump-log --cluster-metadata-decoder`."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import Any

from kraft.log.snapshots import parse_snapshot_file_name
from snapshots.frames import Damage, Frame, describe_record, walk
from snapshots.source import Source

Out = Callable[[str], None]


def dump_files(source: Source) -> list[str]:
    """The files a source names, in log order: snapshots by end offset, then segments."""
    if source.lone_snapshot is not None:
        return [source.lone_snapshot]
    return [path for _, path in source.snapshots] + [path for _, path in source.segments]


def _file_heading(path: str) -> dict[str, Any]:
    name = os.path.basename(path)
    snapshot_id = parse_snapshot_file_name(name)
    if snapshot_id is not None:
        return {"file": path, "kind": "snapshot", "snapshotEndOffset": snapshot_id.offset,
                "snapshotEpoch": snapshot_id.epoch}
    if name.endswith(".log"):
        base = name[: -len(".log")]
        return {"file": path, "kind": "segment",
                "logStartOffset": int(base) if base.isdigit() else None}
    return {"file": path, "kind": "unknown"}


def dump_file(path: str, out: Out, as_json: bool) -> list[str]:
    """Print one file; returns its problems as `path: byte N: reason` lines."""
    heading = _file_heading(path)
    if as_json:
        out(json.dumps(heading))
    else:
        out(f"Dumping {path}")
        if heading["kind"] == "snapshot":
            out(f"Snapshot end offset: {heading['snapshotEndOffset']}, "
                f"epoch: {heading['snapshotEpoch']}")
        elif heading["kind"] == "segment":
            out(f"Log starting offset: {heading['logStartOffset']}")
    with open(path, "rb") as file:
        data = file.read()
    problems: list[str] = []
    if not data and heading["kind"] != "segment":  # an empty segment is a valid, new one
        problems.append(f"{path}: byte 0: empty file: a snapshot starts with a header")
    for item in walk(data, path):
        if isinstance(item, Damage):
            torn = " (torn tail)" if item.torn_tail else ""
            problems.append(f"{path}: byte {item.position}: {item.reason}{torn}")
            if as_json:
                out(json.dumps({"file": path, "position": item.position, "error": item.reason,
                                "tornTail": item.torn_tail}))
            continue
        problems.extend(_dump_batch(path, item, out, as_json))
    return problems


def _dump_batch(path: str, frame: Frame, out: Out, as_json: bool) -> list[str]:
    batch = frame.batch
    records = []
    problems = []
    for index in range(len(batch.records)):
        described, error = describe_record(batch, index)
        offset = batch.base_offset + index
        if error is not None:
            described["error"] = error
            problems.append(f"{path}: byte {frame.position}: record at offset {offset}: {error}")
        records.append({"offset": offset, "size": len(batch.records[index]), **described})
    fields = {
        "baseOffset": batch.base_offset, "lastOffset": batch.last_offset,
        "count": len(batch.records), "epoch": batch.epoch, "isControl": batch.control,
        "position": frame.position, "createTime": batch.first_timestamp_ms,
        "maxTimestamp": batch.max_timestamp_ms, "size": batch.size_in_bytes, "crc": batch.crc,
    }
    if as_json:
        out(json.dumps({"file": path, **fields, "records": records}))
        return problems
    out(f"baseOffset: {batch.base_offset} lastOffset: {batch.last_offset} count: "
        f"{len(batch.records)} epoch: {batch.epoch} isControl: {_bool(batch.control)} "
        f"position: {frame.position} CreateTime: {batch.max_timestamp_ms} size: "
        f"{batch.size_in_bytes} magic: 1 crc: {batch.crc} isvalid: true")
    for record in records:
        prefix = (f"| offset: {record['offset']} CreateTime: {batch.max_timestamp_ms} "
                  f"size: {record['size']}")
        if "error" in record:
            out(f"{prefix} payload: Error at {record['offset']}, skipping. {record['error']}")
        elif "controlType" in record:
            out(f"{prefix} {record['controlType']} {json.dumps(record['body'])}")
        else:
            out(f"{prefix} payload: {json.dumps(record['payload'], separators=(',', ':'))}")
    return problems


def _bool(value: bool) -> str:
    return "true" if value else "false"
