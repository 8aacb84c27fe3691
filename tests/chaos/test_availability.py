"""The availability measure, its bound and the clock-step rule, without processes: windows
count only time with a majority of replicas up and producers sending; a window over the bound
fails the campaign and names its cause from the faults and the nodes' log lines; a clock step
that fences a running broker fails it; every clock step also reaches the active controller;
the injector records when each broker was down."""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import pytest

from tests.chaos import faults as faults_module
from tests.chaos.availability import (
    DataTimes,
    check_availability,
    committed_isrs,
    derive_bound,
    gaps,
    intersect,
    last_isr_down,
    majority_up,
    measure,
    quorum_up,
    subtract,
    union,
)
from tests.chaos.campaign import CLUSTER_CONFIG
from tests.chaos.causes import CLIENT_STEP, RESTART_STEP, attribute
from tests.chaos.clock_steps import check_clock_steps
from tests.chaos.data_phase import campaign_timeouts
from tests.chaos.faults import FaultFiles, FaultRecord, Injector, Outage
from tests.chaos.node_events import NodeEvent, line_time, parse_line, read_events
from tests.chaos.report import availability_lines
from tests.chaos.schedule import Fault
from tests.chaos.test_disk_stops import DISK_STOP, _ExitedCluster

WALL_T0 = time.mktime((2026, 11, 29, 7, 0, 0, 0, 0, -1))
TOPIC = "kdata9"


def _stamp(at_s: float) -> str:
    """A log line's timestamp for campaign time `at_s` (server/logging_setup.py's format)."""
    wall = WALL_T0 + at_s
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall)) + \
        f",{round((wall % 1) * 1000):03d}"


def _record(index: int, kind: str, targets: list[int], start: float, end: float,
            value: int = 0, active: int | None = None) -> FaultRecord:
    record = FaultRecord(Fault(index, kind, start, end, list(targets), value=value),
                         targets=list(targets), started_s=start, ended_s=end,
                         confirmed_s=start, active_controller=active)
    return record


def test_spans() -> None:
    assert union([(3, 4), (0, 1), (0.5, 2), (5, 5)]) == [(0, 2), (3, 4)]
    assert intersect([(0, 2), (3, 6)], [(1, 4)]) == [(1, 2), (3, 4)]
    assert measure([(0, 2), (3, 6)], 1, 4) == 2


def test_a_majority_is_up_unless_two_of_three_replicas_are_down() -> None:
    outages = [Outage(4, 10, 20, "killed"), Outage(5, 15, 18, "paused"),
               Outage(7, 0, 100, "killed"),  # not a replica
               Outage(6, 30, None, "stopped by its full disk")]  # until the end
    assert majority_up([4, 5, 6], outages, 0, 40) == [(0, 15), (18, 40)]
    assert majority_up([4, 5, 6], [*outages, Outage(4, 35, None, "killed")], 0, 40) == [
        (0, 15), (18, 35)]


def test_windows_run_from_ack_to_ack_within_the_producers_time() -> None:
    assert gaps([0.2, 1, 2, 10, 13], [(0.5, 12)]) == [
        (0.5, 1, True), (1, 2, True), (2, 10, True), (10, 13, True)]
    assert gaps([1], [(0.5, 12)]) == [(0.5, 1, True), (1, 12, False)]
    assert gaps([], []) == []


def _data(acks: list[float]) -> DataTimes:
    return DataTimes(TOPIC, {0: [4, 5, 6]}, {0: acks}, [(0.0, 60.0)])


