"""The campaign's fault model for nodes: one fault, one recovery.

A fault that takes a node out of service (kill -9, SIGSTOP; for a broker also a full disk,
which stops it) is followed by its recovery: the node is not taken down again until it is
back in service. A broker is back when its fault is over, it runs, it has registered again in
the run the campaign started after the fault (a kill, a disk stop), and the active controller
lists it unfenced; a controller when its fault is over, it runs and it answers as a follower
or the leader of the quorum. This is the premise of the availability bound
(availability.derive_bound: every stage once). Faulting a recovering node again (the schedule
alone keeps only a 1-s gap, schedule._free, while a restart takes 5-15 s on a loaded 2-core
machine) restarts its recovery over and over: a harsher model the bound does not cover, run
with `--refault-recovering`.

A broker is not taken down either while a partition of the campaign's data topic that it
replicates is below `min.insync.replicas` (no acks=all write can succeed): the partition is
still recovering from an earlier fault, whichever broker it hit. Back in service one broker
at a time is not enough: with two lanes the three brokers were killed in turn, each back and
unfenced before its next kill, while the partition, whose last in-sync replica was among them,
never got a second replica back in sync between two kills (seed 726397: 43-66-s windows, each
a chain of recoveries, not one).

Faults that do not take a node down (a network cut, a slow fsync, a clock step, a controller's
full disk, which stalls its appends) may still hit a recovering node: they are the other
lane's one fault at a time, each at most schedule.MAX_FAULT_S."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from harness.cluster import ProcessCluster
from tests.chaos.schedule import KILL_KINDS, PAUSE_KINDS

# The faults that take a node out of service (a full disk stops a broker that writes).
DOWN_KINDS = KILL_KINDS | PAUSE_KINDS
BROKER_DOWN_KINDS = DOWN_KINDS | {"disk-full"}
VOTER_STATES = ("Follower", "Leader")  # a controller back in the quorum
REGISTERED = "registered broker {} with epoch"  # broker/lifecycle.py


@dataclass
class Recovering:
    """A broker's last fault that took it down, until it is back in service."""

    fault_index: int
    kind: str
    started_s: float
    log_offset: int  # the size of its log when the fault began: a later registration counts
    ended: bool = False


class Service:
    """Which nodes are recovering from a fault that took them down. `log_paths`: the brokers'
    logs; `unfenced` asks the active controller which brokers it lists unfenced (None when
    none answers); `voter_state` asks a controller its quorum state (None: no answer)."""

    def __init__(self, log_paths: dict[int, Path],
                 unfenced: Callable[[], set[int] | None],
                 voter_state: Callable[[int], str | None] = lambda node: None) -> None:
        self.log_paths = log_paths
        self.unfenced = unfenced
        self.voter_state = voter_state
        self.recovering: dict[int, Recovering] = {}
        # Set once the data topic exists: partition -> (replicas, ISR), None when unknown.
        self.data_partitions: Callable[[], dict[int, tuple[list[int], list[int]]] | None] \
            | None = None
        self.min_isr = 2

    def takes_down(self, node: int, kind: str) -> bool:
        """Whether a fault of `kind` takes `node` out of service."""
        return kind in (BROKER_DOWN_KINDS if node in self.log_paths else DOWN_KINDS)

    def faulted(self, node: int, fault_index: int, kind: str, at_s: float) -> None:
        path = self.log_paths.get(node)
        size = path.stat().st_size if path is not None and path.exists() else 0
        self.recovering[node] = Recovering(fault_index, kind, at_s, size)

    def fault_ended(self, node: int, fault_index: int) -> None:
        recovering = self.recovering.get(node)
        if recovering is not None and recovering.fault_index == fault_index:
            recovering.ended = True

    def not_back(self, node: int, running: bool, restarted_at: float | None) -> str | None:
        """Why the node is not back in service after its last fault (None: it is, and is no
        longer recovering). `restarted_at`: when the campaign last started it."""
        partitions = self._partitions_recovering(node)
        if partitions is not None:
            return f"broker {node} waits: {partitions}"
        recovering = self.recovering.get(node)
        if recovering is None:
            return None
        what = f"{'broker' if node in self.log_paths else 'controller'} {node} not back in " \
               f"service after #{recovering.fault_index} {recovering.kind}"
        if not recovering.ended:
            return f"{what}: the fault is still in effect"
        if not running:
            return f"{what}: not running"
        if node not in self.log_paths:
            state = self.voter_state(node)
            if state not in VOTER_STATES:
                return f"{what}: {state or 'no answer'}, not a follower or the leader"
            del self.recovering[node]
            return None
        if restarted_at is not None and restarted_at >= recovering.started_s \
                and not self._registered_since(node, recovering.log_offset):
            return f"{what}: started again, not registered yet"
        unfenced = self.unfenced()
        if unfenced is None:
            return f"{what}: no active controller answered"
        if node not in unfenced:
            return f"{what}: fenced"
        del self.recovering[node]
        return None

    def _partitions_recovering(self, node: int) -> str | None:
        """A data partition `node` replicates that cannot take an acks=all write yet."""
        if self.data_partitions is None or node not in self.log_paths:
            return None
        partitions = self.data_partitions()
        if partitions is None:
            return "the data partitions' ISRs are unknown (no controller answered)"
        for partition, (replicas, isr) in sorted(partitions.items()):
            if node in replicas and len(isr) < self.min_isr:
                return (f"data partition {partition} is recovering (ISR {sorted(isr)}, "
                        f"min.insync.replicas {self.min_isr})")
        return None

    def _registered_since(self, broker: int, offset: int) -> bool:
        try:
            with self.log_paths[broker].open("rb") as file:
                file.seek(offset)
                text = file.read().decode(errors="replace")
        except OSError:
            return False
        return REGISTERED.format(broker) in text


def voter_state(cluster: ProcessCluster, node: int) -> str | None:
    """A controller's quorum state as it answers it (None: no answer)."""
    try:
        return str(cluster.status(node).state)
    except grpc.RpcError:
        return None
