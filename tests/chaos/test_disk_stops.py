"""The injector's crash rule, without processes: a broker's exit counts as its designed stop
on a full disk (exit 3, docs/data-plane.md "A failed log directory") only when the campaign
filled that broker's disk during its last run, the run the campaign's own start marker begins,
and that run's log holds the stop line naming the injected fault; any other exit is a crash."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from tests.chaos.faults import FaultFiles, Injector
from tests.chaos.schedule import Fault


class _ExitedCluster:
    """What the Injector touches of a ProcessCluster, with one broker (4) that exited after
    writing `log` to its log file."""

    def __init__(self, tmp_path: Path, code: int, log: str) -> None:
        process = SimpleNamespace(returncode=code)
        self.log_path = tmp_path / "node-4.log"
        self.log_path.write_text(log)
        self.nodes = {4: SimpleNamespace(process=process, alive=False, log_path=self.log_path)}
        self.started: list[int] = []

    def logs(self, node_id: int) -> str:
        return self.log_path.read_text()

    def start(self, node_id: int) -> None:
        self.started.append(node_id)
        self.nodes[node_id].alive = True

    def exit_again(self, code: int, log: str) -> None:
        """The restarted process exits too, after logging `log`."""
        with self.log_path.open("a") as file:
            file.write(log)
        self.nodes[4].process = SimpleNamespace(returncode=code)
        self.nodes[4].alive = False


DISK_STOP = ("CRITICAL [node=4 state=Follower epoch=7] server: stopping: log directory /d "
             "failed (cannot write to /d/t-0: [Errno 28] No space left on device (injected "
             "fault)); the broker stops so that its leaderships move to other replicas\n")


def _injector(tmp_path: Path, cluster: _ExitedCluster, faults: list[Fault]) -> Injector:
    for node in (4, 5):
        (tmp_path / str(node)).mkdir(exist_ok=True)
    files = FaultFiles({node: tmp_path / str(node) for node in (4, 5)})
    return Injector(cluster, [1, 2, 3], files, faults, 0.0, lambda line: None)  # type: ignore[arg-type]


def test_a_broker_stopped_by_its_full_disk_is_restarted_when_the_disk_has_room(
        tmp_path: Path) -> None:
    """A full disk takes a broker's log dir offline and the broker stops (exit 3): the
    design, not a crash. It is started again when the disk-full fault ends, not before."""
    cluster = _ExitedCluster(tmp_path, 3, DISK_STOP)
    injector = _injector(tmp_path, cluster, [Fault(0, "disk-full", 0, 1, [4])])
    record = injector.records[0]
    injector._begin(record)
    injector.check_crashes()
    assert injector.crashes == [] and injector.stopped_by_disk == {4} and cluster.started == []
    injector._end(record)
    assert cluster.started == [4] and injector.stopped_by_disk == set()
    assert injector.disk_stops == 1


def test_a_disk_stop_is_recognised_after_the_fault_ended_and_after_a_long_stop(
        tmp_path: Path) -> None:
    """Seed 408605 counted three designed stops as crashes: the disk-full fault had ended
    before the exit was seen, or the stopping broker logged 40 KB after its stop line."""
    cluster = _ExitedCluster(tmp_path, 3, DISK_STOP + "INFO leading t-1 in epoch 3\n" * 2000)
    injector = _injector(tmp_path, cluster, [Fault(0, "disk-full", 0, 1, [4])])
    injector._begin(injector.records[0])
    injector._end(injector.records[0])  # the fault is over before the exit is seen
    injector.check_crashes()
    assert injector.crashes == [] and injector.disk_stops == 1
    assert cluster.started == [4] and injector.stopped_by_disk == set()


def test_a_disk_stop_line_without_a_disk_full_fault_in_the_run_is_a_crash(
        tmp_path: Path) -> None:
    """The product's own stop line is not evidence: exit 3 with it counts as designed only
    when the campaign filled that node's disk during that run. No fault; a fault on another
    broker; a slow fsync on this one: each a crash."""
    for faults in ([], [Fault(0, "disk-full", 0, 1, [5])],
                   [Fault(0, "slow-fsync", 0, 1, [4], value=100)]):
        cluster = _ExitedCluster(tmp_path, 3, DISK_STOP)
        injector = _injector(tmp_path, cluster, faults)
        for record in injector.records:
            injector._begin(record)
        injector.check_crashes()
        assert [c.exit_code for c in injector.crashes] == [3], faults
        assert injector.disk_stops == 0 and cluster.started == [4]


def test_the_last_run_starts_at_the_campaigns_marker(tmp_path: Path) -> None:
    """A designed stop, the campaign starts the broker again (writing its marker into the
    log), and the new run exits 3 with no stop line of its own: a crash, though the old stop
    line is still in the file and the fault is still recorded. A disk-full fault that ended
    before that restart does not cover the new run either."""
    cluster = _ExitedCluster(tmp_path, 3, DISK_STOP)
    injector = _injector(tmp_path, cluster, [Fault(0, "disk-full", 0, 1, [4])])
    injector._begin(injector.records[0])
    injector.check_crashes()
    injector._end(injector.records[0])  # the disk has room: started again
    assert injector.disk_stops == 1 and cluster.started == [4]
    cluster.exit_again(3, "INFO [node=4 state=Starting epoch=-1] server: loaded 3 logs\n")
    injector.check_crashes()
    assert [c.exit_code for c in injector.crashes] == [3] and injector.disk_stops == 1
    assert DISK_STOP in cluster.logs(4) and "chaos campaign: node started again" in cluster.logs(4)
    cluster.exit_again(3, DISK_STOP)  # its stop line in the third run, no fault since
    injector.check_crashes()
    assert len(injector.crashes) == 2 and injector.disk_stops == 1


def test_any_other_exit_under_a_full_disk_is_a_crash(tmp_path: Path) -> None:
    for code, log in ((3, "stopping: something else"), (1, DISK_STOP),
                      (3, DISK_STOP.replace(" (injected fault)", ""))):
        cluster = _ExitedCluster(tmp_path, code, log)
        injector = _injector(tmp_path, cluster, [Fault(0, "disk-full", 0, 1, [4])])
        injector._begin(injector.records[0])
        injector.check_crashes()
        assert [c.exit_code for c in injector.crashes] == [code] and cluster.started == [4]
