"""Running the schedule against real processes: signals for kill/pause, and the files the
product's fault injector watches (kraft/node/faults.py) for everything else.

A fault counts as **applied** only when it is confirmed: a kill when `waitpid` reports the
process killed by SIGKILL, a pause when /proc shows the process stopped (state `T`), a file
fault when the node's `applied` file confirms a generation in which the fault was active with
exactly the state the harness wrote for it (on one whole side of a partition: each node drops
traffic both ways, so one side applying it cuts every link across)."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from harness.cluster import ProcessCluster
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from tests.chaos.node_events import last_line_time
from tests.chaos.schedule import KILL_KINDS, PAUSE_KINDS, PROCESS_KINDS, Fault
from tests.chaos.served import unfenced_brokers
from tests.chaos.service import Service, voter_state

LEADER_WAIT_S = 3.0
PAUSE_CONFIRM_S = 2.0  # SIGSTOP takes effect at once; /proc shows it within microseconds
APPLIED_FILE = "applied"  # kraft/node/faults.py APPLIED_FILE


Generations = dict[int, int]  # node -> the generation a change of its files was written as


class FaultFiles:
    """Each node's fault files as the union of the faults active on it: overlapping
    partitions add up, any disk-full fills the disk, the slowest fsync and the sum of the
    clock offsets win. Every write of a node's files is a new *generation*: the `generation`
    file is written last, and `written[node][generation]` remembers the state written then,
    in the form the node confirms it (kraft/node/faults.py `FaultState.confirmation`)."""

    def __init__(self, dirs: dict[int, Path]) -> None:
        self.dirs = dirs
        self.blocked: dict[int, dict[int, set[int]]] = defaultdict(dict)
        self.disk_full: dict[int, set[int]] = defaultdict(set)
        self.fsync_ms: dict[int, dict[int, int]] = defaultdict(dict)
        self.clock_ms: dict[int, dict[int, int]] = defaultdict(dict)
        self.generation: dict[int, int] = defaultdict(int)
        self.written: dict[int, dict[int, dict[str, object]]] = defaultdict(dict)

    def add(self, fault: Fault, targets: list[int], other_side: list[int]) -> Generations:
        """Returns the generation of each node's files that holds the fault."""
        i = fault.index
        if fault.kind in ("partition", "isolate-leader"):
            for a in targets:
                self.blocked[a][i] = set(other_side)
            for b in other_side:
                self.blocked[b][i] = set(targets)
        for node in targets:
            if fault.kind == "disk-full":
                self.disk_full[node].add(i)
            elif fault.kind == "slow-fsync":
                self.fsync_ms[node][i] = fault.value
            elif fault.kind == "clock-jump":
                self.clock_ms[node][i] = fault.value
        return {node: self.write(node) for node in sorted({*targets, *other_side})}

    def remove(self, fault: Fault) -> Generations:
        """Returns the generation of each node's files that no longer holds the fault."""
        i = fault.index
        out = {}
        for node in self.dirs:
            touched = [self.blocked[node].pop(i, None), self.fsync_ms[node].pop(i, None),
                       self.clock_ms[node].pop(i, None)]
            if i in self.disk_full[node]:
                self.disk_full[node].discard(i)
                touched.append(True)
            if any(t is not None for t in touched):
                out[node] = self.write(node)
        return out

    def clear(self) -> Generations:
        for table in (self.blocked, self.disk_full, self.fsync_ms, self.clock_ms):
            table.clear()
        return {node: self.write(node) for node in self.dirs}

    def write(self, node: int) -> int:
        directory = self.dirs[node]
        blocked = set().union(*self.blocked[node].values()) if self.blocked[node] else set()
        fsync_ms = max(self.fsync_ms[node].values(), default=0)
        clock_ms = sum(self.clock_ms[node].values())
        _put(directory / "blocked", ",".join(map(str, sorted(blocked))))
        _put(directory / "fsync-delay-ms", str(fsync_ms))
        _put(directory / "clock-offset-ms", str(clock_ms))
        full = directory / "disk-full"
        if self.disk_full[node]:
            full.touch()
        else:
            full.unlink(missing_ok=True)
        self.generation[node] += 1
        generation = self.generation[node]
        self.written[node][generation] = {
            "generation": generation, "blocked": sorted(blocked),
            "diskFull": bool(self.disk_full[node]), "fsyncDelayMs": fsync_ms,
            "clockOffsetMs": clock_ms}
        _put(directory / "generation", str(generation))  # last: names the files above
        return generation