def test_a_window_over_the_bound_fails_with_its_cause() -> None:
    """Broker 4 leads and is paused at 20 s; the controller fences it at 23.3, broker 5 leads
    at 23.5, the pause ends at 24 and the client's next ack comes at 34: 14.1 s without an ack,
    10 of them after the last step — the client's."""
    acks = [i * 0.1 for i in range(200)] + [34.0 + i * 0.1 for i in range(300)]
    pause = _record(3, "pause-broker", [4], 20.0, 24.0)
    events = [NodeEvent(23.3, 1, "fence", "4", "fencing broker 4: no heartbeat for 3000 ms"),
              NodeEvent(23.5, 5, "leader", f"{TOPIC}-0", f"leading {TOPIC}-0 in epoch 2"),
              NodeEvent(23.6, 6, "leader", f"{TOPIC}-1", "another partition")]
    outages = [Outage(4, 20.0, 24.0, "paused")]
    check, report = check_availability(_data(acks), outages, [pause], events, 12.5, ["terms"])
    assert not check.ok
    assert "partition 0: 14.10 s" in check.details[0] and "> bound 12.5 s" in check.details[0]
    assert f"cause: {CLIENT_STEP} (10.0 s of 14.1 s)" in check.details[0]
    assert "#3 pause-broker [4] 20.00-24.00 s" in check.details[0]
    windows = report["windows"]
    assert isinstance(windows, list) and len(windows) == 1
    window = windows[0]
    assert window["steps"] == [[CLIENT_STEP, 10.0], ["fencing", 3.3],
                               ["fault in effect: pause-broker", 0.5],
                               ["partition leader election", 0.2], ["before any node step", 0.1]]
    assert len(window["timeline"]) == 4  # the pause's start and end, the fencing, the election
    # The same outage under the bound passes, and lists the window.
    check, report = check_availability(_data(acks), outages, [pause], events, 15.0, [])
    assert check.ok and report["windowsListed"] == 1


def test_time_without_a_majority_does_not_count() -> None:
    """Brokers 4 and 5 both down 21-30 s of the 13.1 s without an ack: 4.1 s count."""
    acks = [i * 0.1 for i in range(190)] + [32.0 + i * 0.1 for i in range(300)]
    outages = [Outage(4, 20.0, 30.0, "killed"), Outage(5, 21.0, 30.0, "paused")]
    check, report = check_availability(_data(acks), outages, [], [], 5.0, [])
    assert check.ok, check.summary
    rows = report["partitions"]
    assert isinstance(rows, list) and len(rows) == 1
    row = rows[0]
    assert row["longestS"] == pytest.approx(4.1)
    # Counted as up, the same window fails.
    assert not check_availability(_data(acks), [], [], [], 5.0, [])[0].ok


def test_time_without_a_controller_majority_does_not_count() -> None:
    """Seed 280946: the active controller isolated, the next one isolated, the third killed,
    then a full disk beside an isolation: no majority of controllers could elect or commit,
    so no ISR change or election could end the window. 13.1 s without an ack; controller 1
    killed 19-30 s and a cut leaving controller 2 alone 20-30 s: 10 s without a quorum, 3.1 s
    count. A full disk on a broker is not a controller's."""
    acks = [i * 0.1 for i in range(190)] + [32.0 + i * 0.1 for i in range(300)]
    cut = _record(1, "partition", [1, 3], 20.0, 30.0)
    cut.other_side = [2, 4, 5, 6]
    faults = [cut, _record(2, "disk-full", [4], 19.0, 31.0)]
    controller_outages = [Outage(1, 19.0, 30.0, "killed")]
    check, report = check_availability(_data(acks), [], faults, [], 5.0, [], [1, 2, 3],
                                       controller_outages)
    assert check.ok, check.summary
    [row] = report["partitions"]  # type: ignore[misc]
    assert row["longestS"] == pytest.approx(3.1) and row["noControllerQuorumS"] == 10.0
    assert quorum_up([1, 2, 3], controller_outages, faults, 0.0, 62.0) == \
        [(0.0, 20.0), (30.0, 62.0)]
    # A full disk on controller 3 with 1 killed: no quorum either (19-30 s).
    stalled = [_record(3, "disk-full", [3], 15.0, 40.0)]
    assert quorum_up([1, 2, 3], controller_outages, stalled, 0.0, 62.0) == \
        [(0.0, 19.0), (30.0, 62.0)]
    # Without the controllers, the same window fails.
    assert not check_availability(_data(acks), [], faults, [], 5.0, [])[0].ok


def test_a_partition_never_acknowledged_fails() -> None:
    check, _ = check_availability(_data([]), [], [], [], 100.0, [])
    assert not check.ok and "no acknowledgement at all" in check.summary
    assert not check_availability(DataTimes(TOPIC, {}, {}, []), [], [], [], 1, [])[0].ok


