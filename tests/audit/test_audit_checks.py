"""One test per log-level check that had none: the small three-node log of small_log.py
(real segment files), healthy except for the one fault the test injects, must make the audit
report that check with the node and offset of the fault; the healthy log reports nothing."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from audit.findings import VIOLATION, WARNING
from audit.job import AuditResult, run_audit
from audit.layout import HIGH_WATERMARK_FILE, discover
from metadata.records import (
    AccessControlEntryRecord,
    NoOpRecord,
    RemoveAccessControlEntryRecord,
    TopicRecord,
)
from metadata.scram import ScramMechanism
from metadata.security_records import RemoveUserScramCredentialRecord, UserScramCredentialRecord
from metadata.topics import METADATA_PARTITION_DIR
from tests.audit.small_log import (
    END,
    NODES,
    ORDERS,
    OTHER,
    Spec,
    healthy,
    leader_change,
    rec,
    write_nodes,
)
from tests.audit.test_jvm_reader import write_snapshot


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
    (tmp_path / "node-3" / METADATA_PARTITION_DIR / HIGH_WATERMARK_FILE).write_text(str(END))
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


def test_undecodable_record(spark, tmp_path: Path) -> None:
    """A record with an unknown type (99) inside a batch with a valid CRC, on every node: the
    replay of the canonical copy (node 1) cannot decode it."""
    specs = healthy()
    noops = list(specs[8].records)
    noops[1] = b"\x00\x63\x00\x00"
    write_nodes(tmp_path, [*specs[:8], replace(specs[8], records=tuple(noops))])
    result = audit(spark, tmp_path)
    assert found(result, "undecodable-record") == [(VIOLATION, 1, 19)], _lines(result)
    assert {f.check for f in result.findings} == {"undecodable-record"}, _lines(result)


def _from_offset_13(tmp_path: Path, snapshot: bool, state_acls: tuple[bytes, ...] = (),
                    last: list[Spec] | None = None) -> Path | None:
    """Every node's log starts at offset 13 (epoch 2's LEADER_CHANGE); node 1 may hold the
    snapshot at 13 with the state below it (and `state_acls`), as after log retention.
    `last` replaces the last batch (offsets 18-22)."""
    specs = healthy()
    write_nodes(tmp_path, [replace(specs[5], base=13), *specs[6:8], *(last or specs[8:])])
    if not snapshot:
        return None
    state = [r for spec in specs[:5] if not spec.control for r in spec.records]
    return write_snapshot(tmp_path / "node-1", 13, 1, [*state, *state_acls])


def test_a_log_seeded_by_a_snapshot_has_no_finding(spark, tmp_path: Path) -> None:
    _from_offset_13(tmp_path, snapshot=True)
    result = audit(spark, tmp_path)
    assert result.findings == [], _lines(result)
    assert result.replay_start == 13


def test_corrupt_snapshot(spark, tmp_path: Path) -> None:
    """The snapshot the replay must start from has a flipped byte."""
    path = _from_offset_13(tmp_path, snapshot=True)
    assert path is not None
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    result = audit(spark, tmp_path)
    assert found(result, "corrupt-snapshot") == [(VIOLATION, 1, 13)], _lines(result)
    detail = next(f.detail for f in result.findings if f.check == "corrupt-snapshot")
    assert str(path) in detail


def test_incomplete_history(spark, tmp_path: Path) -> None:
    """No log starts at 0 and no snapshot covers the offsets below: a warning, and the checks
    that need the earlier state are skipped rather than reported falsely."""
    _from_offset_13(tmp_path, snapshot=False)
    result = audit(spark, tmp_path)
    assert found(result, "incomplete-history") == [(WARNING, None, 13)], _lines(result)
    assert result.violations == [], _lines(result)


# -- ACLs (KIP-801): an id names one binding for good (Kafka's AclControlManager.replay) ------

ACL_IDS = tuple(f"AAAAAAAAAAAAAAAAAAAA{c}A" for c in "HIJK")


def _acl(acl_id: str, topic: str = "orders") -> AccessControlEntryRecord:
    """ALLOW User:alice WRITE on the topic (LITERAL), from any host."""
    return AccessControlEntryRecord(acl_id, 2, topic, 3, "User:alice", "*", 4, 3)


def _remove(acl_id: str) -> RemoveAccessControlEntryRecord:
    return RemoveAccessControlEntryRecord(acl_id)


def _with_acls(*records: object) -> list[Spec]:
    """The healthy log with its last batch (5 NoOps at offsets 18-22) replaced by `records`,
    so every offset stays where it was."""
    specs = healthy()
    assert len(records) == len(specs[8].records)
    return [*specs[:8], replace(specs[8], records=rec(*records))]


def test_an_acl_lifecycle_has_no_finding(spark, tmp_path: Path) -> None:
    """Created, removed, created under another id, the same binding twice under two ids: all
    legal. The records decode on the JVM (no undecodable-record)."""
    h, i, j, _ = ACL_IDS
    write_nodes(tmp_path, _with_acls(_acl(h), _acl(i), _remove(h), _acl(j), _remove(i)))
    result = audit(spark, tmp_path)
    assert result.findings == [], _lines(result)


def test_duplicate_acl(spark, tmp_path: Path) -> None:
    """An AccessControlEntryRecord whose id is in force (a binding created at 18 is created
    again at 20): every node's replay stops there."""
    h, i, _, _ = ACL_IDS
    write_nodes(tmp_path, _with_acls(_acl(h), _acl(i), _acl(h, "payments"), NoOpRecord(),
                                     NoOpRecord()))
    result = audit(spark, tmp_path)
    assert found(result, "duplicate-acl") == [(VIOLATION, 1, 20)], _lines(result)
    assert {f.check for f in result.findings} == {"duplicate-acl"}, _lines(result)
    detail = next(f.detail for f in result.findings if f.check == "duplicate-acl")
    assert h in detail and "since offset 18" in detail


