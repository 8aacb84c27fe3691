"""The simulator's virtual time and event heap: events sit in one heap ordered by (time,
sequence number), so a seed replays exactly. `SimCluster` (kraft/sim/cluster.py) says what
the events are and runs one in `step`."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any

from kraft.sim.invariants import SimViolation


class EventLoop:
    def __init__(self) -> None:
        self.now = 0
        self.events: list[tuple[int, int, tuple[Any, ...]]] = []
        self._seq = 0
        self.event_count = 0

    def schedule(self, delay: float, event: tuple[Any, ...]) -> None:
        self._seq += 1
        heapq.heappush(self.events, (int(self.now + delay), self._seq, event))

    def at(self, delay: int, action: Callable[[], None]) -> None:
        """Run a scripted action (a fault, a heal, a restart) after `delay` ms."""
        self.schedule(delay, ("action", action))

    def run_until(self, condition: Callable[[], bool], timeout_ms: int, what: str) -> None:
        deadline = self.now + timeout_ms
        while not condition():
            if not self.events or self.events[0][0] > deadline:
                self.now = max(self.now, deadline)
                raise SimViolation(f"liveness: {what} not reached within {timeout_ms} ms",
                                   self.now, self.event_count)
            self.step()

    def run_for(self, duration_ms: int) -> None:
        deadline = self.now + duration_ms
        while self.events and self.events[0][0] <= deadline:
            self.step()
        self.now = deadline

    def step(self) -> None:
        """Run the earliest event (the cluster's)."""
        raise NotImplementedError
