"""The campaign's own machinery, without processes: the checks catch a lost, duplicated,
phantom or reordered write; the schedule is a function of the seed; fault files compose."""

from __future__ import annotations

from pathlib import Path

from kraft.log.base import OffsetAndEpoch
from kraft.log.codec import encode_batch
from kraft.log.snapshots import FileSnapshotStore, SnapshotBuilder
from metadata.records import ConfigRecord, ConfigResourceType, TopicRecord, encode_record
from tests.chaos.checks import check_log, order_violations
from tests.chaos.committed import PARTITION_DIR, CommittedIndex, build_index, read_node_log
from tests.chaos.faults import FaultFiles
from tests.chaos.schedule import PROCESS_KINDS, Fault, build_schedule
from tests.chaos.snapshots import to_check as snapshot_check
from tests.chaos.writers import Write

ID = "AAAAAAAAAAAAAAAAAAAAAA"


def index(topics: dict[str, list[int]], configs: dict[tuple[str, str], list[int]]
          ) -> CommittedIndex:
    return CommittedIndex(1, 100, {n: [(o, ID) for o in offs] for n, offs in topics.items()},
                          configs, {}, [])


def create(topic: str, start: float, end: float, acked: bool = True) -> Write:
    return Write(0, 0, "create", topic, "", start, end, acked)


def failed(checks: list) -> set[str]:  # type: ignore[type-arg]
    return {c.name for c in checks if not c.ok}


def test_every_check_passes_on_a_faithful_log() -> None:
    writes = [create("t-a", 0, 1), create("t-b", 2, 3), create("t-c", 2.5, 4, acked=False),
              Write(0, 1, "config", "cfg", "7", 5, 6, True)]
    idx = index({"t-a": [3], "t-b": [9]}, {("cfg", "7"): [12]})
    assert failed(check_log(writes, idx)) == set()


def test_a_lost_acknowledged_write_fails() -> None:
    writes = [create("t-a", 0, 1), Write(0, 1, "config", "cfg", "7", 5, 6, True)]
    assert failed(check_log(writes, index({"t-a": [3]}, {}))) == {
        "acknowledged writes are committed"}


def test_a_write_committed_twice_and_a_phantom_fail() -> None:
    writes = [create("t-a", 0, 1, acked=False)]
    idx = index({"t-a": [3, 8], "t-nobody": [9]}, {("cfg", "1"): [10]})
    assert failed(check_log(writes, idx)) == {"no write is committed twice",
                                              "nothing committed that nobody wrote"}


def test_order_is_checked_only_between_writes_that_did_not_overlap() -> None:
    first, second, overlapping = create("a", 0, 1), create("b", 2, 3), create("c", 0.5, 2.5)
    assert order_violations([(first, 10), (second, 5)])  # acked before b started, yet later
    assert not order_violations([(first, 10), (overlapping, 5)])
    assert not order_violations([(first, 5), (second, 10), (overlapping, 7)])


def test_the_index_reads_committed_records_only(tmp_path: Path) -> None:
    partition = tmp_path / "node-1" / PARTITION_DIR
    partition.mkdir(parents=True)
    records = [encode_record(TopicRecord("p-t1", ID)),
               encode_record(ConfigRecord(ConfigResourceType.TOPIC, "p-t1", "retention.ms", "5")),
               encode_record(TopicRecord("p-t2", ID))]
    data = b"".join(encode_batch(i, 1, [r], 1000) for i, r in enumerate(records))
    (partition / "00000000000000000000.log").write_bytes(data)
    (partition / "high-watermark").write_text("2\n")  # the last record is not committed
    log = read_node_log(tmp_path / "node-1", 1)
    assert (log.start, log.committed_end, sorted(log.records)) == (0, 2, [0, 1])
    idx = build_index({1: log}, "p-", "retention.ms")
    assert idx.topics == {"p-t1": [(0, ID)]}
    assert idx.configs == {("p-t1", "5"): [1]}


def test_the_schedule_is_a_function_of_the_seed() -> None:
    a = build_schedule(5, 120, [1, 2, 3], [4, 5, 6])
    assert [f.to_json() for f in a] == [f.to_json() for f in build_schedule(5, 120, [1, 2, 3],
                                                                            [4, 5, 6])]
    assert [f.to_json() for f in a] != [f.to_json() for f in build_schedule(6, 120, [1, 2, 3],
                                                                            [4, 5, 6])]
    assert all(0 < f.start_s < f.end_s <= 120 for f in a)
    # Kills and pauses of one named node never overlap (a restart needs the node down).
    named = [f for f in a if f.kind in PROCESS_KINDS and f.targets]
    for f in named:
        for g in named:
            if f is not g and f.targets == g.targets:
                assert f.end_s <= g.start_s or g.end_s <= f.start_s, (f, g)


def test_fault_files_are_the_union_of_active_faults(tmp_path: Path) -> None:
    dirs = {n: tmp_path / str(n) for n in (1, 2, 3)}
    for d in dirs.values():
        d.mkdir()
    files = FaultFiles(dirs)
    cut = Fault(0, "partition", 0, 1, [1], [2, 3])
    other = Fault(1, "partition", 0, 1, [2], [3])
    slow = Fault(2, "slow-fsync", 0, 1, [3], value=250)
    files.add(cut, cut.targets, cut.other_side)
    files.add(other, other.targets, other.other_side)
    files.add(slow, slow.targets, [])
    assert (dirs[3] / "blocked").read_text() == "1,2"
    assert (dirs[3] / "fsync-delay-ms").read_text() == "250"
    files.remove(cut)
    assert (dirs[1] / "blocked").read_text() == ""
    assert (dirs[3] / "blocked").read_text() == "2"
    files.clear()
    assert all((d / "blocked").read_text() == "" and not (d / "disk-full").exists()
               for d in dirs.values())


def _snapshot(partition: Path, end: int, records: list[bytes]) -> None:
    builder = SnapshotBuilder(FileSnapshotStore(str(partition)), OffsetAndEpoch(end, 1), 1000)
    builder.append(records)
    builder.freeze()


def test_a_snapshot_that_differs_from_the_log_fails(tmp_path: Path) -> None:
    partition = tmp_path / "node-1" / PARTITION_DIR
    partition.mkdir(parents=True)
    t1 = encode_record(TopicRecord("p-t1", ID))
    cfg = encode_record(ConfigRecord(ConfigResourceType.TOPIC, "p-t1", "retention.ms", "5"))
    t2 = encode_record(TopicRecord("p-t2", ID))
    data = b"".join(encode_batch(i, 1, [r], 1000) for i, r in enumerate([t1, cfg, t2]))
    (partition / "00000000000000000000.log").write_bytes(data)
    (partition / "high-watermark").write_text("3\n")
    _snapshot(partition, 2, [t1, cfg])
    dirs = {1: tmp_path / "node-1"}
    logs = {1: read_node_log(dirs[1], 1)}
    assert snapshot_check(dirs, logs, logs[1], "p-", "retention.ms").ok
    _snapshot(partition, 3, [t1])  # the newest one lost the config and topic p-t2
    check = snapshot_check(dirs, logs, logs[1], "p-", "retention.ms")
    assert not check.ok and "00000000000000000003" in check.summary