def _steps(a: float, b: float, events: list[NodeEvent], outages: list[Outage],
           faults: list[FaultRecord]) -> dict[str, float]:
    _, steps, _ = attribute(a, b, True, f"{TOPIC}-0", [4, 5, 6], events, outages, faults)
    return {name: round(seconds, 3) for name, seconds in steps}


def test_a_window_ended_by_a_restarted_broker_rejoining_is_its_restart() -> None:
    """Seed 1, 40 s: broker 6 killed at 15.26 s while broker 5, restarted, was still loading
    its logs (ISR [4]); 6 is started again at 17.95, its logs load by 22.54, it registers and
    rejoins the ISR. A controller election meanwhile does not slow the log loading."""
    events = [NodeEvent(15.82, 1, "fence", "6", "fencing broker 6: its liveness stream broke"),
              NodeEvent(17.95, 6, "restart", "6", "started again"),
              NodeEvent(20.0, 6, "up", "6", "first log line"),
              NodeEvent(21.11, 5, "loaded", "5", "loaded 74 partition log(s)"),
              NodeEvent(21.39, 2, "controller", "2", "active controller for epoch 2"),
              NodeEvent(22.54, 6, "loaded", "6", "loaded 93 partition log(s)"),
              NodeEvent(22.70, 6, "registered", "6", "registered broker 6 with epoch 1037"),
              NodeEvent(23.05, 4, "isr", f"{TOPIC}-0", f"ISR of {TOPIC}-0 is now [6, 4] (p)")]
    kill = _record(7, "kill-broker", [6], 15.26, 17.95)
    steps = _steps(15.35, 23.22, events, [Outage(6, 15.26, 17.95, "killed")], [kill])
    assert steps == {RESTART_STEP: 2.05, "restart: log loading": 2.54,
                     "broker 6 out (kill-broker)": 2.6,
                     "ISR change: broker 6 caught up": 0.35, CLIENT_STEP: 0.17,
                     "restart: registration": 0.16}


def test_a_window_ended_by_a_new_leader_is_its_fencing_and_election() -> None:
    events = [NodeEvent(21.0, 2, "controller", "2", "active controller for epoch 3"),
              NodeEvent(24.3, 2, "fence", "4", "fencing broker 4: no heartbeat for 3000 ms"),
              NodeEvent(24.5, 5, "leader", f"{TOPIC}-0", f"leading {TOPIC}-0 in epoch 2 from "
                        "offset 9 (ISR [5, 6])")]
    outages = [Outage(4, 20.0, 25.0, "paused")]
    pause = _record(3, "pause-broker", [4], 20.0, 25.0)
    # The fencing waited for a controller until 21.0 (the old one was killed meanwhile).
    assert _steps(19.9, 26.0, events, outages, [pause]) == {
        CLIENT_STEP: 1.0, "fault in effect: pause-broker": 0.5, "partition leader election": 0.2,
        "fencing": 3.3, "controller election": 1.0, "before any node step": 0.1}


def test_a_window_ended_by_an_isr_shrink_is_the_replica_lag() -> None:
    events = [NodeEvent(34.5, 4, "isr", f"{TOPIC}-0", f"shrinking the ISR of {TOPIC}-0 from "
                        "[4, 5, 6] to [4, 5]: replica(s) [6] not caught up"),
              NodeEvent(34.6, 4, "isr", f"{TOPIC}-0", f"ISR of {TOPIC}-0 is now [4, 5] (p)")]
    outages = [Outage(6, 30.0, 33.0, "paused")]
    assert _steps(29.5, 35.0, events, outages, []) == {
        CLIENT_STEP: 0.4, "ISR change": 0.1, "ISR shrink (replica lag)": 4.5,
        "before any node step": 0.5}


