"""Differential: the JVM reader (audit/jvm.py, audit/jvm/src) gives the same rows as the
Python `kraft-metadata` source, on healthy logs, on a snapshot, and on every kind of damage:
a truncated segment, a torn tail, a bad CRC, undecodable records, corrupt snapshots."""

from __future__ import annotations

import math
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from audit import jvm
from audit.source import NAME
from kraft.log.codec import (
    LEADER_CHANGE,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    decode_batches,
    encode_batch,
    encode_control_record,
)
from metadata.topics import METADATA_PARTITION_DIR
from tests.audit.faults import (
    assert_no_secret,
    find_batch,
    rewrite_batch,
    scram_secrets,
    segments,
)

NODES = (1, 2, 3)
_KEY = [(c, "ascending") for c in ("node_id", "source_file", "offset", "record_index",
                                   "batch_position")]


def _rows(frame) -> pa.Table:  # type: ignore[no-untyped-def]
    return frame.toArrow().sort_by(_KEY)


def assert_same_rows(spark, dirs: list[str], **options: str) -> pa.Table:  # type: ignore[no-untyped-def]
    options = {"includeJson": "false", **options}
    python = _rows(spark.read.format(NAME).options(**options).load(dirs))
    java = _rows(jvm.read(spark, options, dirs))
    assert java.schema.equals(python.schema)
    assert java.num_rows == python.num_rows
    for name in python.column_names:
        a, b = python.column(name), java.column(name)
        if not a.equals(b):
            first = next(i for i, (x, y) in enumerate(zip(a.to_pylist(), b.to_pylist(),
                                                          strict=True)) if x != y)
            raise AssertionError(f"column {name} differs at row {first}: python "
                                 f"{python.slice(first, 1).to_pylist()} java "
                                 f"{java.slice(first, 1).to_pylist()}")
    return python


def write_snapshot(node: Path, end_offset: int, epoch: int, records: list[bytes]) -> Path:
    """A snapshot file as SnapshotBuilder writes it: header, data batches, footer."""
    batches = [encode_batch(0, epoch, [encode_control_record(
        SNAPSHOT_HEADER, {"version": 0, "lastContainedLogTimestamp": 1})], 1, control=True)]
    offset = 1
    for i in range(0, len(records), 50):
        chunk = records[i:i + 50]
        batches.append(encode_batch(offset, epoch, chunk, 1))
        offset += len(chunk)
    batches.append(encode_batch(offset, epoch, [encode_control_record(SNAPSHOT_FOOTER, {})], 1,
                                control=True))
    path = node / METADATA_PARTITION_DIR / f"{end_offset:020d}-{epoch:010d}.checkpoint"
    path.write_bytes(b"".join(batches))
    return path


def _data_records(node: Path, limit: int) -> list[bytes]:
    _, path = segments(node)[0]
    out: list[bytes] = []
    for batch in decode_batches(Path(path).read_bytes(), path):
        if not batch.control:
            out.extend(batch.records)
    return out[:limit]


def test_same_rows_on_a_healthy_log_with_a_snapshot(spark, synthetic, tmp_path: Path) -> None:
    root, info = synthetic
    copy = tmp_path / "logs"
    shutil.copytree(root, copy)
    write_snapshot(copy / "node-2", 400, 1, _data_records(copy / "node-2", 300))
    dirs = [os.fspath(copy / f"node-{n}") for n in NODES]
    rows = assert_same_rows(spark, dirs)
    assert rows.num_rows == 3 * info.records + 302  # the snapshot: header, 300, footer
    # The security records decode on the JVM too (they were UNDECODABLE), in the segments
    # and in the snapshot, and the JVM's rows hold no salt or key either.
    types = rows.column("record_type").to_pylist()
    assert "UNDECODABLE" not in types
    for name, count in (("USER_SCRAM_CREDENTIAL_RECORD", 3), ("CLIENT_QUOTA_RECORD", 4),
                        ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", 1),
                        ("ACCESS_CONTROL_ENTRY_RECORD", 4)):
        assert types.count(name) == 4 * count, name  # three nodes and the snapshot
    assert_no_secret(rows, scram_secrets(copy / "node-1"))
    assert_same_rows(spark, dirs, level="batch", includeSnapshots="false")
    assert_same_rows(spark, dirs, startOffset="150", endOffset="5020", committedOnly="true",
                     committedEnd="1=4000")
    assert_same_rows(spark, dirs, nodeRanges='{"1": [[0, 300]], "3": [[300, 9000]]}')


