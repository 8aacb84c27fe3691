"""One test per log-level check that had none: a small three-node log written as real segment
files (kraft.log.codec's batch encoder, the metadata record encoders, segment names from
kraft.log.segmented), healthy except for the one fault the test injects, must make the audit
report that check with the node and offset of the fault; the healthy log reports nothing."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from audit.findings import VIOLATION, WARNING
from audit.job import AuditResult, run_audit
from audit.layout import HIGH_WATERMARK_FILE, PARTITION_DIR, discover
from kraft.log.codec import LEADER_CHANGE, encode_batch, encode_control_record
from kraft.log.segmented import segment_path
from kraft.server.meta_properties import MetaProperties, write_meta_properties
from metadata.records import (
    BrokerRegistrationChangeRecord,
    FencingChange,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_record,
)

NODES = (1, 2, 3)
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
T0 = 1_700_000_000_000
ORDERS = "AAAAAAAAAAAAAAAAAAAAEA"  # fixed topic ids: the log is the same bytes every run
PAYMENTS = "AAAAAAAAAAAAAAAAAAAAFA"
OTHER = "AAAAAAAAAAAAAAAAAAAAGA"
INCARNATIONS = ("AAAAAAAAAAAAAAAAAAAABA", "AAAAAAAAAAAAAAAAAAAACA", "AAAAAAAAAAAAAAAAAAAADA")


@dataclass(frozen=True)
class Spec:
    """One batch to write. `base` None: right after the previous batch."""

    epoch: int
    records: tuple[bytes, ...]
    control: bool = False
    base: int | None = None


def leader_change(leader: int) -> tuple[bytes, ...]:
    return (encode_control_record(LEADER_CHANGE, {"leaderId": leader, "voters": list(NODES),
                                                  "grantingVoters": list(NODES)}),)


def rec(*records: object) -> tuple[bytes, ...]:
    return tuple(encode_record(r) for r in records)  # type: ignore[arg-type]


def healthy() -> list[Spec]:
    """Two controller epochs, three brokers, two topics, ISR and leader changes: 9 batches,
    offsets 0..22, obeying every rule the audit checks."""
    return [
        Spec(1, leader_change(1), control=True),                                 # 0
        Spec(1, rec(*(RegisterBrokerRecord(b, INCARNATIONS[b], 10 + b, fenced=True)
                      for b in range(3)))),                                      # 1-3
        Spec(1, rec(*(BrokerRegistrationChangeRecord(b, 10 + b, FencingChange.UNFENCE)
                      for b in range(3)))),                                      # 4-6
        Spec(1, rec(TopicRecord("orders", ORDERS),
                    *(PartitionRecord(p, ORDERS, (0, 1, 2), (0, 1, 2), leader=p)
                      for p in range(3)))),                                      # 7-10
        Spec(1, rec(PartitionChangeRecord(0, ORDERS, isr=(0, 1)),
                    PartitionChangeRecord(1, ORDERS, leader=2))),                # 11-12
        Spec(2, leader_change(2), control=True),                                 # 13
        Spec(2, rec(TopicRecord("payments", PAYMENTS),
                    PartitionRecord(0, PAYMENTS, (1, 2), (1, 2), leader=1))),    # 14-15
        Spec(2, rec(NoOpRecord(), PartitionChangeRecord(0, ORDERS, isr=(0, 1, 2)))),  # 16-17
        Spec(2, rec(*(NoOpRecord() for _ in range(5)))),                         # 18-22
    ]


SEGMENT_STARTS = (0, 4, 7)  # batch indexes that open a segment: three segment files
END = 23


@dataclass(frozen=True)
class Written:
    """Where a batch landed: its file, byte position and size."""

    path: str
    position: int
    size: int


def write_node(root: Path, node: int, specs: list[Spec]) -> dict[int, Written]:
    """The node's metadata.log.dir under `root`: meta.properties, and the batches as segment
    files. Returns where each batch (by base offset) was written."""
    node_dir = root / f"node-{node}"
    partition = node_dir / PARTITION_DIR
    partition.mkdir(parents=True)
    write_meta_properties(os.fspath(node_dir), MetaProperties(CLUSTER_ID, node))
    where: dict[int, Written] = {}
    offset, path, data = 0, "", bytearray()
    for i, spec in enumerate(specs):
        base = offset if spec.base is None else spec.base
        if i in SEGMENT_STARTS:
            if path:
                Path(path).write_bytes(data)
            path, data = segment_path(os.fspath(partition), base), bytearray()
        frame = encode_batch(base, spec.epoch, list(spec.records), T0 + base, spec.control)
        where[base] = Written(path, len(data), len(frame))
        data += frame
        offset = base + len(spec.records)
    Path(path).write_bytes(data)
    return where


def write_nodes(root: Path, specs: list[Spec], **per_node: list[Spec]) -> dict[int, dict]:
    """Every node with `specs`, except those named `node_N=` with their own."""
    return {n: write_node(root, n, per_node.get(f"node_{n}", specs)) for n in NODES}


def audit(spark, root: Path) -> AuditResult:  # type: ignore[no-untyped-def]
    return run_audit(spark, [discover(os.fspath(root / f"node-{n}")) for n in NODES],
                     partitions=2)


def found(result: AuditResult, check: str) -> list[tuple[str, int | None, int | None]]:
    return sorted((f.severity, f.node_id, f.offset) for f in result.findings
                  if f.check == check)


def _lines(result: AuditResult) -> list[str]:
    return [f.line() for f in result.findings]


def test_the_healthy_log_has_no_finding(spark, tmp_path: Path) -> None:
    write_nodes(tmp_path, healthy())
    result = audit(spark, tmp_path)
    assert result.findings == [], _lines(result)
    assert result.records == END
    assert [(x.epoch, x.leader_id, x.start_offset) for x in result.leadership] == [
        (1, 1, 0), (2, 2, 13)]


def test_corrupt_batch(spark, tmp_path: Path) -> None:
    """A flipped byte inside the batch at offset 4, in the middle of node 2's first segment:
    the frame is whole but its CRC is wrong, and a valid batch follows it, so it is no torn
    tail."""
    where = write_nodes(tmp_path, healthy())
    bad = where[2][4]
    data = bytearray(Path(bad.path).read_bytes())
    assert bad.position > 0 and len(data) > bad.position + bad.size  # mid-segment
    data[bad.position + bad.size - 3] ^= 0xFF
    Path(bad.path).write_bytes(bytes(data))
    result = audit(spark, tmp_path)
    assert found(result, "corrupt-batch") == [(VIOLATION, 2, 4)], _lines(result)
    detail = next(f.detail for f in result.findings if f.check == "corrupt-batch")
    assert bad.path in detail and "CRC32C mismatch" in detail
    assert found(result, "torn-tail") == found(result, "truncated-segment") == []


def test_torn_tail(spark, tmp_path: Path) -> None:
    """Node 3's last batch cut short, as a crash mid-write leaves it: a warning while the
    node's committed end is unknown, a violation once its committed end (its high-watermark
    file) lies beyond the tear: a committed batch was lost."""
    where = write_nodes(tmp_path, healthy())
    tail = where[3][18]
    assert tail.position + tail.size == os.path.getsize(tail.path)  # the last batch
    os.truncate(tail.path, tail.position + tail.size // 2)
    result = audit(spark, tmp_path)
    assert found(result, "torn-tail") == [(WARNING, 3, 18)], _lines(result)
    assert result.violations == [], _lines(result)
    (tmp_path / "node-3" / PARTITION_DIR / HIGH_WATERMARK_FILE).write_text(str(END))
    result = audit(spark, tmp_path)
    assert found(result, "torn-tail") == [(VIOLATION, 3, 18)], _lines(result)
    detail = next(f.detail for f in result.findings if f.check == "torn-tail")
    assert "partial batch" in detail and tail.path in detail


def test_offset_overlap(spark, tmp_path: Path) -> None:
    """Node 2 holds a batch that starts one offset early: it overlaps the batch before it
    (one record longer, so nothing is missing after it)."""
    specs = healthy()
    overlapping = [*specs[:7], replace(specs[7], base=15, records=(
        *rec(NoOpRecord()), *specs[7].records)), *specs[8:]]
    write_nodes(tmp_path, specs, node_2=overlapping)
    result = audit(spark, tmp_path)
    # The batch at 14-15 ends at 15, the next starts at 15: offset 16 was expected there.
    assert found(result, "offset-overlap") == [(VIOLATION, 2, 16)], _lines(result)
    assert found(result, "offset-gap") == []
    detail = next(f.detail for f in result.findings if f.check == "offset-overlap")
    assert "after offset 15 starts at 15" in detail


def test_duplicate_leader_change(spark, tmp_path: Path) -> None:
    """Epoch 2 opens with a LEADER_CHANGE for node 2, and a second one, naming the same
    leader, follows later in the epoch on every node."""
    specs = healthy()
    twice = [*specs[:8], Spec(2, leader_change(2), control=True), *specs[8:]]
    write_nodes(tmp_path, twice)
    result = audit(spark, tmp_path)
    assert found(result, "duplicate-leader-change") == [(VIOLATION, n, 18) for n in NODES], \
        _lines(result)
    assert found(result, "two-leaders-in-epoch") == []
    assert [(x.epoch, x.leader_id) for x in result.leadership] == [(1, 1), (2, 2)]


def test_duplicate_topic(spark, tmp_path: Path) -> None:
    """A second live topic named `orders`, with another id, on every node."""
    specs = healthy()
    again = [*specs[:8], Spec(2, rec(TopicRecord("orders", OTHER))), *specs[8:]]
    write_nodes(tmp_path, again)
    result = audit(spark, tmp_path)
    # The metadata replay takes each offset from the lowest node id that holds it: node 1.
    assert found(result, "duplicate-topic") == [(VIOLATION, 1, 18)], _lines(result)
    detail = next(f.detail for f in result.findings if f.check == "duplicate-topic")
    assert "orders" in detail and OTHER in detail and ORDERS in detail


def test_log_level_epoch_decrease(spark, tmp_path: Path) -> None:
    """A data batch of epoch 1 after epoch 2's batches, on every node (so the nodes agree and
    the one thing wrong is the epoch going down with the offset)."""
    specs = healthy()
    back = [*specs[:8], replace(specs[8], epoch=1)]
    write_nodes(tmp_path, back)
    result = audit(spark, tmp_path)
    assert found(result, "epoch-decrease") == [(VIOLATION, n, 18) for n in NODES], \
        _lines(result)
    detail = next(f.detail for f in result.findings if f.check == "epoch-decrease")
    assert detail == "epoch 1 after epoch 2"
    # Nothing else is wrong with that log.
    assert {f.check for f in result.findings} == {"epoch-decrease"}, _lines(result)


@pytest.mark.parametrize("check", ["corrupt-batch", "torn-tail", "offset-overlap",
                                   "duplicate-leader-change", "duplicate-topic",
                                   "epoch-decrease"])
def test_every_check_here_is_one_the_audit_documents(check: str) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "audit.md").read_text()
    assert f"`{check}`" in doc