def test_a_window_without_a_partition_change_is_told_in_order() -> None:
    kill = _record(1, "kill-broker", [4], 10.5, 12.0)
    events = [NodeEvent(11.0, 1, "fence", "4", "fencing broker 4"),
              NodeEvent(12.5, 4, "restart", "4", "started again"),
              NodeEvent(13.0, 1, "controller", "9", "active controller for epoch 9"),
              NodeEvent(16.0, 5, "fence", "7", "fencing broker 7")]  # not a replica
    faults, steps, timeline = attribute(10.0, 18.0, True, f"{TOPIC}-0", [4, 5, 6], events, [],
                                        [kill])
    assert dict(steps) == {"fencing": 1.0, "fault in effect: kill-broker": 1.0,
                           "restart issued": 0.5, "controller election": 0.5, CLIENT_STEP: 5.0}
    assert faults == ["#1 kill-broker [4] 10.50-12.00 s"] and len(timeline) == 5


def test_the_bound_is_the_sum_of_its_stages_from_the_settings() -> None:
    timeouts = campaign_timeouts(CLUSTER_CONFIG)
    bound, terms = derive_bound(timeouts)
    # recover max(restart 10, detect max(5, 9 + 2, 1.5 x 3, 0.5)) + controller 2 + 2 x 1
    # + propagate 0.5 + client 2 + 1
    assert bound == pytest.approx(18.5)
    assert len(terms) == 4 and "session 9 + heartbeat 2 s" in terms[0]
    # With 3-s sessions the longest fault (5 s) detects, and a shorter restart leaves it.
    short = replace(timeouts, restart_s=4.0, session_timeout_s=3.0, heartbeat_interval_s=0.3)
    assert derive_bound(short)[0] == pytest.approx(12.5)
    slower = {**CLUSTER_CONFIG, "broker.session.timeout.ms": "15000"}
    assert derive_bound(campaign_timeouts(slower))[0] == pytest.approx(15 + 2 + 4 + 0.5 + 3)


def test_node_log_lines_become_timed_events(tmp_path: Path) -> None:
    head = "INFO [node=1 state=Leader epoch=4] metadata.controller: "
    lines = {
        "fence": f"{_stamp(12.25)} {head}fencing broker 5: no heartbeat for 3000 ms",
        "controller": f"{_stamp(3.0)} {head}active controller for epoch 4 from offset 77",
        "leader": f"{_stamp(13.0)} INFO [node=6 state=Follower epoch=4] broker.replica.manager: "
                  f"leading {TOPIC}-2 in epoch 3 from offset 40 (ISR [6, 4])",
        "isr": f"{_stamp(14.0)} INFO [node=6 state=Follower epoch=4] broker.replica.manager: "
               f"shrinking the ISR of {TOPIC}-2 from [6, 4, 5] to [6, 4]: replica(s) [5] not",
        "loaded": f"{_stamp(9.5)} INFO [node=5 state=Starting epoch=-1] broker.log.log_loader: "
                  "loaded 3 partition log(s) from /d (unclean shutdown)",
        "registered": f"{_stamp(10.0)} INFO [node=5 state=Follower epoch=4] broker.lifecycle: "
                      "registered broker 5 with epoch 991 (incarnation x)",
    }
    assert line_time(lines["fence"], WALL_T0) == pytest.approx(12.25)
    for kind, line in lines.items():
        event = parse_line(line, 1, WALL_T0)
        assert event is not None and event.kind == kind, line
    assert parse_line(lines["leader"], 6, WALL_T0).subject == f"{TOPIC}-2"  # type: ignore[union-attr]
    assert parse_line(lines["fence"], 1, WALL_T0).subject == "5"  # type: ignore[union-attr]
    assert parse_line(f"{_stamp(1)} INFO [x] y: something else", 1, WALL_T0) is None
    mark = "=== chaos campaign: node started again (run 3 of the campaign, node 5, at 8.125 s)"
    assert parse_line(mark, 5, WALL_T0) == NodeEvent(8.125, 5, "restart", "5", "started again")
    log = tmp_path / "node-1.log"
    log.write_text("\n".join([lines["controller"], "Traceback", mark, "Traceback",
                              lines["fence"], lines["leader"]]) + "\n")
    events = read_events({1: log, 2: tmp_path / "absent"}, WALL_T0)
    assert [(e.kind, e.at_s) for e in events] == [
        ("controller", 3.0), ("restart", 8.125), ("up", 12.25), ("fence", 12.25),
        ("leader", 13.0)]


