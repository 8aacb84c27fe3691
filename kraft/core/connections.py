"""Per-destination request bookkeeping (Kafka's RequestManager): at most one request in flight
to each destination, a timeout for each, and a backoff after an error."""

from __future__ import annotations

from dataclasses import dataclass

from kraft.core.messages import Request


@dataclass(frozen=True, slots=True)
class InFlight:
    correlation_id: int
    destination: int
    request: Request
    deadline: int


class Connections:
    def __init__(self) -> None:
        self._next_correlation_id = 1
        self._in_flight: dict[int, InFlight] = {}  # by destination
        self._by_correlation: dict[int, InFlight] = {}
        self._backoff_until: dict[int, int] = {}

    def is_ready(self, destination: int, now: int) -> bool:
        return (
            destination not in self._in_flight and self._backoff_until.get(destination, 0) <= now
        )

    def has_in_flight(self, kind: type) -> bool:
        """Whether any request of this type awaits an answer (one Fetch at a time, ever)."""
        return any(isinstance(e.request, kind) for e in self._in_flight.values())

    def in_flight_to(self, destination: int) -> InFlight | None:
        return self._in_flight.get(destination)

    def send(self, destination: int, request: Request, now: int, timeout_ms: int) -> InFlight:
        cid = self._next_correlation_id
        self._next_correlation_id += 1
        entry = InFlight(cid, destination, request, now + timeout_ms)
        self._in_flight[destination] = entry
        self._by_correlation[cid] = entry
        return entry

    def complete(self, correlation_id: int) -> InFlight | None:
        """The entry a response or failure answers, or None when it is no longer awaited."""
        entry = self._by_correlation.pop(correlation_id, None)
        if entry is not None:
            del self._in_flight[entry.destination]
        return entry

    def back_off(self, destination: int, until: int) -> None:
        self._backoff_until[destination] = until

    def expire(self, now: int) -> list[InFlight]:
        """Drop and return requests past their deadline; their destinations become ready."""
        expired = [e for e in self._in_flight.values() if e.deadline <= now]
        for entry in expired:
            self.complete(entry.correlation_id)
        return expired

    def reset(self) -> None:
        """Forget everything in flight (on a state change); late answers are then ignored."""
        self._in_flight.clear()
        self._by_correlation.clear()
        self._backoff_until.clear()

    def next_deadline(self, now: int) -> float:
        deadlines = [e.deadline for e in self._in_flight.values()]
        deadlines.extend(t for t in self._backoff_until.values() if t > now)
        return min(deadlines, default=float("inf"))