def test_unknown_acl(spark, tmp_path: Path) -> None:
    """A removal of an id never created (19), and a second removal of one removed at 20 (21);
    the id created again after its removal (22) is legal."""
    h, i, _, _ = ACL_IDS
    write_nodes(tmp_path, _with_acls(_acl(h), _remove(i), _remove(h), _remove(h), _acl(h)))
    result = audit(spark, tmp_path)
    assert found(result, "unknown-acl") == [(VIOLATION, 1, 19), (VIOLATION, 1, 21)], \
        _lines(result)
    assert {f.check for f in result.findings} == {"unknown-acl"}, _lines(result)
    details = [f.detail for f in result.findings]
    assert i in details[0] and "never created" in details[0]
    assert h in details[1] and "removed at offset 20" in details[1]


def test_acls_from_the_seeding_snapshot(spark, tmp_path: Path) -> None:
    """The ACLs of the snapshot the replay starts from are in force: removing one is legal,
    creating it again is a duplicate, and removing an id it lacks is unknown. Without the
    snapshot the removals are not judged (their creation may lie before the log start)."""
    h, i, j, _ = ACL_IDS
    last = [replace(healthy()[8], records=rec(_remove(h), _acl(i), _remove(j), NoOpRecord(),
                                              NoOpRecord()))]
    _from_offset_13(tmp_path, snapshot=True, state_acls=rec(_acl(h), _acl(i)), last=last)
    result = audit(spark, tmp_path)
    assert found(result, "duplicate-acl") == [(VIOLATION, 1, 19)], _lines(result)
    assert found(result, "unknown-acl") == [(VIOLATION, 1, 20)], _lines(result)
    assert len(result.findings) == 2, _lines(result)
    detail = next(f.detail for f in result.findings if f.check == "duplicate-acl")
    assert "since offset 12" in detail  # the snapshot's records count as its last offset


def test_acl_removals_are_not_judged_without_the_history(spark, tmp_path: Path) -> None:
    h, _, j, _ = ACL_IDS
    last = [replace(healthy()[8], records=rec(_remove(h), _remove(j), NoOpRecord(),
                                              NoOpRecord(), NoOpRecord()))]
    _from_offset_13(tmp_path, snapshot=False, last=last)
    result = audit(spark, tmp_path)
    assert found(result, "unknown-acl") == [], _lines(result)
    assert {f.check for f in result.findings} == {"incomplete-history"}, _lines(result)


# -- SCRAM credentials (KIP-554): a removal must find one (Kafka's ScramControlManager.replay) --

SHA_256, SHA_512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


def _credential(user: str, mechanism: int) -> UserScramCredentialRecord:
    return UserScramCredentialRecord(user, mechanism, b"s" * 16, b"k" * 32, b"v" * 32, 4096)


def _uncredential(user: str, mechanism: int) -> RemoveUserScramCredentialRecord:
    return RemoveUserScramCredentialRecord(user, mechanism)


def test_unknown_scram_credential(spark, tmp_path: Path) -> None:
    """alice's SCRAM-SHA-512 credential set (18) and replaced (19: legal, as in Kafka); a
    removal of her SCRAM-SHA-256 one, never created (20); hers removed (21), then removed
    again (22). The records decode on the JVM (no undecodable-record)."""
    write_nodes(tmp_path, _with_acls(
        _credential("alice", SHA_512), _credential("alice", SHA_512),
        _uncredential("alice", SHA_256), _uncredential("alice", SHA_512),
        _uncredential("alice", SHA_512)))
    result = audit(spark, tmp_path)
    assert found(result, "unknown-scram-credential") == [(VIOLATION, 1, 20),
                                                         (VIOLATION, 1, 22)], _lines(result)
    assert {f.check for f in result.findings} == {"unknown-scram-credential"}, _lines(result)
    details = [f.detail for f in result.findings]
    assert "SCRAM-SHA-256 credential of user 'alice'" in details[0]
    assert "never created" in details[0]
    assert "SCRAM-SHA-512" in details[1] and "removed at offset 21" in details[1]


def test_scram_credentials_from_the_seeding_snapshot(spark, tmp_path: Path) -> None:
    """The snapshot's credentials are in force: removing one is legal (19), removing one it
    lacks is not (20)."""
    last = [replace(healthy()[8], records=rec(
        NoOpRecord(), _uncredential("alice", SHA_512), _uncredential("bob", SHA_512),
        NoOpRecord(), NoOpRecord()))]
    _from_offset_13(tmp_path, snapshot=True, state_acls=rec(_credential("alice", SHA_512)),
                    last=last)
    result = audit(spark, tmp_path)
    assert found(result, "unknown-scram-credential") == [(VIOLATION, 1, 20)], _lines(result)
    assert len(result.findings) == 1 and "user 'bob'" in result.findings[0].detail


@pytest.mark.parametrize("check", ["corrupt-batch", "torn-tail", "offset-overlap",
                                   "duplicate-leader-change", "duplicate-topic",
                                   "epoch-decrease", "undecodable-record", "corrupt-snapshot",
                                   "incomplete-history", "duplicate-acl", "unknown-acl",
                                   "unknown-scram-credential"])
def test_every_check_here_is_one_the_audit_documents(check: str) -> None:
    doc = (Path(__file__).parents[2] / "docs" / "audit.md").read_text()
    assert f"`{check}`" in doc
