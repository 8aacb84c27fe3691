"""The fault model's rule for brokers, without processes: one fault, one recovery. A fault
that would take down a broker still recovering from its previous one (not running, not
registered again since its restart, or fenced) is skipped with the reason; once the broker is
back in service, or with `--refault-recovering`, it goes ahead."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.chaos import faults as faults_module
from tests.chaos.faults import Injector
from tests.chaos.schedule import Fault
from tests.chaos.service import Service
from tests.chaos.test_disk_stops import DISK_STOP, _ExitedCluster, _injector

REGISTERED = "INFO [node=4] broker.lifecycle: registered broker 4 with epoch 77 (incarnation x)\n"


def _stopped_then_due_again(tmp_path: Path, refault: bool = False) -> tuple[Injector,
                                                                               _ExitedCluster]:
    """Broker 4's disk filled (#0): it stops (exit 3) and is started again when #0 ends; then
    #1, another full disk of 4, comes due."""
    cluster = _ExitedCluster(tmp_path, 3, DISK_STOP)
    injector = _injector(tmp_path, cluster, [Fault(0, "disk-full", 0, 1, [4]),
                                             Fault(1, "disk-full", 2, 3, [4])])
    injector.refault_recovering = refault
    first = injector.records[0]
    injector._begin(first)
    injector.check_crashes()
    assert injector.stopped_by_disk == {4}
    injector._end(first)
    assert cluster.started == [4] and cluster.nodes[4].alive
    return injector, cluster


def test_a_broker_is_not_taken_down_again_before_it_is_back_in_service(
        tmp_path: Path) -> None:
    injector, cluster = _stopped_then_due_again(tmp_path)
    unfenced: set[int] = set()
    injector.service.unfenced = lambda: unfenced
    second = injector.records[1]
    injector._begin(second)
    assert second.started_s is None
    assert second.skipped == "broker 4 not back in service after #0 disk-full: started again, " \
                             "not registered yet"
    with cluster.log_path.open("a") as file:  # the new run registers, still fenced
        file.write(REGISTERED)
    second.skipped = ""
    injector._begin(second)
    assert second.skipped.endswith(": fenced") and second.started_s is None
    unfenced.add(4)  # the active controller lists it unfenced: back in service
    second.skipped = ""
    injector._begin(second)
    assert not second.skipped and second.started_s is not None
    assert (tmp_path / "4" / "disk-full").exists()


def test_refault_recovering_takes_a_recovering_broker_down_again(tmp_path: Path) -> None:
    injector, _ = _stopped_then_due_again(tmp_path, refault=True)
    injector.service.unfenced = lambda: set()
    second = injector.records[1]
    injector._begin(second)
    assert not second.skipped and second.started_s is not None


def test_a_registration_before_the_fault_does_not_count(tmp_path: Path) -> None:
    """The old run's registration line is no proof the new run registered; a paused broker
    (never restarted) needs only to run unfenced; a fault still in effect holds it."""
    log = tmp_path / "node-4.log"
    log.write_text(REGISTERED)
    unfenced = {4}
    service = Service({4: log}, lambda: unfenced)
    service.faulted(4, 3, "kill-broker", 10.0)
    assert service.not_back(4, False, None) == \
        "broker 4 not back in service after #3 kill-broker: the fault is still in effect"
    service.fault_ended(4, 3)
    assert service.not_back(4, False, None) is not None and "not running" in str(
        service.not_back(4, False, None))
    assert "not registered yet" in str(service.not_back(4, True, 12.0))
    service.faulted(4, 5, "pause-broker", 20.0)
    service.fault_ended(4, 5)
    assert service.not_back(4, True, 12.0) is None  # continued, unfenced: back
    assert 4 not in service.recovering
    assert service.not_back(4, True, 12.0) is None


