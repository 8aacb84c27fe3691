"""The campaign's own machinery, without processes: the checks catch a lost (on any one node),
duplicated, phantom or reordered write, an unreadable log, a snapshot or a served view that
differs from the committed log, a campaign below its floors; faults count only once the node
confirms them; the schedule is a function of the seed; fault files compose."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from broker.records import build_batch
from harness.cluster import wait_for
from kraft.log.base import OffsetAndEpoch
from kraft.log.codec import encode_batch
from kraft.log.segmented import LogFaults
from kraft.log.snapshots import FileSnapshotStore, SnapshotBuilder
from kraft.node.faults import FaultInjector, read_faults
from metadata.records import ConfigRecord, ConfigResourceType, TopicRecord, encode_record
from metadata.topics import METADATA_PARTITION_DIR
from tests.chaos.checks import (
    Served,
    check_acked_records,
    check_broker_faults,
    check_data_floor,
    check_floors,
    check_log,
    check_reads,
    check_replicas_agree,
    check_served,
    check_watermarks,
    client_duplicates,
    floors,
    hw_regressions,
    order_violations,
)
from tests.chaos.committed import CommittedIndex, NodeLog, build_index, read_node_log
from tests.chaos.faults import (
    FaultFiles,
    FaultRecord,
    confirm_file_fault,
    process_state,
    read_confirmations,
)
from tests.chaos.partitions import Ack, Read, Watermark, read_replica
from tests.chaos.schedule import KINDS, PROCESS_KINDS, Fault, build_schedule
from tests.chaos.snapshots import to_check as snapshot_check
from tests.chaos.writers import Write

ID = "AAAAAAAAAAAAAAAAAAAAAA"
OTHER_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
KEY = "retention.ms"


def topic(name: str, topic_id: str = ID) -> bytes:
    return encode_record(TopicRecord(name, topic_id))


def config(name: str, value: str | None, key: str = KEY) -> bytes:
    return encode_record(ConfigRecord(ConfigResourceType.TOPIC, name, key, value))


def node_log(node_id: int, records: list[bytes], hw: int | None = None, start: int = 0,
             base: list[bytes] | None = None) -> NodeLog:
    """A node's committed log as read_node_log builds it: `records` from `start`, committed
    below `hw` (all of them by default), on the snapshot `base` when start > 0."""
    end = start + len(records)
    hw = end if hw is None else hw
    log = NodeLog(node_id, start, min(hw, end), hw, base_records=base or [],
                  base_snapshot=f"snapshot-{start}" if start else "")
    for i, data in enumerate(records):
        if start + i < hw:
            log.records[start + i] = (1, data)
    return log


def create(name: str, start: float, end: float, acked: bool = True) -> Write:
    return Write(0, 0, "create", name, "", start, end, acked)


def setting(value: str, start: float, end: float, acked: bool = True) -> Write:
    return Write(0, 1, "config", "p-cfg", value, start, end, acked)


# A faithful history: four acknowledged writes and one with an unknown outcome that landed.
LOG = [topic("p-cfg"), topic("p-a"), config("p-cfg", "7"), topic("p-b"), config("p-cfg", "8"),
       topic("p-c")]
WRITES = [create("p-cfg", 0, 0.5), create("p-a", 1, 2), setting("7", 3, 4),
          create("p-b", 5, 6), setting("8", 7, 8), create("p-c", 9, 10, acked=False)]


def index_of(*logs: NodeLog) -> CommittedIndex:
    return build_index({log.node_id: log for log in logs}, "p-", KEY)


def failed(checks: list) -> set[str]:  # type: ignore[type-arg]
    return {c.name for c in checks if not c.ok}


def problems(checks: list, name: str) -> list[str]:  # type: ignore[type-arg]
    return next(c.details for c in checks if c.name == name)


def test_every_check_passes_on_a_faithful_log_on_every_node() -> None:
    idx = index_of(node_log(1, LOG), node_log(2, LOG), node_log(3, LOG))
    assert failed(check_log(WRITES, idx)) == set()


def test_a_write_missing_on_one_follower_that_has_not_caught_up_fails() -> None:
    # Node 3 (not the leader) stops at offset 3: p-b and the second config are not there.
    idx = index_of(node_log(1, LOG), node_log(2, LOG), node_log(3, LOG, hw=3))
    checks = check_log(WRITES, idx)
    assert failed(checks) == {"acknowledged writes are committed"}
    details = problems(checks, "acknowledged writes are committed")
    assert len(details) == 2 and all("node 3" in d for d in details)
    assert "has not caught up" in details[0] and "offset 3" in details[0]


def test_a_write_missing_inside_one_nodes_committed_log_fails() -> None:
    # Node 2 committed something else at offset 1 where the others hold p-a.
    other = [*LOG[:1], topic("p-zzz"), *LOG[2:]]
    idx = index_of(node_log(1, LOG), node_log(2, other), node_log(3, LOG))
    checks = check_log(WRITES, idx)
    assert failed(checks) == {"acknowledged writes are committed", "nodes agree on committed "
                              "records", "nothing committed that nobody wrote"}
    [lost] = problems(checks, "acknowledged writes are committed")
    assert "create p-a" in lost and "node 2" in lost and "offset 1" in lost


def test_a_write_committed_twice_on_one_node_fails() -> None:
    twice = [*LOG, topic("p-a")]
    idx = index_of(node_log(1, [*LOG, topic("p-x")]), node_log(2, twice))
    checks = check_log([*WRITES, create("p-x", 11, 12, acked=False)], idx)
    assert "no write is committed twice" in failed(checks)
    [dup] = problems(checks, "no write is committed twice")
    assert "node 2" in dup and "[1, 6]" in dup


def test_a_phantom_fails() -> None:
    idx = index_of(node_log(1, [*LOG, topic("p-nobody"), config("p-cfg", "99")]))
    assert failed(check_log(WRITES, idx)) == {"nothing committed that nobody wrote"}


def test_order_is_checked_only_between_writes_that_did_not_overlap() -> None:
    first, second, overlapping = create("a", 0, 1), create("b", 2, 3), create("c", 0.5, 2.5)
    assert order_violations([(first, 10), (second, 5)])  # acked before b started, yet later
    assert not order_violations([(first, 10), (overlapping, 5)])
    assert not order_violations([(first, 5), (second, 10), (overlapping, 7)])


def test_a_log_replaced_by_a_snapshot_is_checked_through_the_snapshot() -> None:
    # Node 3 fetched the snapshot at offset 5 (p-cfg, p-a, p-b, retention.ms=8): the first
    # config value, 7, was overwritten below it; nothing is missing.
    snapshot = [topic("p-cfg"), topic("p-a"), topic("p-b"), config("p-cfg", "8")]
    idx = index_of(node_log(1, LOG), node_log(3, LOG[5:], start=5, base=snapshot))
    assert failed(check_log(WRITES, idx)) == set()
    # The same snapshot without p-a, or with the overwritten value: the write is missing.
    for bad in ([topic("p-cfg"), topic("p-b"), config("p-cfg", "8")],
                [topic("p-cfg"), topic("p-a"), topic("p-b"), config("p-cfg", "7")]):
        idx = index_of(node_log(1, LOG), node_log(3, LOG[5:], start=5, base=bad))
        checks = check_log(WRITES, idx)
        assert "acknowledged writes are committed" in failed(checks)
        assert all("node 3" in d for d in problems(checks, "acknowledged writes are committed"))
    # A snapshot holding p-b while the log above it holds p-b again: committed twice.
    idx = index_of(node_log(1, LOG), node_log(3, LOG[3:], start=3, base=snapshot))
    assert "no write is committed twice" in failed(check_log(WRITES, idx))


def write_segment(partition: Path, base: int, records: list[bytes]) -> Path:
    path = partition / f"{base:020d}.log"
    path.write_bytes(b"".join(encode_batch(base + i, 1, [r], 1000)
                              for i, r in enumerate(records)))
    return path


def test_the_log_is_read_up_to_the_high_watermark_only(tmp_path: Path) -> None:
    partition = tmp_path / "node-1" / METADATA_PARTITION_DIR
    partition.mkdir(parents=True)
    path = write_segment(partition, 0, [topic("p-t1"), config("p-t1", "5"), topic("p-t2")])
    with path.open("ab") as file:
        file.write(b"\x00\x00\x01")  # a torn tail above the HW: what kill -9 leaves
    (partition / "high-watermark").write_text("2\n")  # the last record is not committed
    log = read_node_log(tmp_path / "node-1", 1)
    assert (log.start, log.committed_end, sorted(log.records), log.problems) == (0, 2, [0, 1],
                                                                                 [])
    idx = build_index({1: log}, "p-", KEY)
    assert idx.canonical.topics == {"p-t1": [(0, ID)]}
    assert idx.canonical.configs == {("p-t1", "5"): [1]}


def test_a_log_that_cannot_be_read_below_its_high_watermark_fails(tmp_path: Path) -> None:
    partition = tmp_path / "node-2" / METADATA_PARTITION_DIR
    partition.mkdir(parents=True)
    first = write_segment(partition, 0, LOG[:3])
    write_segment(partition, 3, LOG[3:])
    (partition / "high-watermark").write_text("6\n")
    good = read_node_log(tmp_path / "node-2", 2)
    assert good.problems == [] and good.committed_end == 6
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0xFF  # a flipped bit in the second batch of the first segment
    first.write_bytes(bytes(data))
    bad = read_node_log(tmp_path / "node-2", 2)
    [problem] = bad.problems
    assert str(first) in problem and "offset 1" in problem and "high watermark 6" in problem
    checks = check_log(WRITES, index_of(node_log(1, LOG), bad))
    assert "every node's log is readable up to its high watermark" in failed(checks)
    assert "acknowledged writes are committed" in failed(checks)
    # A missing segment below the HW, and a log that ends short of its HW, fail too.
    first.unlink()
    write_segment(partition, 0, LOG[:2])
    [gap] = read_node_log(tmp_path / "node-2", 2).problems
    assert "jumps from offset 2 to 3" in gap and "00000000000000000003.log" in gap
    (partition / "00000000000000000003.log").unlink()
    [short] = read_node_log(tmp_path / "node-2", 2).problems
    assert "ends at offset 2, below its high watermark 6" in short


def test_a_log_above_zero_needs_the_snapshot_it_starts_at(tmp_path: Path) -> None:
    partition = tmp_path / "node-3" / METADATA_PARTITION_DIR
    partition.mkdir(parents=True)
    write_segment(partition, 5, LOG[5:])
    (partition / "high-watermark").write_text("6\n")
    [problem] = read_node_log(tmp_path / "node-3", 3).problems
    assert "starts at offset 5 but no snapshot ends there" in problem
    _snapshot(partition, 5, LOG[:5])
    log = read_node_log(tmp_path / "node-3", 3)
    assert log.problems == [] and log.start == 5 and log.base_snapshot
    assert failed(check_log(WRITES, index_of(node_log(1, LOG), log))) == set()


def _snapshot(partition: Path, end: int, records: list[bytes]) -> None:
    builder = SnapshotBuilder(FileSnapshotStore(str(partition)), OffsetAndEpoch(end, 1), 1000)
    builder.append(records)
    builder.freeze()


def test_a_snapshot_that_differs_from_the_log_fails(tmp_path: Path) -> None:
    partition = tmp_path / "node-1" / METADATA_PARTITION_DIR
    partition.mkdir(parents=True)
    t1, cfg, t2 = topic("p-t1"), config("p-t1", "5"), topic("p-t2")
    write_segment(partition, 0, [t1, cfg, t2])
    (partition / "high-watermark").write_text("3\n")
    _snapshot(partition, 2, [t1, cfg])
    dirs = {1: tmp_path / "node-1"}
    idx = build_index({1: read_node_log(dirs[1], 1)}, "p-", KEY)
    assert snapshot_check(dirs, idx).ok
    _snapshot(partition, 3, [t1])  # the newest one lost the config and topic p-t2
    check = snapshot_check(dirs, idx)
    assert not check.ok and "00000000000000000003" in check.summary


def served(node_id: int, topics: dict[str, str], configs: dict[tuple[str, str], str | None]
           ) -> Served:
    return Served(node_id, topics, configs, frozenset({"p-cfg"}))


def test_served_metadata_is_compared_both_ways() -> None:
    idx = index_of(node_log(1, LOG), node_log(2, LOG))
    topics = {"p-cfg": ID, "p-a": ID, "p-b": ID, "p-c": ID}
    good = [served(1, topics, {("p-cfg", KEY): "8"}), served(2, topics, {("p-cfg", KEY): "8"})]
    assert check_served(good, WRITES, idx).ok
    bad_views = {
        "an extra config key": {("p-cfg", KEY): "8", ("p-cfg", "cleanup.policy"): "compact"},
        "a config not served": {},
        "an older value": {("p-cfg", KEY): "7"},
    }
    for what, configs in bad_views.items():
        check = check_served([good[0], served(2, topics, configs)], WRITES, idx)
        assert not check.ok and all("node 2" in d for d in check.details), what
    extra_topic = served(2, {**topics, "p-extra": ID}, {("p-cfg", KEY): "8"})
    lost_topic = served(2, {k: v for k, v in topics.items() if k != "p-c"}, {("p-cfg", KEY): "8"})
    other_id = served(2, {**topics, "p-a": OTHER_ID}, {("p-cfg", KEY): "8"})
    for view in (extra_topic, lost_topic, other_id):
        assert not check_served([good[0], view], WRITES, idx).ok, view


def test_a_campaign_below_its_floors_fails() -> None:
    fault_floor, write_floor = floors(300, 2, 4)
    assert (fault_floor, write_floor) == (60, 2400)
    assert failed(check_floors(fault_floor, write_floor, 300, 2, 4)) == set()
    assert failed(check_floors(fault_floor - 1, write_floor, 300, 2, 4)) == {
        "enough faults applied"}
    assert failed(check_floors(fault_floor, write_floor - 1, 300, 2, 4)) == {
        "enough writes acknowledged"}
    assert floors(40, 2, 3) == (8, 240)  # scaled with the duration, lanes and writers


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
    assert files.add(cut, cut.targets, cut.other_side) == {1: 1, 2: 1, 3: 1}
    files.add(other, other.targets, other.other_side)
    files.add(slow, slow.targets, [])
    assert (dirs[3] / "blocked").read_text() == "1,2"
    assert (dirs[3] / "fsync-delay-ms").read_text() == "250"
    assert (dirs[3] / "generation").read_text() == "3"
    files.remove(cut)
    assert (dirs[1] / "blocked").read_text() == ""
    assert (dirs[3] / "blocked").read_text() == "2"
    files.clear()
    assert all((d / "blocked").read_text() == "" and not (d / "disk-full").exists()
               for d in dirs.values())


class _Node:
    """What FaultInjector touches of a RaftNode."""

    def __init__(self) -> None:
        self.transport = SimpleNamespace(blocked=frozenset())
        self.core = SimpleNamespace(wall_clock_offset_ms=0)


def test_a_file_fault_counts_once_the_node_confirms_it(tmp_path: Path) -> None:
    dirs = {n: tmp_path / str(n) for n in (1, 2)}
    for d in dirs.values():
        d.mkdir()
    files = FaultFiles(dirs)
    full = Fault(0, "disk-full", 0, 1, [1])
    record = FaultRecord(full, targets=[1], started_s=0.0)
    record.generations = {n: [g, None] for n, g in files.add(full, [1], []).items()}
    injectors = {n: FaultInjector(str(d), _Node(), LogFaults()) for n, d in dirs.items()}  # type: ignore[arg-type]

    def confirm() -> FaultRecord:
        out = FaultRecord(full, targets=[1], started_s=0.0, generations=record.generations)
        confirm_file_fault(out, files, {n: read_confirmations(d) for n, d in dirs.items()}, 0.0)
        return out

    assert not confirm().applied  # written, not yet confirmed
    injectors[1].apply(read_faults(str(dirs[1])))
    assert injectors[1].log_faults.disk_full
    assert confirm().applied
    # Removed before the node saw it: the node only ever confirms the state without it.
    for node, generation in files.remove(full).items():
        record.generations[node][1] = generation
    (dirs[1] / "applied").unlink()
    injectors[1].apply(read_faults(str(dirs[1])))
    late = confirm()
    assert not late.applied and "never confirmed" in late.unconfirmed
    # A confirmation whose state does not match what was written for its generation (a read
    # that caught the files half-way through a change) does not count.
    entry = {**files.written[1][1], "diskFull": False, "wallTime": 1.0}
    (dirs[1] / "applied").write_text(json.dumps(entry) + "\n" + '{"generation": 1, "di')
    assert not confirm().applied


def test_a_partition_counts_once_one_whole_side_confirms_it(tmp_path: Path) -> None:
    dirs = {n: tmp_path / str(n) for n in (1, 2, 3)}
    for d in dirs.values():
        d.mkdir()
    files = FaultFiles(dirs)
    cut = Fault(0, "partition", 0, 1, [1], [2, 3])
    generations = {n: [g, None] for n, g in files.add(cut, [1], [2, 3]).items()}
    injectors = {n: FaultInjector(str(d), _Node(), LogFaults()) for n, d in dirs.items()}  # type: ignore[arg-type]

    def applied() -> bool:
        record = FaultRecord(cut, targets=[1], other_side=[2, 3], started_s=0.0,
                             generations=generations)
        confirm_file_fault(record, files, {n: read_confirmations(d) for n, d in dirs.items()},
                           0.0)
        return record.applied

    injectors[2].apply(read_faults(str(dirs[2])))
    assert not applied()  # node 3 still talks to node 1
    injectors[3].apply(read_faults(str(dirs[3])))
    assert applied()
    assert injectors[3].node.transport.blocked == frozenset({1})


def test_a_paused_process_shows_as_stopped() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert process_state(child.pid) not in (None, "T")
        child.send_signal(signal.SIGSTOP)
        wait_for(lambda: process_state(child.pid) == "T", 5, "the child stopped", poll_s=0.005)
    finally:
        child.kill()
        child.wait()
    assert process_state(child.pid) is None


# -- the data plane ------------------------------------------------------------------------------


def _replica(tmp_path: Path, broker: int, batches: list[tuple[int, int, list[bytes]]],
             torn: bytes = b"") -> Path:
    """A replica dir of partition 0 on `broker`: (base offset, epoch, values) batches."""
    directory = tmp_path / f"node-{broker}" / "t-0"
    directory.mkdir(parents=True)
    data = b"".join(build_batch(values, base_offset=base, partition_leader_epoch=epoch)
                    for base, epoch, values in batches)
    (directory / f"{0:020d}.log").write_bytes(data + torn)
    return directory


GOOD = [(0, 1, [b"p0-0", b"p0-1"]), (2, 1, [b"p0-2"]), (3, 2, [b"p1-0"])]


def _acks(*items: tuple[int, int, bytes]) -> list[Ack]:
    return [Ack(0, p, o, v, 1.0) for p, o, v in items]


def test_a_replica_is_read_from_its_segment_files(tmp_path: Path) -> None:
    batch = build_batch([b"x"], base_offset=4, partition_leader_epoch=2)
    log = read_replica(_replica(tmp_path, 4, GOOD, torn=batch[:30]), 4, 0)
    assert [(b.base, b.last, b.epoch) for b in log.batches] == [(0, 1, 1), (2, 2, 1), (3, 3, 2)]
    assert log.records == {0: b"p0-0", 1: b"p0-1", 2: b"p0-2", 3: b"p1-0"}
    assert log.end == 4 and not log.problems and "less than a header" in log.torn_tail
    # A flipped byte in a batch that is not the last one is a problem, not a torn tail.
    path = next((tmp_path / "node-4" / "t-0").glob("*.log"))
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF
    path.write_bytes(bytes(data))
    assert "CRC mismatch" in read_replica(path.parent, 4, 0).problems[0]


def _bumped_replica(tmp_path: Path, second_epoch: int) -> Path:
    """Seed 842814's partition 0 in small: producer 1 (id 1000) wrote p1-0..p1-1 in epoch 0
    (the batch its leader wrote just before it was killed), then, after its client bumped the
    epoch, p1-0..p1-1 again as `second_epoch`'s sequence 0, behind producer 0's batch."""
    directory = tmp_path / "node-5" / "t-0"
    directory.mkdir(parents=True)
    batches = [
        build_batch([b"p1-0", b"p1-1"], base_offset=0, partition_leader_epoch=13,
                    producer_id=1000, producer_epoch=0, base_sequence=9362),
        build_batch([b"p0-0"], base_offset=2, partition_leader_epoch=19, producer_id=0,
                    producer_epoch=0, base_sequence=9395),
        build_batch([b"p1-0", b"p1-1", b"p1-2"], base_offset=3, partition_leader_epoch=19,
                    producer_id=1000, producer_epoch=second_epoch,
                    base_sequence=0 if second_epoch else 9364),
    ]
    (directory / f"{0:020d}.log").write_bytes(b"".join(batches))
    return directory


BUMP_LINE = ("ERRSEQ [rdkafka#producer-2] [thrd:127.0.0.1:55535/5]: ProduceRequest for "
             "kdata [0] with 523 message(s) failed due to skipped sequence numbers (PID{Id:1000,"
             "Epoch:0}, base seq 9507 > next seq 9362) caused by previous failed request "
             "(NOT_ENOUGH_REPLICAS, actions Retry,MsgNotPersisted, base seq 9362..9364")


def test_a_record_twice_is_the_clients_only_under_a_later_epoch_it_logged(
        tmp_path: Path) -> None:
    bumped = read_replica(_bumped_replica(tmp_path / "a", 1), 5, 0)
    assert bumped.origins[0] == (1000, 0, 9362) and bumped.origins[3] == (1000, 1, 0)
    replicas = {0: {5: bumped}}
    twice, explained = client_duplicates(replicas, {1: [f"430.5 s: {BUMP_LINE}"]})
    assert twice.ok and sorted(explained) == [b"p1-0", b"p1-1"]
    assert "0@0 (producer id 1000, epoch 0, sequence 9362), 0@3 (producer id 1000, epoch 1, " \
           "sequence 0): producer 1's client bumped its epoch" in explained[b"p1-0"]
    # Checks (a) and (d) leave the client's duplicates to this check.
    acks = [Ack(1, 0, 3, b"p1-0", 482.6), Ack(0, 0, 2, b"p0-0", 482.6)]
    sent = {b"p0-0", b"p1-0", b"p1-1", b"p1-2"}
    assert check_acked_records(acks, {"broker 5": {0: bumped.records}}, {0: 6}, sent,
                               explained).ok
    assert not check_acked_records(acks, {"broker 5": {0: bumped.records}}, {0: 6}, sent).ok
    reads = [Read(0, 0, 0, b"p1-0", 431.0), Read(0, 0, 3, b"p1-0", 483.0)]
    assert check_reads(reads, {0: bumped.records}, {0: 6}, sent, explained).ok
    # Without the client's own line the cause is not shown: the broker may have answered
    # OUT_OF_ORDER_SEQUENCE_NUMBER wrongly (a lost producer state looks the same).
    unexplained, none = client_duplicates(replicas, {1: ["430.5 s: bumped epoch ..."]})
    assert not unexplained.ok and not none
    assert "without the client's 'due to skipped sequence numbers' line" in \
        unexplained.details[0]
    # One epoch twice is the broker's: its deduplication failed, whatever the client logged.
    same = read_replica(_bumped_replica(tmp_path / "b", 0), 5, 0)
    broken, _ = client_duplicates({0: {5: same}}, {1: [BUMP_LINE]})
    assert not broken.ok and "one producer epoch twice" in broken.details[0]


def test_acknowledged_records_must_be_in_every_log_once_at_their_offset() -> None:
    log = {0: {0: b"p0-0", 1: b"p0-1", 2: b"p0-2"}}
    acks = _acks((0, 0, b"p0-0"), (0, 2, b"p0-2"))
    sent = {b"p0-0", b"p0-1", b"p0-2", b"p0-3"}
    name = "data: acknowledged records present exactly once at their offsets"
    assert check_acked_records(acks, {"leader": log, "broker 5": log}, {0: 3}, sent).ok
    # Lost on one replica (another record at its offset), above the HW, moved, duplicated,
    # and a value nobody sent.
    lost = {0: {0: b"p0-0", 1: b"p0-1", 2: b"p0-3"}}
    check = check_acked_records(acks, {"leader": log, "broker 5": lost}, {0: 3}, sent)
    assert check.name == name and not check.ok
    assert check.details == ["broker 5: acknowledged b'p0-2' at 0@2 (at 1.000 s) is lost: the "
                             "offset holds b'p0-3'"]
    assert "above the high watermark 2" in check_acked_records(acks, {"leader": log}, {0: 2},
                                                               sent).details[0]
    moved = check_acked_records(_acks((0, 1, b"p0-0")), {"leader": log}, {0: 3}, sent)
    assert "is at 0@0, its delivery report said 0@1" in moved.details[0]
    # A success reported without an offset (librdkafka's, seen in make test's campaign):
    # present once in its partition passes; absent is lost.
    unplaced = [Ack(0, 0, None, b"p0-2", 1.0)]
    assert check_acked_records(unplaced, {"leader": log}, {0: 3}, sent).ok
    gone = check_acked_records(unplaced, {"leader": {0: {0: b"p0-0"}}}, {0: 3}, sent)
    assert "no offset reported" in gone.details[0] and "lost" in gone.details[0]
    twice = check_acked_records(acks, {"leader": {0: {**log[0], 3: b"p0-1"}}}, {0: 4}, sent)
    assert "b'p0-1' is in the log 2 times" in twice.details[0]
    phantom = check_acked_records([], {"leader": {0: {0: b"zz"}}}, {0: 1}, sent)
    assert "was never produced" in phantom.details[0]


def test_isr_replicas_must_hold_the_same_batches_up_to_the_high_watermark(tmp_path: Path) -> None:
    a = read_replica(_replica(tmp_path / "a", 4, GOOD), 4, 0)
    b = read_replica(_replica(tmp_path / "b", 5, GOOD), 5, 0)
    # A replica that diverged at offset 3 (another epoch's record), one that is short.
    c = read_replica(_replica(tmp_path / "c", 6, [*GOOD[:2], (3, 3, [b"p1-0"])]), 6, 0)
    d = read_replica(_replica(tmp_path / "d", 7, GOOD[:2]), 7, 0)
    name = "data: ISR replicas hold the same batches below the high watermark"
    ok = check_replicas_agree({0: {4: a, 5: b}}, {0: 4}, {0: [4, 5]})
    assert ok.ok and ok.name == name and "3 batch pairs identical" in ok.summary
    # Below the divergence (HW 3) they agree; up to 4 they do not.
    assert check_replicas_agree({0: {4: a, 6: c}}, {0: 3}, {0: [4, 6]}).ok
    bad = check_replicas_agree({0: {4: a, 6: c}}, {0: 4}, {0: [4, 6]})
    assert bad.details == ["partition 0: offsets 3..3 differ between broker 4 (epoch 2, last 3) "
                           "and broker 6 (epoch 3, last 3)"]
    short = check_replicas_agree({0: {4: a, 7: d}}, {0: 4}, {0: [4, 7]})
    assert "broker 7: the log ends at 3, below the high watermark 4" in short.details[0]
    # A replica out of the ISR is not compared; an ISR member without a log fails.
    assert check_replicas_agree({0: {4: a, 5: b, 7: d}}, {0: 4}, {0: [4, 5]}).ok
    assert "has no log directory" in check_replicas_agree({0: {4: a}}, {0: 4},
                                                          {0: [4, 5]}).details[0]


def test_a_replica_comparison_with_nothing_to_compare_fails(tmp_path: Path) -> None:
    """An ISR that is unknown (the describe call answered nothing) or shorter than
    min.insync.replicas compares no batch pair: that fails instead of passing empty."""
    a = read_replica(_replica(tmp_path / "a", 4, GOOD), 4, 0)
    b = read_replica(_replica(tmp_path / "b", 5, GOOD), 5, 0)
    replicas = {0: {4: a, 5: b}}
    assert check_replicas_agree(replicas, {0: 4}, {0: [4, 5]}).ok
    unknown = check_replicas_agree(replicas, {0: 4}, {})
    assert not unknown.ok
    assert unknown.details == ["partition 0: ISR [] after healing, fewer than 2 replicas to "
                               "compare (HW 4)"]
    assert "fewer than 2" in check_replicas_agree(replicas, {0: 4}, {0: [4]}).details[0]
    assert "nothing compared" in check_replicas_agree(replicas, {}, {0: [4, 5]}).details[0]


def test_a_data_campaign_without_a_broker_kill_or_pause_fails() -> None:
    """The fault floor counts faults of any kind; with producers, a broker must also have
    been killed and paused (confirmed), whatever kind of fault did it."""
    brokers = [4, 5, 6]
    both = [("kill-broker", 5), ("pause", 6), ("partition", 1)]
    assert check_broker_faults(both, brokers, KINDS).ok
    assert check_broker_faults([("kill", 4), ("pause-broker", 4)], brokers, KINDS).ok
    no_pause = check_broker_faults([("kill-broker", 5), ("pause", 2), ("kill-leader", 1)],
                                   brokers, KINDS)
    assert not no_pause.ok and no_pause.details == ["no SIGSTOP of a broker was applied"]
    controllers_only = check_broker_faults([("kill", 1), ("pause", 2)] * 30, brokers, KINDS)
    assert controllers_only.details == ["no kill -9 of a broker was applied",
                                        "no SIGSTOP of a broker was applied"]
    # Kinds that cannot kill or pause a broker ask for neither.
    assert check_broker_faults([], brokers, ("partition", "disk-full")).ok
    assert not check_broker_faults([], brokers, ("partition", "kill-broker")).ok


def test_a_high_watermark_that_goes_back_fails() -> None:
    seen = [Watermark(0, 0, 5, 1.0), Watermark(0, 1, 2, 1.1), Watermark(0, 0, 9, 2.0)]
    assert check_watermarks(seen, {0: 9, 1: 2}).ok
    back = [*seen, Watermark(0, 0, 7, 3.0)]
    assert hw_regressions(back) == ["consumer 0, partition 0: high watermark 7 at 3.000 s "
                                    "after 9 at 2.000 s"]
    assert check_watermarks(back, {0: 9, 1: 2}).details == hw_regressions(back)
    # Another consumer's lower HW is not a step back; a HW above the final one always fails.
    assert check_watermarks([*seen, Watermark(1, 0, 7, 3.0)], {0: 9, 1: 2}).ok
    assert "above the 8 after healing" in check_watermarks(seen, {0: 8, 1: 2}).details[0]


def test_a_record_read_must_be_in_the_log_at_its_offset() -> None:
    final = {0: {0: b"p0-0", 1: b"p0-1"}}
    sent = {b"p0-0", b"p0-1", b"p0-2"}
    reads = [Read(0, 0, 0, b"p0-0", 1.0), Read(0, 0, 1, b"p0-1", 1.0),
             Read(0, 0, 0, b"p0-0", 2.0)]  # read again after a restart: fine
    assert check_reads(reads, final, {0: 2}, sent).ok
    bad = check_reads([Read(0, 0, 1, b"p0-2", 1.0), Read(0, 0, 2, b"p0-2", 1.5),
                       Read(0, 0, 0, b"zz", 2.0)], final, {0: 2}, sent)
    assert not bad.ok
    assert "after healing the offset holds b'p0-1'" in bad.details[0]
    assert "at or above the high watermark after healing, 2" in bad.details[1]
    assert "which no producer sent" in bad.details[2]
    assert "b'p0-2' was read at 2 offsets" in bad.details[3]


def test_a_campaign_that_acknowledged_too_few_records_fails() -> None:
    assert check_data_floor(3000, 60, 2).ok
    assert not check_data_floor(2999, 60, 2).ok


def test_broker_faults_target_brokers_only() -> None:
    faults = build_schedule(8, 300, [1, 2, 3], [4, 5, 6])
    broker_faults = [f for f in faults if f.kind in ("kill-broker", "pause-broker")]
    assert broker_faults and all(f.targets[0] in (4, 5, 6) for f in broker_faults)