def _fence(at: float, broker: int, controller: int = 1) -> NodeEvent:
    return NodeEvent(at, controller, "fence", str(broker), f"fencing broker {broker}: no "
                     "heartbeat for 3000 ms")


def test_a_clock_step_that_fences_a_running_broker_fails() -> None:
    step = _record(2, "clock-jump", [5, 1], 20.0, 24.0, value=3_600_000, active=1)
    ok, report = check_clock_steps([step], [], [_fence(5.0, 4)], 3.0, 0.3, 1)
    assert ok.ok and report["fencingsDuringSteps"] == 0 and report["onActiveController"] == 1
    for at in (20.5, 27.0):  # during the step, or just after it ended (a step back)
        check, _ = check_clock_steps([step], [], [_fence(at, 6)], 3.0, 0.3, 1)
        assert not check.ok and "fenced running broker 6" in check.summary, at
    # By another controller, of a broker the step did not reach: not in the step's window.
    assert check_clock_steps([step], [], [_fence(21.0, 6, controller=2)], 3.0, 0.3, 1)[0].ok


def test_a_fencing_explained_by_a_down_broker_or_controller_passes() -> None:
    step = _record(2, "clock-jump", [1], 20.0, 24.0, value=-60_000, active=1)
    for outage in (Outage(6, 15.0, 18.0, "paused"), Outage(6, 19.0, None, "killed"),
                   Outage(1, 16.0, 17.0, "paused")):
        check, _ = check_clock_steps([step], [outage], [_fence(21.0, 6)], 3.0, 0.3, 1)
        assert check.ok, outage
    check, _ = check_clock_steps([step], [Outage(6, 5.0, 9.0, "killed")], [_fence(21.0, 6)],
                                 3.0, 0.3, 1)
    assert not check.ok  # down long before: no excuse
    # The controller became active 3.1 s before: sessions restarted, the broker had not found it.
    active = NodeEvent(17.9, 1, "controller", "35", "active controller for epoch 35")
    assert check_clock_steps([step], [], [active, _fence(21.0, 6)], 3.0, 0.3, 1)[0].ok
    elsewhere = NodeEvent(17.9, 2, "controller", "35", "active controller for epoch 35")
    assert not check_clock_steps([step], [], [elsewhere, _fence(21.0, 6)], 3.0, 0.3, 1)[0].ok


def test_a_fencing_across_a_network_partition_passes() -> None:
    """Controller 2 cut off alone fences the brokers it no longer hears (seed 1, with two test
    files at a time): the partition explains it, not the clock step on 2."""
    step = _record(12, "clock-jump", [5, 2], 27.8, 32.6, value=-6_466_388, active=2)
    cut = _record(13, "partition", [2], 28.4, 32.4)
    cut.other_side = [1, 3, 4, 5, 6]
    fence = _fence(31.7, 6, controller=2)
    assert check_clock_steps([step, cut], [], [fence], 3.0, 0.3, 1)[0].ok
    # The same partition with both on one side explains nothing.
    same_side = _record(13, "partition", [2, 6], 28.4, 32.4)
    same_side.other_side = [1, 3, 4, 5]
    assert not check_clock_steps([step, same_side], [], [fence], 3.0, 0.3, 1)[0].ok
    # Nor one that had healed long before.
    healed = _record(13, "partition", [2], 10.0, 12.0)
    healed.other_side = [1, 3, 4, 5, 6]
    assert not check_clock_steps([step, healed], [], [fence], 3.0, 0.3, 1)[0].ok


def test_clock_steps_that_never_reach_the_active_controller_fail() -> None:
    step = _record(2, "clock-jump", [5], 20.0, 24.0, value=60_000)
    check, _ = check_clock_steps([step], [], [], 3.0, 0.3, 1)
    assert not check.ok and "reached the active controller" in check.summary
    assert check_clock_steps([], [], [], 3.0, 0.3, 0)[0].ok  # none scheduled