def test_same_rows_and_errors_on_damaged_logs(spark, synthetic, tmp_path: Path) -> None:
    root, _ = synthetic
    copy = tmp_path / "logs"
    shutil.copytree(root, copy)
    nodes = {n: copy / f"node-{n}" for n in NODES}
    # Undecodable records of every kind the decoder names, in one valid-CRC batch of node 1.
    bad = [b"\x00", b"\x00\x63\x00\x00", b"\x00\x05\x00\x07", b"\x00\x05\x00\x00\xff",
           b"\x00\x02\x00\x00\x0a\x02\xff\xfe", b"\x00\x03\x00\x00\x1a\x05\x01",
           # ACL records (18, 19): a truncated id, a principal that is not UTF-8, a
           # removal whose id's length (127) runs past the end
           b"\x00\x12\x00\x00\x0a\x05ab", b"\x00\x12\x00\x00\x2a\x01\xff",
           b"\x00\x13\x00\x00\x0a\x7f",
           # SCRAM records (11, 22): a user that is not UTF-8, a salt running past the end,
           # a removal's truncated user
           b"\x00\x0b\x00\x00\x0a\x01\xff", b"\x00\x0b\x00\x00\x0a\x01u\x1a\x7f",
           b"\x00\x16\x00\x00\x0a\x05ab",
           # ClientQuotaRecord (14): an entity name that is not UTF-8, a truncated double,
           # an entity holding an unterminated group
           b"\x00\x0e\x00\x00\x0a\x03\x12\x01\xff", b"\x00\x0e\x00\x00\x19\x00\x00",
           b"\x00\x0e\x00\x00\x0a\x01\x0b"]
    valid = [
        b"\x00\x14\x00\x00\x0b\x0c",  # a NoOp with an empty group: valid protobuf
        # Valid but odd: a credential with mechanism -1 (ten-byte varint), a salt sent as a
        # varint (skipped) and iterations 8192; a quota whose entities have no type, a name
        # "" (not the default), whose value is +inf and whose remove flag is 5
        b"\x00\x0b\x00\x00\x0a\x01u\x10" + b"\xff" * 9 + b"\x01\x18\x07\x30\x80\x40",
        b"\x00\x0e\x00\x00\x0a\x00\x0a\x02\x12\x00\x19" + struct.pack("<d", math.inf)
        + b"\x20\x05"]
    target = find_batch(nodes[1], lambda b: not b.control
                        and len(b.records) >= len(bad) + len(valid))
    rewrite_batch(nodes[1], target.base_offset,
                  [*bad, *valid, *target.records[len(bad) + len(valid):]])
    control = find_batch(nodes[1], lambda b: b.control)
    rewrite_batch(nodes[1], control.base_offset, [b"\x00\x02[1]"], control=True)
    leader = find_batch(nodes[2], lambda b: b.control and b.base_offset > 0)
    rewrite_batch(nodes[2], leader.base_offset, [encode_control_record(
        LEADER_CHANGE, {"leaderId": 2.5, "voters": [1, "x"]})], control=True)
    # A bad CRC in a middle segment of node 1, a truncated middle segment on node 3.
    _, path = segments(nodes[1])[1]
    data = bytearray(Path(path).read_bytes())
    data[len(data) // 2] ^= 0xFF
    Path(path).write_bytes(bytes(data))
    _, path = segments(nodes[3])[2]
    os.truncate(path, os.path.getsize(path) // 3)
    # A torn tail on node 2's last segment: half of a batch appended.
    _, path = segments(nodes[2])[-1]
    with open(path, "ab") as file:
        file.write(encode_batch(10**6, 9, [b"\x00\x14\x00\x00"] * 5, 1)[:30])
    # Snapshots: whole, bad CRC, truncated, no footer, empty.
    records = _data_records(nodes[1], 120)
    write_snapshot(nodes[1], 200, 1, records)
    broken = write_snapshot(nodes[2], 200, 1, records)
    data = bytearray(broken.read_bytes())
    data[300] ^= 0x01
    broken.write_bytes(bytes(data))
    short = write_snapshot(nodes[3], 200, 1, records)
    short.write_bytes(short.read_bytes()[:-20])
    nofooter = write_snapshot(nodes[3], 100, 1, records[:10])
    nofooter.write_bytes(nofooter.read_bytes()[:-70])
    (nodes[3] / METADATA_PARTITION_DIR / f"{50:020d}-{1:010d}.checkpoint").write_bytes(b"")
    dirs = [os.fspath(d) for d in nodes.values()]

    rows = assert_same_rows(spark, dirs)
    errors = rows.filter(rows.column("error").is_valid()).to_pylist()
    kinds = {(r["node_id"], r["record_type"], r["source_kind"]) for r in errors}
    assert {(1, "UNDECODABLE", "segment"), (1, "CORRUPT", "segment"),
            (2, "CORRUPT", "segment"), (3, "CORRUPT", "segment"),
            (2, "CORRUPT", "snapshot"), (3, "CORRUPT", "snapshot")} <= kinds
    assert sum(r["record_type"] == "UNDECODABLE" and r["source_kind"] == "segment"
               for r in errors) == len(bad) + 1  # and the control record that is no object
    assert any("torn tail" in r["error"] for r in errors if r["node_id"] == 2)
    assert any("CRC32C mismatch" in r["error"] for r in errors if r["node_id"] == 1)
    odd = rows.filter(pa.compute.equal(rows.column("batch_base_offset"),
                                       target.base_offset)).to_pylist()
    odd = [r for r in odd if r["node_id"] == 1 and r["source_kind"] == "segment"]
    scram, quota = odd[len(bad) + 1], odd[len(bad) + 2]
    assert (scram["scram_user"], scram["scram_mechanism"], scram["scram_iterations"]) == (
        "u", -1, 8192)
    assert (quota["quota_entity_types"], quota["quota_entity_names"], quota["quota_value"],
            quota["quota_remove"]) == (["", ""], [None, ""], math.inf, True)
    assert_same_rows(spark, dirs, level="batch", includeSnapshots="false")


def test_same_rows_on_a_real_run(spark, real_run) -> None:
    dirs = [os.fspath(d) for d in real_run.node_dirs.values()]
    assert_same_rows(spark, dirs)
    assert_same_rows(spark, dirs, level="batch")


def test_without_javac_the_cli_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "JAVA_HOME": os.fspath(tmp_path / "no-jdk"), "PATH": "/nonexistent",
           "KRAFT_AUDIT_CACHE": os.fspath(tmp_path / "cache")}
    log = tmp_path / "node-1" / METADATA_PARTITION_DIR
    log.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "audit.cli", "--log-dir", os.fspath(log.parent),
                           "--node-ids", "1", "--out", os.fspath(tmp_path / "out")],
                          capture_output=True, text=True, env=env, check=False, timeout=120)
    assert done.returncode == 1, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "JDK 17" in lines[0] and "JAVA_HOME" in lines[0], lines


@pytest.mark.parametrize("jobs", [2])
def test_concurrent_builds_leave_one_whole_jar(tmp_path: Path, jobs: int) -> None:
    env = {**os.environ, "KRAFT_AUDIT_CACHE": os.fspath(tmp_path / "cache")}
    code = "from audit.jvm import ensure_jar; print(ensure_jar())"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env,
                              text=True) for _ in range(jobs)]
    outs = {p.communicate(timeout=180)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    [jar] = outs
    import zipfile
    with zipfile.ZipFile(jar) as z:
        assert "io/kraft/audit/KraftAudit.class" in z.namelist()
    assert [p.name for p in Path(jar).parent.iterdir()] == ["kraft-audit.jar"]
