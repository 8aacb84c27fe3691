"""The campaign's fault model for brokers: one fault, one recovery.

A fault that takes a broker out of service (kill -9, SIGSTOP, a full disk that stops it) is
followed by its recovery: the broker is not taken down again until it is back in service,
that is, its fault is over, it runs, it has registered again in the run the campaign started
after the fault (a kill, a disk stop), and the active controller lists it unfenced. This is
the premise of the availability bound (availability.derive_bound: every stage once). Faulting
a recovering broker again (the schedule alone keeps only a 1-s gap, schedule._free, while a
restart takes 5-15 s on a loaded 2-core machine) restarts its recovery over and over: a
harsher model the bound does not cover, run with `--refault-recovering`.

Faults that do not take the broker down (a network cut, a slow fsync, a clock step) may still
hit a recovering broker: they are the other lane's one fault at a time, each at most
schedule.MAX_FAULT_S."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.schedule import KILL_KINDS, PAUSE_KINDS

# The faults that take a broker out of service (a full disk stops a broker that writes).
DOWN_KINDS = KILL_KINDS | PAUSE_KINDS | {"disk-full"}
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
    """Which brokers are recovering from a fault that took them down. `unfenced` asks the
    active controller which brokers it lists unfenced (None when none answers)."""

    def __init__(self, log_paths: dict[int, Path],
                 unfenced: Callable[[], set[int] | None]) -> None:
        self.log_paths = log_paths
        self.unfenced = unfenced
        self.recovering: dict[int, Recovering] = {}

    def faulted(self, broker: int, fault_index: int, kind: str, at_s: float) -> None:
        path = self.log_paths[broker]
        size = path.stat().st_size if path.exists() else 0
        self.recovering[broker] = Recovering(fault_index, kind, at_s, size)

    def fault_ended(self, broker: int, fault_index: int) -> None:
        recovering = self.recovering.get(broker)
        if recovering is not None and recovering.fault_index == fault_index:
            recovering.ended = True

    def not_back(self, broker: int, running: bool, restarted_at: float | None) -> str | None:
        """Why the broker is not back in service after its last fault (None: it is, and is no
        longer recovering). `restarted_at`: when the campaign last started it."""
        recovering = self.recovering.get(broker)
        if recovering is None:
            return None
        what = f"broker {broker} not back in service after #{recovering.fault_index} " \
               f"{recovering.kind}"
        if not recovering.ended:
            return f"{what}: the fault is still in effect"
        if not running:
            return f"{what}: not running"
        if restarted_at is not None and restarted_at >= recovering.started_s \
                and not self._registered_since(broker, recovering.log_offset):
            return f"{what}: started again, not registered yet"
        unfenced = self.unfenced()
        if unfenced is None:
            return f"{what}: no active controller answered"
        if broker not in unfenced:
            return f"{what}: fenced"
        del self.recovering[broker]
        return None

    def _registered_since(self, broker: int, offset: int) -> bool:
        try:
            with self.log_paths[broker].open("rb") as file:
                file.seek(offset)
                text = file.read().decode(errors="replace")
        except OSError:
            return False
        return REGISTERED.format(broker) in text