def test_the_controller_is_asked_again_through_an_election(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No leader, then a deposed one refusing, then an answer: the broker's state is known
    (not "no active controller answered", which would skip the fault)."""
    cluster = _ExitedCluster(tmp_path, 0, "")
    cluster.nodes[4].endpoint = "127.0.0.1:1"
    injector = _injector(tmp_path, cluster, [])
    leaders = iter([None, 4, 4])
    answers: list[object] = [AssertionError("not the active controller"), {4, 5}]

    def listed(endpoint: str) -> set[int]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        assert isinstance(answer, set)
        return answer

    monkeypatch.setattr(faults_module, "find_leader", lambda cluster, controllers: next(leaders))
    monkeypatch.setattr(faults_module, "unfenced_brokers", listed)
    assert injector._unfenced() == {4, 5}
    monkeypatch.setattr(faults_module, "find_leader", lambda cluster, controllers: None)
    monkeypatch.setattr(faults_module, "LEADER_WAIT_S", 0.1)
    assert injector._unfenced() is None


def test_a_controller_is_back_once_it_follows_or_leads_the_quorum(tmp_path: Path) -> None:
    """Controller 2 killed (#4): a kill of it is skipped until its new process answers as a
    follower (or the leader); a full disk does not take a controller down, so it is never
    held back."""
    states: dict[int, str | None] = {2: None}
    service = Service({4: tmp_path / "node-4.log"}, lambda: {4}, states.get)
    assert service.takes_down(2, "kill") and not service.takes_down(2, "disk-full")
    assert service.takes_down(4, "disk-full")
    service.faulted(2, 4, "kill-leader", 10.0)
    service.fault_ended(2, 4)
    assert service.not_back(2, True, 12.0) == "controller 2 not back in service after #4 " \
                                              "kill-leader: no answer, not a follower or the leader"
    states[2] = "Candidate"
    assert "Candidate, not a follower" in str(service.not_back(2, True, 12.0))
    states[2] = "Follower"
    assert service.not_back(2, True, 12.0) is None and 2 not in service.recovering


def test_no_controller_is_taken_down_while_another_is_not_back(tmp_path: Path) -> None:
    """Controller 2 killed and not yet back in the quorum: a kill of controller 3 waits too
    (the quorum keeps a majority, which the bound's controller-failover term assumes); a
    broker's fault does not; once 2 follows again, 3 may go."""
    injector, cluster = _stopped_then_due_again(tmp_path)
    for controller in (1, 2, 3):
        cluster.nodes[controller] = SimpleNamespace(process=None, alive=True)
    states: dict[int, str | None] = {2: None}
    injector.service.voter_state = states.get
    injector.service.faulted(2, 4, "kill", 10.0)
    injector.service.fault_ended(2, 4)
    assert injector._not_back(3) == ("the quorum keeps a majority: controller 2 not back in "
                                     "service after #4 kill: no answer, not a follower or the "
                                     "leader")
    assert str(injector._not_back(2)).startswith("controller 2 not back")
    injector.refault_recovering = True
    assert injector._not_back(3) is None
    injector.refault_recovering = False
    states[2] = "Follower"
    assert injector._not_back(3) is None


def test_a_broker_waits_while_a_data_partition_it_holds_is_below_min_isr(
        tmp_path: Path) -> None:
    """Seed 726397: the three brokers killed in turn, each back and unfenced before its next
    kill, while partition 0 (ISR [6], its last in-sync replica) never had a second replica back
    between two kills. A broker is not taken down while a data partition it replicates cannot
    take an acks=all write, whichever broker the earlier fault hit."""
    states: dict[int, tuple[list[int], list[int]]] | None = {
        0: ([4, 5, 6], [6]), 1: ([4, 5, 6], [4, 5, 6])}
    service = Service({n: tmp_path / f"node-{n}.log" for n in (4, 5, 6, 7)}, lambda: {4, 5, 6})
    assert service.not_back(6, True, None) is None  # no data topic yet: brokers alone
    service.data_partitions = lambda: states
    for broker in (4, 5, 6):  # none is recovering itself
        assert service.not_back(broker, True, None) == (
            f"broker {broker} waits: data partition 0 is recovering (ISR [6], "
            "min.insync.replicas 2)")
    assert service.not_back(7, True, None) is None  # holds none of them
    states = {0: ([4, 5, 6], [6, 4]), 1: ([4, 5, 6], [4, 5, 6])}
    assert service.not_back(6, True, None) is None
    states = None
    assert "unknown" in str(service.not_back(4, True, None))