def read_confirmations(directory: Path) -> list[dict[str, object]]:
    """The node's `applied` lines (a torn last line, from a kill inside the write, skipped)."""
    try:
        text = (directory / APPLIED_FILE).read_text()
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def confirmed_at(confirmations: list[dict[str, object]], written: dict[int, dict[str, object]],
                 first: int, end: int | None) -> float | None:
    """The earliest wall time at which the node confirmed a generation in [first, end) with
    exactly the state written for it; None if it never did."""
    times = []
    for entry in confirmations:
        generation = entry.get("generation")
        if not isinstance(generation, int) or generation < first or (
                end is not None and generation >= end):
            continue
        expected = written.get(generation)
        if expected is not None and all(entry.get(k) == v for k, v in expected.items()):
            times.append(float(entry.get("wallTime", 0.0)))  # type: ignore[arg-type]
    return min(times) if times else None


def process_state(pid: int) -> str | None:
    """The one-letter state of /proc/<pid>/stat (R, S, D, T, Z, ...), None when unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # after the command name, which may hold spaces
    return fields[0] if fields else None


def _put(path: Path, text: str) -> None:
    """Atomically, so the injector never reads half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def find_leader(cluster: ProcessCluster, controllers: list[int]) -> int | None:
    """The controller that says it leads, in the highest epoch any says so; paused or dead
    nodes are skipped (a short deadline, unlike ProcessCluster.leader, which wants all)."""
    best: tuple[int, int] | None = None
    for node_id in controllers:
        node = cluster.nodes[node_id]
        if not node.alive:
            continue
        try:
            with grpc.insecure_channel(node.endpoint) as channel:
                status = rpc.QuorumStub(channel).NodeStatus(pb.NodeStatusRequest(), timeout=0.5)
        except grpc.RpcError:
            continue
        if status.state == "Leader" and (best is None or status.epoch > best[0]):
            best = (status.epoch, node_id)
    return None if best is None else best[1]


@dataclass
class FaultRecord:
    """What happened to one scheduled fault (times from the campaign's start)."""

    fault: Fault
    targets: list[int] = field(default_factory=list)
    other_side: list[int] = field(default_factory=list)
    started_s: float | None = None
    ended_s: float | None = None
    skipped: str = ""
    # File faults: node -> [the generation that added the fault, the one that removed it].
    generations: dict[int, list[int | None]] = field(default_factory=dict)
    confirmed_s: float | None = None  # when the node (or the OS) confirmed it in effect
    unconfirmed: str = ""  # why a started fault was not confirmed
    # clock-jump: the active controller when the fault started (one of the targets), if any.
    active_controller: int | None = None

    @property
    def applied(self) -> bool:
        return self.started_s is not None and self.confirmed_s is not None

    def to_json(self) -> dict[str, object]:
        return {"index": self.fault.index, "kind": self.fault.kind, "targets": self.targets,
                "otherSide": self.other_side, "valueMs": self.fault.value,
                "scheduledS": [round(self.fault.start_s, 2), round(self.fault.end_s, 2)],
                "startedS": _round(self.started_s), "endedS": _round(self.ended_s),
                "applied": self.applied, "confirmedS": _round(self.confirmed_s),
                "unconfirmed": self.unconfirmed or None, "skipped": self.skipped or None,
                **({"activeController": self.active_controller}
                   if self.fault.kind == "clock-jump" else {})}


