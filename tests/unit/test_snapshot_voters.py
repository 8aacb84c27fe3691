"""A snapshot may carry the voter set (KIP-853): one control batch right after its header,
accepted by both verifiers, read back by the Raft layer and named by the dump."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kraft.core.voters import (
    ReplicaKey,
    SnapshotVoters,
    VoterNode,
    VoterSet,
    bootstrap_control_records,
)
from kraft.log.base import CorruptRecordError, OffsetAndEpoch
from kraft.log.codec import KRAFT_VERSION, KRAFT_VOTERS, encode_batch, encode_control_record
from kraft.log.snapshots import (
    BOOTSTRAP_SNAPSHOT_ID,
    FileSnapshotStore,
    read_control_records,
    snapshot_file_name,
    verify_snapshot_bytes,
)
from snapshots.verify import verify_snapshot

VOTERS = VoterSet.of(
    VoterNode(ReplicaKey(i, f"dir-{i}-aaaaaaaaaaaaaa"), f"c{i}:9093") for i in (1, 2, 3)
)


def _write(
    tmp_path: Path, snapshot_id: OffsetAndEpoch, control: list[bytes], state: bool = True
) -> str:
    store = FileSnapshotStore(str(tmp_path))
    builder = store.builder(snapshot_id, 0, control_records=control)
    if state:
        builder.append([b"state"])
    builder.freeze()
    return os.path.join(str(tmp_path), snapshot_file_name(snapshot_id))


def test_the_voter_set_round_trips_through_a_snapshot(tmp_path: Path) -> None:
    snapshot_id = OffsetAndEpoch(10, 2)
    _write(tmp_path, snapshot_id, bootstrap_control_records(VOTERS))
    store = FileSnapshotStore(str(tmp_path))
    records = read_control_records(store, snapshot_id)
    assert [kind for kind, _ in records] == [KRAFT_VERSION, KRAFT_VOTERS]
    found = SnapshotVoters.from_control_records(snapshot_id.offset, records)
    assert found == SnapshotVoters(9, 1, VOTERS)  # in effect at its last contained offset
    assert verify_snapshot_bytes(store.read_all(snapshot_id), snapshot_id).records == 1


def test_the_offline_verifier_accepts_a_voter_set_and_nothing_else(tmp_path: Path) -> None:
    good = _write(tmp_path / "good", BOOTSTRAP_SNAPSHOT_ID, bootstrap_control_records(VOTERS),
                  state=False)
    assert verify_snapshot(good).problems == []
    header = encode_control_record(3, {"version": 0, "lastContainedLogTimestamp": 0})
    foreign = encode_control_record(2, {"leaderId": 1})
    footer = encode_control_record(4, {"version": 0})
    data = b"".join(encode_batch(i, 0, [r], 0, control=True)
                    for i, r in enumerate((header, foreign, footer)))
    bad = tmp_path / snapshot_file_name(BOOTSTRAP_SNAPSHOT_ID)
    bad.write_bytes(data)
    assert [p.reason for p in verify_snapshot(str(bad)).problems] == [
        "control batch inside the snapshot"
    ]
    with pytest.raises(CorruptRecordError, match="control batch inside the snapshot"):
        verify_snapshot_bytes(data, None)  # the Raft layer's own check refuses it too
