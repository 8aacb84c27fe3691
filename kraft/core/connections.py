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
        self._failures: dict[int, int] = {}  # consecutive failures by destination

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

    def back_off(self, destination: int, now: int, base_ms: int, max_ms: int) -> None:
        """After a failure: wait `base_ms`, doubling with each consecutive failure up to
        `max_ms`, so a connection that stays refused is not hammered."""
        failures = self._failures.get(destination, 0) + 1
        self._failures[destination] = failures
        delay = min(max_ms, base_ms << min(failures - 1, 16))
        self._backoff_until[destination] = now + max(base_ms, delay)

    def clear_backoff(self, destination: int) -> None:
        """Let the next request to `destination` leave at once (a deliberate retry)."""
        self._backoff_until.pop(destination, None)

    def note_answered(self, destination: int) -> None:
        """`destination` answered: its failure streak is over."""
        self._failures.pop(destination, None)

    def expire(self, now: int) -> list[InFlight]:
        """Drop and return requests past their deadline; their destinations become ready."""
        expired = [e for e in self._in_flight.values() if e.deadline <= now]
        for entry in expired:
            self.complete(entry.correlation_id)
        return expired

    def reset(self) -> None:
        """Forget everything in flight (on a state change); late answers are then ignored.
        Backoffs survive: a peer that refuses connections refuses them whatever our state,
        and a Follower <-> Prospective cycle must not retry it at once every time."""
        self._in_flight.clear()
        self._by_correlation.clear()

    def next_deadline(self, now: int) -> float:
        deadlines = [e.deadline for e in self._in_flight.values()]
        deadlines.extend(t for t in self._backoff_until.values() if t > now)
        return min(deadlines, default=float("inf"))
