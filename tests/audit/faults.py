"""Rewriting one batch of a segment file, to inject faults into copies of healthy logs; and
the secrets a log holds, to check that no audit output shows them."""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa

from kraft.log.base import Batch
from kraft.log.codec import decode_batches, encode_batch
from kraft.log.segmented import list_segments
from metadata.records import decode_record
from metadata.security_records import UserScramCredentialRecord
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


def scram_secrets(node_dir: Path) -> list[bytes]:
    """The salt, stored key and server key of every SCRAM credential in the node's log."""
    out: list[bytes] = []
    for _, path in segments(node_dir):
        for batch in decode_batches(Path(path).read_bytes(), path):
            for data in () if batch.control else batch.records:
                record = decode_record(data)
                if isinstance(record, UserScramCredentialRecord):
                    out += [record.salt, record.stored_key, record.server_key]
    return out


def assert_no_secret(rows: pa.Table, secrets: list[bytes]) -> None:
    """No cell of `rows` holds a secret raw (as text), in base64 or in hex."""
    assert secrets
    forms = {form for s in secrets for form in (
        s.decode("latin-1"), base64.b64encode(s).decode(), s.hex(), s.hex().upper())}
    for name in rows.column_names:
        for value in rows.column(name).to_pylist():
            text = str(value)
            leaked = [f for f in forms if f in text]
            assert not leaked, f"column {name} shows a secret: {text}"
