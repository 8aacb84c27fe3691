"""The quorum-state file and the simulator's in-memory store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.election_state import PRIMORDIAL, ElectionState
from kraft.log import MemoryQuorumStateStore, QuorumStateError, QuorumStateStore


def test_missing_file_is_primordial(tmp_path: Path) -> None:
    assert QuorumStateStore(tmp_path / "quorum-state").read() == PRIMORDIAL


@pytest.mark.parametrize(
    "state",
    [ElectionState(epoch=0), ElectionState(epoch=3, voted_id=1), ElectionState(7, leader_id=2)],
)
def test_round_trip(tmp_path: Path, state: ElectionState) -> None:
    store = QuorumStateStore(tmp_path / "quorum-state")
    store.write(state)
    assert store.read() == state
    assert QuorumStateStore(tmp_path / "quorum-state").read() == state


def test_file_is_one_line_of_kafka_json(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    QuorumStateStore(path).write(ElectionState(epoch=2, voted_id=1))
    text = path.read_text()
    assert text == '{"leaderId":-1,"leaderEpoch":2,"votedId":1,"data_version":1}\n'
    assert not (tmp_path / "quorum-state.tmp").exists()


def test_write_replaces_atomically_and_ignores_a_leftover_tmp(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    store = QuorumStateStore(path)
    store.write(ElectionState(epoch=1, leader_id=0))
    # A crash between writing the tmp file and the rename leaves it behind, maybe half written.
    (tmp_path / "quorum-state.tmp").write_text('{"leaderId":5,"leaderEp')
    assert store.read() == ElectionState(epoch=1, leader_id=0)
    store.write(ElectionState(epoch=2, voted_id=3))
    assert store.read() == ElectionState(epoch=2, voted_id=3)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]


def test_reads_kafka_files_with_extra_fields(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    path.write_text(
        '{"leaderId":-1,"leaderEpoch":2,"votedId":1,'
        '"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    )
    assert QuorumStateStore(path).read() == ElectionState(epoch=2, voted_id=1)


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ("", "not valid JSON"),
        ('{"leaderId":', "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"leaderId":-1,"leaderEpoch":2,"votedId":1,"data_version":7}', "data_version 7"),
        ('{"leaderId":-1,"leaderEpoch":2,"votedId":1}', "'data_version'"),
        ('{"leaderId":"1","leaderEpoch":2,"votedId":1,"data_version":1}', "'leaderId'"),
        ('{"leaderId":-1,"leaderEpoch":true,"votedId":1,"data_version":1}', "'leaderEpoch'"),
        ('{"leaderId":-1,"leaderEpoch":-4,"votedId":1,"data_version":1}', "epoch must be"),
        ('{"leaderId":-9,"leaderEpoch":4,"votedId":1,"data_version":1}', "must be >= -1"),
    ],
)
def test_malformed_file_names_the_path(tmp_path: Path, content: str, reason: str) -> None:
    path = tmp_path / "quorum-state"
    path.write_text(content)
    with pytest.raises(QuorumStateError, match=reason) as info:
        QuorumStateStore(path).read()
    assert str(path) in str(info.value)


def test_binary_garbage_names_the_path(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    path.write_bytes(b"\xff\xfe\x00")
    with pytest.raises(QuorumStateError, match=str(path)):
        QuorumStateStore(path).read()


def test_written_json_parses_with_the_standard_library(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    QuorumStateStore(path).write(ElectionState(epoch=9, leader_id=4))
    assert json.loads(path.read_text())["leaderEpoch"] == 9


def test_memory_store() -> None:
    store = MemoryQuorumStateStore()
    assert store.read() == PRIMORDIAL and store.writes == 0
    store.write(ElectionState(epoch=1, voted_id=2))
    store.write(ElectionState(epoch=1, leader_id=2))
    assert store.read() == ElectionState(epoch=1, leader_id=2)
    assert store.writes == 2
    store.wipe()
    assert store.read() == PRIMORDIAL