def test_every_clock_step_also_reaches_the_active_controller(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = _ExitedCluster(tmp_path, 0, "")
    dirs = {n: tmp_path / f"f{n}" for n in (1, 4, 5)}
    for d in dirs.values():
        d.mkdir()
    leader: list[int | None] = [1]
    monkeypatch.setattr(faults_module, "find_leader", lambda cluster, controllers: leader[0])
    injector = Injector(cluster, [1, 2, 3], FaultFiles(dirs),  # type: ignore[arg-type]
                        [Fault(0, "clock-jump", 0, 1, [5], value=60_000),
                         Fault(1, "clock-jump", 2, 3, [1], value=-60_000),
                         Fault(2, "clock-jump", 4, 5, [4], value=60_000)], 0.0, lambda _: None)
    first, second, third = injector.records
    injector._begin(first)
    injector._begin(second)
    assert first.targets == [5, 1] and first.active_controller == 1
    assert second.targets == [1] and second.active_controller == 1
    assert (dirs[1] / "clock-offset-ms").read_text() == "0"  # +1 min and -1 min
    assert (dirs[5] / "clock-offset-ms").read_text() == "60000"
    leader[0] = None  # an election in progress: the drawn node alone
    injector._begin(third)
    assert third.targets == [4] and third.active_controller is None


def test_the_injector_records_when_a_broker_was_down(tmp_path: Path) -> None:
    """A disk stop is down from its stop line's time (not from when the campaign saw the
    exit) until the campaign starts the broker again."""
    stamped = f"{_stamp(0.0)} {DISK_STOP}"
    cluster = _ExitedCluster(tmp_path, 3, "INFO before\n" + stamped)
    for node in (4, 5):
        (tmp_path / str(node)).mkdir()
    files = FaultFiles({node: tmp_path / str(node) for node in (4, 5)})
    injector = Injector(cluster, [1, 2, 3], files,  # type: ignore[arg-type]
                        [Fault(0, "disk-full", 0, 1, [4])], time.monotonic(), lambda _: None)
    injector.wall_t0 = WALL_T0 - 0.0  # the stop line is at campaign time 0
    record = injector.records[0]
    injector._begin(record)
    injector.check_crashes()
    [outage] = injector.outages
    assert outage.why == "stopped by its full disk" and outage.end_s is None
    assert outage.start_s == pytest.approx(0.0)
    injector._end(record)  # the disk has room: started again
    assert outage.end_s is not None and outage.end_s >= 0.0


def test_a_long_timeline_keeps_its_start_and_its_end() -> None:
    events = [NodeEvent(10.0 + i / 10, 1, "fence", "4", f"fencing broker 4 ({i})")
              for i in range(40)]
    _, _, timeline = attribute(10.0, 20.0, True, f"{TOPIC}-0", [4, 5, 6], events, [], [])
    assert len(timeline) == 25 and "(1)" in timeline[0] and "(39)" in timeline[-1]
    assert timeline[8] == "... 15 more ..."  # 39 in the window (the one at its start is not)


def test_steps_after_the_partitions_last_change_are_told_in_order() -> None:
    """Seed 418577: broker 4 leads from 37.87 s with the ISR [4, 5]; 5 is killed and fenced,
    started again, and only its registration at 60.22 lets the window end: not the client's."""
    events = [NodeEvent(37.87, 4, "leader", f"{TOPIC}-0", f"leading {TOPIC}-0 in epoch 1 from "
                        "offset 1921 (ISR [4, 5])"),
              NodeEvent(38.17, 1, "fence", "5", "fencing broker 5: its liveness stream broke"),
              NodeEvent(40.26, 5, "restart", "5", "started again"),
              NodeEvent(58.46, 5, "up", "5", "first log line"),
              NodeEvent(59.92, 5, "loaded", "5", "loaded 115 partition log(s)"),
              NodeEvent(60.22, 5, "registered", "5", "registered broker 5 with epoch 1720")]
    kill = _record(14, "kill-broker", [5], 37.56, 40.27)
    assert _steps(32.955, 61.0, events, [Outage(5, 37.56, 40.26, "killed")], [kill]) == {
        "fault in effect: kill-broker": 4.925, "fencing": 0.3, "restart issued": 2.09,
        RESTART_STEP: 18.19, "restart: log loading": 1.46,
        "restart: registration": 0.3, CLIENT_STEP: 0.78}


def _isr(at: float, isr: str, node: int = 4, p: int = 0) -> NodeEvent:
    return NodeEvent(at, node, "isr", f"{TOPIC}-{p}",
                     f"ISR of {TOPIC}-{p} is now {isr} (partition epoch 7)")


def test_time_waiting_for_the_last_in_sync_replica_does_not_count() -> None:
    """Seed 418577's shape: the ISR shrinks to [4] at 10 s, broker 4 is killed at 20 s and
    started again at 40 s; 5 and 6 (a majority) are up, but with unclean election off only 4
    may lead: the 20 s it was down are the design, reported apart; its restart counts."""
    acks = [i * 0.1 for i in range(200)] + [52.0 + i * 0.1 for i in range(50)]
    outages = [Outage(4, 20.0, 40.0, "killed")]
    events = [_isr(10.0, "[4]")]
    check, report = check_availability(_data(acks), outages, [], events, 17.5, [])
    assert check.ok, check.summary
    rows = report["partitions"]
    assert isinstance(rows, list) and len(rows) == 1
    row = rows[0]
    assert row["longestS"] == pytest.approx(12.1)
    assert row["waitingForLastIsrS"] == pytest.approx(20.0)
    assert row["longest"]["waitingForLastIsrS"] == pytest.approx(20.0)
    assert "20.0 s waiting for the last in-sync replica" in check.summary
    # The same kill with the ISR still [4, 5] (5 could lead), or only proposed to shrink, or a
    # stale leader's view of an older epoch: every second counts, and it fails.
    proposed = NodeEvent(10.0, 4, "isr", f"{TOPIC}-0", f"shrinking the ISR of {TOPIC}-0 from "
                         "[4, 5] to [4]: replica(s) [5] not caught up")
    stale = NodeEvent(15.0, 4, "leader", f"{TOPIC}-0", f"leading {TOPIC}-0 in epoch 2 from "
                      "offset 5 (ISR [4])")
    newer = NodeEvent(12.0, 5, "leader", f"{TOPIC}-0", f"leading {TOPIC}-0 in epoch 3 from "
                      "offset 9 (ISR [5, 4])")
    for other in ([_isr(10.0, "[4, 5]")], [proposed], [newer, stale]):
        check, report = check_availability(_data(acks), outages, [], other, 17.5, [])
        assert not check.ok, other
        assert report["partitions"][0]["longestS"] == pytest.approx(32.1)  # type: ignore[index]


def test_committed_isrs_and_the_spans_without_a_member_up() -> None:
    events = [_isr(5.0, "[4, 5]"), _isr(6.0, "[6]", p=1),
              NodeEvent(8.0, 5, "leader", f"{TOPIC}-0", f"leading {TOPIC}-0 in epoch 4 from "
                        "offset 3 (ISR [5])")]
    isrs = committed_isrs(f"{TOPIC}-0", events)
    assert isrs == [(5.0, [4, 5]), (8.0, [5])]
    outages = [Outage(5, 9.0, 12.0, "paused"), Outage(4, 1.0, 20.0, "killed"),
               Outage(5, 15.0, None, "killed")]
    # Before 5 s the full ISR (6 up); [4, 5] both down from 9 s... but [5] from 8 s.
    assert last_isr_down([4, 5, 6], isrs, outages, 0.0, 30.0) == [(9.0, 12.0), (15.0, 30.0)]
    assert subtract([(0, 10), (12, 20)], [(2, 3), (9, 13), (19, 25)]) == [
        (0, 2), (3, 9), (13, 19)]


def test_without_a_bound_windows_are_reported_and_nothing_fails_on_them() -> None:
    acks = [i * 0.1 for i in range(200)] + [80.0]
    check, report = check_availability(_data(acks), [], [], [], None, ["not applicable"])
    assert check.ok and "bound not applicable" in check.summary
    assert report["boundS"] is None
    lines = availability_lines(report)
    assert lines[0].startswith("availability: bound not applicable")
    assert not any("OVER THE BOUND" in line for line in lines)
    assert not check_availability(_data([]), [], [], [], None, [])[0].ok  # never acknowledged