def confirm_file_fault(record: FaultRecord, files: FaultFiles,
                       confirmations: dict[int, list[dict[str, object]]],
                       wall_t0: float) -> None:
    """Set `confirmed_s` from the nodes' `applied` lines: the moment every node of one side
    of a partition (every target of any other file fault) had applied it."""
    def node_time(node: int) -> float | None:
        first, end = record.generations.get(node, [None, None])
        if first is None:
            return None
        at = confirmed_at(confirmations.get(node, []), files.written[node], first, end)
        return None if at is None else at - wall_t0

    def side_time(nodes: list[int]) -> float | None:
        times = [node_time(n) for n in nodes]
        return None if not nodes or any(t is None for t in times) else max(
            t for t in times if t is not None)

    sides = [record.targets]
    if record.fault.kind in ("partition", "isolate-leader"):
        sides.append(record.other_side)
    done = [t for t in map(side_time, sides) if t is not None]
    if done:
        record.confirmed_s = min(done)
    else:
        waiting = [n for n in record.targets if node_time(n) is None]
        record.unconfirmed = f"node(s) {waiting} never confirmed it while it was active"


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass
class Outage:
    """A time a node's process was not serving: killed (until restarted), paused (until
    continued), stopped by its full disk or exited by itself (until started again)."""

    node: int
    start_s: float
    end_s: float | None
    why: str

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "startS": _round(self.start_s), "endS": _round(self.end_s),
                "why": self.why}


@dataclass
class Crash:
    node_id: int
    exit_code: int | None
    at_s: float
    log_tail: str


DISK_STOP_MARK = "the broker stops so that its leaderships move"
# The line the campaign writes into a node's log file before it starts the node again: the
# node's last run is what follows the last such line (the node never writes it).
RUN_MARK = "=== chaos campaign: node started again"


def last_run(log: str) -> str:
    """The part of a node's log that its current (or last) process wrote: after the
    campaign's last start marker, or all of it for a node the campaign never restarted."""
    at = log.rfind(RUN_MARK)
    return log if at < 0 else log[at:]


def stopped_by_injected_disk_full(run: str) -> bool:
    """Whether one run's log holds the broker's stop line on an injected full disk
    (server/broker_role.py), naming the injected fault. The whole run is searched: a stopping
    broker goes on logging while its leaderships move (40 KB after the stop line, seed
    408605). The line alone proves nothing: the campaign also needs its own record of a
    disk-full fault on the node during that run (Injector._disk_full_in_run)."""
    at = run.rfind(DISK_STOP_MARK)
    if at < 0:
        return False
    line = run[run.rfind("\n", 0, at) + 1:at]
    return "(injected fault)" in line


