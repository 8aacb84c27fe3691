"""Rewriting one batch of a segment file, to inject faults into copies of healthy logs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from kraft.log.base import Batch
from kraft.log.codec import decode_batches, encode_batch
from kraft.log.segmented import list_segments
from metadata.topics import METADATA_PARTITION_DIR


def segments(node_dir: Path) -> list[tuple[int, str]]:
    return list_segments(node_dir / METADATA_PARTITION_DIR)


def find_batch(node_dir: Path, match: Callable[[Batch], bool]) -> Batch:
    for _, path in segments(node_dir):
        for batch in decode_batches(Path(path).read_bytes(), path):
            if match(batch):
                return batch
    raise AssertionError("no batch matches")


def rewrite_batch(node_dir: Path, base_offset: int, records: list[bytes],
                  control: bool = False) -> None:
    """Replace the batch at `base_offset` by one with `records` (same count, so offsets stay
    contiguous), re-encoded with a valid CRC: damage no frame check can see."""
    for _, path in segments(node_dir):
        data = Path(path).read_bytes()
        out, found = [], False
        for batch in decode_batches(data, path):
            if batch.base_offset == base_offset:
                assert len(records) == len(batch.records)
                out.append(encode_batch(base_offset, batch.epoch, records,
                                        batch.first_timestamp_ms, control))
                found = True
            else:
                out.append(encode_batch(batch.base_offset, batch.epoch, list(batch.records),
                                        batch.first_timestamp_ms, batch.control))
        if found:
            Path(path).write_bytes(b"".join(out))
            return
    raise AssertionError(f"no batch at offset {base_offset}")
