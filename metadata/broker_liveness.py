"""Fast broker failure detection: the active controller's rule for broker liveness streams.

Kafka fences a broker only when it has not heartbeated for `broker.session.timeout.ms` (9 s),
whatever the reason. Here every broker also keeps one long-lived stream open to the active
controller (BrokerLifecycle.BrokerLiveness). When a broker's process dies, its kernel closes
its sockets and the controller sees that stream end at once, without the goodbye message a
broker sends when it ends the stream on purpose (controlled shutdown, a new broker epoch, a
move to another controller). That alone is not proof of death: a reset can hit a live broker
too (a middlebox, a conntrack flush), so the broker gets one grace window
(`broker.liveness.grace.ms`) to open a new stream, which a live broker does at once. One that
does not is fenced, through the same records as a session expiry.

The window is cut short when the controller asks the broker's own listeners and every one
refuses the connection (`broker.liveness.probe.enable`, metadata/liveness_probe.py): a refusal
is the broker's kernel saying nothing listens there, which a live broker never says — its
listeners are bound from its start to its exit. A probe that connects, or gets no answer
(a partition, a slow network), changes nothing: the grace window runs as before.

What it never does:
* fence a broker whose stream is merely silent: a frozen, slow or overloaded broker keeps its
  TCP connection, so only the session timeout applies to it;
* fence a broker it never saw a stream from: a new active controller starts with none, so
  after a failover only the session timeout applies until a stream is seen and lost;
* fence many brokers at once: when more than half of the unfenced brokers with a stream have
  lost it, the fault is more likely this controller's network than that many deaths, and the
  session timeout decides instead (the Raft fast failover's lesson: a reset that hits every
  peer at once must not look like a death).

Soft state, like the heartbeat manager's: time is a value passed in (milliseconds on a
monotonic clock), and nothing here does I/O.
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import Enum

from metadata.image import MetadataImage
from metadata.records import Endpoint

DEFAULT_GRACE_MS = 500  # broker.liveness.grace.ms: a few reconnect attempts of a live broker

# (a broker's registered listeners, timeout in seconds) -> did every one refuse a connection?
LivenessProbe = Callable[[tuple[Endpoint, ...], float], Awaitable[bool]]


class StreamState(Enum):
    OPEN = "OPEN"
    LOST = "LOST"  # ended without a goodbye: the grace window runs
    CLOSED = "CLOSED"  # ended with a goodbye: only the session timeout applies


@dataclass
class _Stream:
    token: int
    broker_epoch: int
    state: StreamState = StreamState.OPEN
    lost_at_ms: int = -1
    refused: bool = False  # every listener of the broker refused a connection since the loss


@dataclass(frozen=True, slots=True)
class LivenessStream:
    """One open stream, as the servicer holds it: who, with which epoch, and its token (a
    newer stream of the same broker supersedes it)."""

    broker_id: int
    broker_epoch: int
    token: int


class BrokerLivenessTracker:
    """The latest liveness stream of every broker, and which brokers it says are dead.
    `grace_ms` <= 0 turns the fast path off: streams are tracked, nobody is fenced by them."""

    def __init__(self, grace_ms: int = DEFAULT_GRACE_MS) -> None:
        self.grace_ms = grace_ms
        self._streams: dict[int, _Stream] = {}
        self._tokens = itertools.count(1)

    def reset(self) -> None:
        """A new active controller has seen no stream: nobody can be fenced by this path until
        a broker's stream has been opened here and lost."""
        self._streams = {}

    def opened(self, broker_id: int, broker_epoch: int) -> LivenessStream:
        """A broker opened a stream; it supersedes any earlier one (whose end is then news of
        nothing) and ends a running grace window."""
        token = next(self._tokens)
        self._streams[broker_id] = _Stream(token, broker_epoch)
        return LivenessStream(broker_id, broker_epoch, token)

    def closed(self, stream: LivenessStream) -> None:
        """The broker ended the stream with a goodbye."""
        current = self._current(stream)
        if current is not None:
            current.state = StreamState.CLOSED

    def lost(self, stream: LivenessStream, now_ms: int) -> int | None:
        """The stream ended without a goodbye: the deadline by which the broker must open a
        new one, or None when this is not the broker's latest stream (or the fast path is
        off)."""
        current = self._current(stream)
        if current is None or current.state is not StreamState.OPEN:
            return None
        current.state = StreamState.LOST
        current.lost_at_ms = now_ms
        return now_ms + self.grace_ms if self.grace_ms > 0 else None

    def refused(self, stream: LivenessStream) -> bool:
        """Every listener of the broker refused a connection after `stream` was lost: its
        grace window ends now. False (nothing changes) when the stream is no longer the
        broker's latest or is not lost (a new stream came first: the broker is back)."""
        current = self._current(stream)
        if current is None or current.state is not StreamState.LOST or self.grace_ms <= 0:
            return False
        current.refused = True
        return True

    def _window_over(self, stream: _Stream, now_ms: int) -> bool:
        return stream.state is StreamState.LOST and (
            stream.refused or stream.lost_at_ms + self.grace_ms <= now_ms)

    def state(self, broker_id: int) -> StreamState | None:
        stream = self._streams.get(broker_id)
        return None if stream is None else stream.state

    def next_deadline_ms(self, now_ms: int) -> int | None:
        """The earliest grace window still running at `now_ms`."""
        if self.grace_ms <= 0:
            return None
        deadlines = [
            s.lost_at_ms + self.grace_ms for s in self._streams.values()
            if s.state is StreamState.LOST and not self._window_over(s, now_ms)
        ]
        return min(deadlines, default=None)

    def is_dead(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        return broker_id in self.dead_brokers(image, now_ms)

    def dead_brokers(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Unfenced brokers, registered with the epoch of their stream, whose stream was lost
        at least one grace window ago (or whose listeners all refused since) and not replaced;
        none while more than half of the unfenced brokers with a stream have lost it."""
        if self.grace_ms <= 0:
            return []
        watched = {
            broker_id: stream for broker_id, stream in self._streams.items()
            if stream.state is not StreamState.CLOSED
            and (registration := image.cluster.broker(broker_id)) is not None
            and not registration.fenced and registration.epoch == stream.broker_epoch
        }
        lost = sorted(b for b, s in watched.items() if s.state is StreamState.LOST)
        if len(lost) * 2 > len(watched):
            return []
        return [b for b in lost if self._window_over(watched[b], now_ms)]

    def held_back(self, image: MetadataImage, now_ms: int) -> list[int]:
        """Brokers past their grace window that the many-at-once rule keeps from fencing."""
        if self.grace_ms <= 0 or self.dead_brokers(image, now_ms):
            return []
        return sorted(
            b for b, s in self._streams.items()
            if self._window_over(s, now_ms)
            and (registration := image.cluster.broker(b)) is not None
            and not registration.fenced and registration.epoch == s.broker_epoch
        )

    def _current(self, stream: LivenessStream) -> _Stream | None:
        current = self._streams.get(stream.broker_id)
        return current if current is not None and current.token == stream.token else None
