"""Running the schedule against real processes: signals for kill/pause, and the files the
product's fault injector watches (kraft/node/faults.py) for everything else."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import grpc

from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from tests.chaos.schedule import Fault
from tests.integration.cluster import ProcessCluster

LEADER_WAIT_S = 3.0


class FaultFiles:
    """Each node's fault files as the union of the faults active on it: overlapping
    partitions add up, any disk-full fills the disk, the slowest fsync and the sum of the
    clock offsets win."""

    def __init__(self, dirs: dict[int, Path]) -> None:
        self.dirs = dirs
        self.blocked: dict[int, dict[int, set[int]]] = defaultdict(dict)
        self.disk_full: dict[int, set[int]] = defaultdict(set)
        self.fsync_ms: dict[int, dict[int, int]] = defaultdict(dict)
        self.clock_ms: dict[int, dict[int, int]] = defaultdict(dict)

    def add(self, fault: Fault, targets: list[int], other_side: list[int]) -> None:
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
        for node in {*targets, *other_side}:
            self.write(node)

    def remove(self, fault: Fault) -> None:
        i = fault.index
        for node in self.dirs:
            touched = [self.blocked[node].pop(i, None), self.fsync_ms[node].pop(i, None),
                       self.clock_ms[node].pop(i, None)]
            if i in self.disk_full[node]:
                self.disk_full[node].discard(i)
                touched.append(True)
            if any(t is not None for t in touched):
                self.write(node)

    def clear(self) -> None:
        for table in (self.blocked, self.disk_full, self.fsync_ms, self.clock_ms):
            table.clear()
        for node in self.dirs:
            self.write(node)

    def write(self, node: int) -> None:
        directory = self.dirs[node]
        blocked = set().union(*self.blocked[node].values()) if self.blocked[node] else set()
        _put(directory / "blocked", ",".join(map(str, sorted(blocked))))
        _put(directory / "fsync-delay-ms", str(max(self.fsync_ms[node].values(), default=0)))
        _put(directory / "clock-offset-ms", str(sum(self.clock_ms[node].values())))
        full = directory / "disk-full"
        if self.disk_full[node]:
            full.touch()
        else:
            full.unlink(missing_ok=True)


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

    def to_json(self) -> dict[str, object]:
        return {"index": self.fault.index, "kind": self.fault.kind, "targets": self.targets,
                "otherSide": self.other_side, "valueMs": self.fault.value,
                "scheduledS": [round(self.fault.start_s, 2), round(self.fault.end_s, 2)],
                "startedS": _round(self.started_s), "endedS": _round(self.ended_s),
                "skipped": self.skipped or None}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


@dataclass
class Crash:
    node_id: int
    exit_code: int | None
    at_s: float
    log_tail: str


class Injector:
    """Walks the schedule in a thread; `heal()` undoes everything that is still active."""

    def __init__(self, cluster: ProcessCluster, controllers: list[int], files: FaultFiles,
                 schedule: list[Fault], t0: float, say: Callable[[str], None]) -> None:
        self.cluster = cluster
        self.say = say
        self.controllers = controllers
        self.files = files
        self.t0 = t0
        self.records = [FaultRecord(f) for f in schedule]
        self.killed: set[int] = set()
        self.paused: set[int] = set()
        self.crashes: list[Crash] = []
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
        return node_id in self.killed or node_id in self.paused

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
        if fault.kind in ("kill", "kill-leader", "pause") and self._busy(targets[0]):
            record.skipped = f"node {targets[0]} already down"
            return
        record.targets, record.other_side = targets, other
        record.started_s = self.now()
        if fault.kind in ("kill", "kill-leader"):
            self.cluster.kill(targets[0])
            self.killed.add(targets[0])
        elif fault.kind == "pause":
            self.cluster.signal(targets[0], signal.SIGSTOP)
            self.paused.add(targets[0])
        else:
            self.files.add(fault, targets, other)
        self.say(f"{record.started_s:8.2f} s  start {fault.kind} on {targets}"
                 + (f" | {other}" if other else "") + (f" ({fault.value} ms)" if fault.value
                                                      else ""))

    def _end(self, record: FaultRecord) -> None:
        if record.started_s is None or record.ended_s is not None:
            return
        fault, node_id = record.fault, record.targets[0]
        if fault.kind in ("kill", "kill-leader"):
            if node_id in self.killed:
                self.cluster.start(node_id)
                self.killed.discard(node_id)
        elif fault.kind == "pause":
            if node_id in self.paused:
                self.cluster.signal(node_id, signal.SIGCONT)
                self.paused.discard(node_id)
        else:
            self.files.remove(fault)
        record.ended_s = self.now()
        self.say(f"{record.ended_s:8.2f} s  end   {fault.kind} on {record.targets}")

    def _check_crashes(self) -> None:
        """A node that exited without being killed is a finding; restart it so the
        campaign goes on (the checks fail on any crash)."""
        for node_id, node in self.cluster.nodes.items():
            if node_id in self.killed or node.process is None or node.alive:
                continue
            crash = Crash(node_id, node.process.returncode, self.now(),
                          self.cluster.logs(node_id)[-3000:])
            self.crashes.append(crash)
            self.say(f"{crash.at_s:8.2f} s  NODE {node_id} EXITED by itself "
                     f"(code {crash.exit_code}); restarting it")
            self.cluster.start(node_id)

    # -- the end ----------------------------------------------------------------------------

    def heal(self) -> float:
        """Remove every fault file, continue paused nodes, restart dead ones; returns when
        that was done (campaign time)."""
        self.stop()
        with self._lock:
            self.files.clear()
            for node_id in sorted(self.paused):
                self.cluster.signal(node_id, signal.SIGCONT)
            for node_id in sorted(self.killed):
                self.cluster.start(node_id)
            self._check_crashes()
            healed = self.now()
            for record in self.records:
                if record.started_s is not None and record.ended_s is None:
                    record.ended_s = healed
            self.paused.clear()
            self.killed.clear()
        return healed