class Injector:
    """Walks the schedule in a thread; `heal()` undoes everything that is still active. A
    fault that would take down a node not yet back in service after its previous one is
    skipped (service.py), unless `refault_recovering`."""

    def __init__(self, cluster: ProcessCluster, controllers: list[int], files: FaultFiles,
                 schedule: list[Fault], t0: float, say: Callable[[str], None],
                 refault_recovering: bool = False) -> None:
        self.cluster = cluster
        self.say = say
        self.controllers = controllers
        self.refault_recovering = refault_recovering
        self.service = Service({n: node.log_path for n, node in cluster.nodes.items()
                                if n not in controllers}, self._unfenced,
                               lambda node_id: voter_state(cluster, node_id))
        self.files = files
        self.t0 = t0
        # The wall clock at t0: the nodes stamp their confirmations with time.time().
        self.wall_t0 = time.time() - (time.monotonic() - t0)
        self.records = [FaultRecord(f) for f in schedule]
        self.killed: set[int] = set()
        self.paused: set[int] = set()
        # Brokers that stopped because disk-full took their log dir offline (as designed:
        # server/broker_role.py); started again once their disk has room.
        self.stopped_by_disk: set[int] = set()
        self.disk_stops = 0
        # Campaign time at which the injector last started each node (absent: it runs since
        # the campaign's set-up); the node's log marks the same point (RUN_MARK).
        self.run_started: dict[int, float] = {}
        self.runs = 0
        self.crashes: list[Crash] = []
        self.outages: list[Outage] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="chaos-injector", daemon=True)
        self.error: BaseException | None = None

    def now(self) -> float:
        return time.monotonic() - self.t0

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)

    def _run(self) -> None:
        events = sorted([(r.fault.start_s, 0, r) for r in self.records] +
                        [(r.fault.end_s, 1, r) for r in self.records],
                        key=lambda e: (e[0], e[1], e[2].fault.index))
        try:
            for at, is_end, record in events:
                # Waiting for the schedule's next instant, or for stop(): not a sync sleep.
                if self._stop.wait(max(0.0, at - self.now())):
                    return
                with self._lock:
                    self._check_crashes()
                    if is_end:
                        self._end(record)
                    else:
                        self._begin(record)
        except BaseException as exc:  # reported by the campaign, never swallowed
            self.error = exc

    # -- one fault ------------------------------------------------------------------------

    def check_crashes(self) -> None:
        with self._lock:
            self._check_crashes()

    def _leader_soon(self) -> int | None:
        """The leader, waiting out an election in progress (another fault's) for a moment."""
        deadline = time.monotonic() + LEADER_WAIT_S
        while True:
            leader = find_leader(self.cluster, self.controllers)
            if leader is not None or time.monotonic() >= deadline or self._stop.is_set():
                return leader
            self._stop.wait(0.05)  # polling interval of a bounded wait

    def _busy(self, node_id: int) -> bool:
        return node_id in self.killed or node_id in self.paused or node_id in self.stopped_by_disk

    def _begin(self, record: FaultRecord) -> None:
        fault = record.fault
        targets, other = list(fault.targets), list(fault.other_side)
        if fault.kind in ("kill-leader", "isolate-leader"):
            leader = self._leader_soon()
            if leader is None:
                record.skipped = f"no leader within {LEADER_WAIT_S:g} s"
                return
            targets = [leader]
            if fault.kind == "isolate-leader":
                other = [n for n in self.cluster.nodes if n != leader]
        if fault.kind in PROCESS_KINDS and self._busy(targets[0]):
            record.skipped = f"node {targets[0]} already down"
            return
        if self.service.takes_down(targets[0], fault.kind) \
                and (why := self._not_back(targets[0])) is not None:
            record.skipped = why
            self.say(f"{self.now():8.2f} s  skip  {fault.kind} on {targets}: {why}")
            return
        if fault.kind == "clock-jump":
            # The step also reaches the active controller, whose broker sessions must not see
            # it (they run on the monotonic clock); none is aimed at while an election runs.
            record.active_controller = find_leader(self.cluster, self.controllers)
            if record.active_controller is not None and record.active_controller not in targets:
                targets.append(record.active_controller)
        record.targets, record.other_side = targets, other
        record.started_s = self.now()
        if self.service.takes_down(targets[0], fault.kind):
            self.service.faulted(targets[0], fault.index, fault.kind, record.started_s)
        if fault.kind in KILL_KINDS:
            self._kill(record, targets[0])
        elif fault.kind in PAUSE_KINDS:
            self._pause(record, targets[0])
        else:
            record.generations = {n: [g, None] for n, g in
                                  self.files.add(fault, targets, other).items()}
        self.say(f"{record.started_s:8.2f} s  start {fault.kind} on {targets}"
                 + (f" | {other}" if other else "") + (f" ({fault.value} ms)" if fault.value
                                                      else ""))

    def _kill(self, record: FaultRecord, node_id: int) -> None:
        """kill -9, confirmed by waitpid: the process ended by SIGKILL."""
        self.cluster.signal(node_id, signal.SIGKILL)
        code = self.cluster.wait_exit(node_id, 10)
        self.killed.add(node_id)
        self.outages.append(Outage(node_id, record.started_s or self.now(), None, "killed"))
        if code == -signal.SIGKILL:
            record.confirmed_s = self.now()
        else:
            record.unconfirmed = f"node {node_id} exited with code {code}, not by SIGKILL"

    def _pause(self, record: FaultRecord, node_id: int) -> None:
        """SIGSTOP, confirmed by /proc/<pid>/stat showing the process stopped (T)."""
        self.cluster.signal(node_id, signal.SIGSTOP)
        self.paused.add(node_id)
        self.outages.append(Outage(node_id, record.started_s or self.now(), None, "paused"))
        process = self.cluster.nodes[node_id].process
        assert process is not None
        deadline = time.monotonic() + PAUSE_CONFIRM_S
        while (state := process_state(process.pid)) != "T":
            if time.monotonic() >= deadline:
                record.unconfirmed = (f"node {node_id} (pid {process.pid}) in state {state}, "
                                      f"not stopped, {PAUSE_CONFIRM_S:g} s after SIGSTOP")
                return
            self._stop.wait(0.005)  # polling interval of a bounded wait
        record.confirmed_s = self.now()

    def _end(self, record: FaultRecord) -> None:
        if record.started_s is None or record.ended_s is not None:
            return
        fault, node_id = record.fault, record.targets[0]
        if fault.kind in KILL_KINDS:
            if node_id in self.killed:
                self._start(node_id)
                self.killed.discard(node_id)
        elif fault.kind in PAUSE_KINDS:
            if node_id in self.paused:
                self._continue(node_id)
        else:
            for node, generation in self.files.remove(fault).items():
                if node in record.generations:
                    record.generations[node][1] = generation
            for node in record.targets:
                if node in self.stopped_by_disk and not self.files.disk_full[node]:
                    self._start(node)
                    self.stopped_by_disk.discard(node)
        record.ended_s = self.now()
        self.service.fault_ended(node_id, fault.index)
        self.say(f"{record.ended_s:8.2f} s  end   {fault.kind} on {record.targets}")

    def _not_back(self, node_id: int) -> str | None:
        """Why a fault that takes `node_id` down must wait (a node recovering from its previous
        one; for a controller, also any other controller not back: the quorum keeps a majority,
        which the bound's controller-failover term assumes), None when it may go ahead."""
        if self.refault_recovering:
            return None
        nodes = [node_id]
        if node_id in self.controllers:
            nodes += [c for c in sorted(self.controllers) if c != node_id]
        for node in nodes:
            running = self.cluster.nodes[node].alive and not self._busy(node)
            why = self.service.not_back(node, running, self.run_started.get(node))
            if why is not None:
                return why if node == node_id else f"the quorum keeps a majority: {why}"
        return None

    def _unfenced(self) -> set[int] | None:
        """The brokers the active controller lists unfenced, waiting out an election (another
        fault's) for up to LEADER_WAIT_S; None when none answered by then."""
        deadline = time.monotonic() + LEADER_WAIT_S
        while not self._stop.is_set():
            leader = find_leader(self.cluster, self.controllers)
            try:
                if leader is not None:
                    return unfenced_brokers(self.cluster.nodes[leader].endpoint)
            except (grpc.RpcError, AssertionError):
                pass  # a controller just elected, or just deposed: ask again
            if time.monotonic() >= deadline:
                break
            self._stop.wait(0.05)  # polling interval of a bounded wait
        return None

    def _start(self, node_id: int) -> None:
        """Start a node again, after writing the campaign's marker into its log (so its next
        run is told apart by the campaign, not by anything the node logs)."""
        self.runs += 1
        with self.cluster.nodes[node_id].log_path.open("a", encoding="utf-8") as file:
            file.write(f"{RUN_MARK} (run {self.runs} of the campaign, node {node_id}, at "
                       f"{self.now():.3f} s)\n")
        self.run_started[node_id] = self.now()
        self._close_outage(node_id)
        self.cluster.start(node_id)

    def _continue(self, node_id: int) -> None:
        self.cluster.signal(node_id, signal.SIGCONT)
        self.paused.discard(node_id)
        self._close_outage(node_id)

    def _close_outage(self, node_id: int) -> None:
        for outage in self.outages:
            if outage.node == node_id and outage.end_s is None:
                outage.end_s = self.now()

    def _disk_full_in_run(self, node_id: int) -> bool:
        """Whether the campaign had a disk-full fault on the node while its last run lasted
        (the fault may have ended before the exit was seen)."""
        since = self.run_started.get(node_id, float("-inf"))
        return any(r.fault.kind == "disk-full" and node_id in r.targets
                   and r.started_s is not None
                   and (r.ended_s is None or r.ended_s >= since) for r in self.records)

    def _check_crashes(self) -> None:
        """A node that exited without being killed is a finding; restart it so the
        campaign goes on (the checks fail on any crash). The one designed exit: a broker
        whose disk the campaign filled during this run stops with exit code 3 and its stop
        line (docs/data-plane.md, "A failed log directory")."""
        for node_id, node in self.cluster.nodes.items():
            if node_id in self.killed or node_id in self.stopped_by_disk \
                    or node.process is None or node.alive:
                continue
            run = last_run(self.cluster.logs(node_id))
            tail = run[-3000:]
            faulted = self._disk_full_in_run(node_id)
            # When the process was last heard of: its stop line, else its last line.
            exited = last_line_time(run, self.wall_t0, DISK_STOP_MARK) \
                if DISK_STOP_MARK in run else last_line_time(run, self.wall_t0)
            since = self.run_started.get(node_id, 0.0)
            exited = self.now() if exited is None or exited < since else min(exited, self.now())
            if node.process.returncode == 3 and faulted and stopped_by_injected_disk_full(run):
                self.disk_stops += 1
                self.outages.append(Outage(node_id, exited, None, "stopped by its full disk"))
                full = self.files.disk_full[node_id]  # else the fault ended while it stopped
                self.say(f"{self.now():8.2f} s  broker {node_id} stopped: its full disk took "
                         "the log dir offline (as designed); "
                         + ("restarted when it has room" if full
                            else "the disk has room: restarted"))
                if full:
                    self.stopped_by_disk.add(node_id)
                else:
                    self._start(node_id)
                continue
            crash = Crash(node_id, node.process.returncode, self.now(), tail)
            self.crashes.append(crash)
            self.outages.append(Outage(node_id, exited, None, "exited by itself"))
            why = ("; its log has a disk-full stop line but the campaign filled no disk of "
                   "it during this run" if stopped_by_injected_disk_full(run) and not faulted
                   else "")
            self.say(f"{crash.at_s:8.2f} s  NODE {node_id} EXITED by itself "
                     f"(code {crash.exit_code}){why}; restarting it")
            self._start(node_id)

    # -- the end ----------------------------------------------------------------------------

    def heal(self) -> float:
        """Remove every fault file, continue paused nodes, restart dead ones; returns when
        that was done (campaign time)."""
        self.stop()
        with self._lock:
            self._check_crashes()  # while the disk faults are still known
            cleared = self.files.clear()
            for record in self.records:
                for node, span in record.generations.items():
                    if span[1] is None:
                        span[1] = cleared[node]
            for node_id in sorted(self.paused):
                self._continue(node_id)
            for node_id in sorted(self.killed | self.stopped_by_disk):
                self._start(node_id)
            self.stopped_by_disk.clear()
            self._check_crashes()
            healed = self.now()
            for record in self.records:
                if record.started_s is not None and record.ended_s is None:
                    record.ended_s = healed
            self.paused.clear()
            self.killed.clear()
        return healed

    def confirm_file_faults(self) -> None:
        """After the heal: which file faults the nodes confirmed (their `applied` lines)."""
        confirmations = {n: read_confirmations(d) for n, d in self.files.dirs.items()}
        for record in self.records:
            if record.started_s is not None and record.generations:
                confirm_file_fault(record, self.files, confirmations, self.wall_t0)

    def applied(self) -> list[FaultRecord]:
        return [r for r in self.records if r.applied]
