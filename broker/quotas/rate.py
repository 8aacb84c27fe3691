"""A rate over a sampled window, as Kafka's metrics measure a quota (Rate over a WindowedSum,
metrics/stats/Rate.java and SampledStat.java, Kafka 4.0).

`window.samples` samples of `window.size_ms` each: a value is added to the current sample,
which is replaced by a new one once it is `size_ms` old (a ring of samples + 1: one extra
holds the sample that overlaps the window's start). A sample whose last event is
`samples * size_ms` old is reset. The rate is the sum of the samples over the window, which is
the time since the oldest sample started, but never less than `samples - 1` full windows (so
the first second of traffic is not read as a burst): rate = sum / window.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    """quota.window.num and quota.window.size.seconds (in ms)."""

    samples: int = 11
    size_ms: int = 1000

    def __post_init__(self) -> None:
        if self.samples < 1 or self.size_ms < 1:
            raise ValueError(f"a quota window needs samples >= 1 and size >= 1 ms: {self}")

    @property
    def total_ms(self) -> int:
        """How long a sample counts at most: after this, a sensor holds nothing."""
        return self.samples * self.size_ms


@dataclass(slots=True)
class _Sample:
    start_ms: int
    last_event_ms: int
    value: float = 0.0

    def reset(self, now_ms: int) -> None:
        self.start_ms = self.last_event_ms = now_ms
        self.value = 0.0


class Rate:
    """Value per second over a QuotaWindow; times are milliseconds from any fixed origin."""

    __slots__ = ("_current", "_samples", "_window")

    def __init__(self, window: QuotaWindow) -> None:
        self._window = window
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._current_sample(now_ms)
        if now_ms - sample.start_ms >= self._window.size_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.last_event_ms = now_ms

    def measure(self, now_ms: int) -> float:
        """The rate per second at `now_ms`."""
        return self.total(now_ms) / (self.window_ms(now_ms) / 1000)

    def total(self, now_ms: int) -> float:
        self._purge(now_ms)
        return sum(sample.value for sample in self._samples)

    def window_ms(self, now_ms: int) -> int:
        """The time the rate divides by (Kafka's Rate.windowSize)."""
        self._purge(now_ms)
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        elapsed = now_ms - min(sample.start_ms for sample in self._samples)
        size = self._window.size_ms
        full_windows = elapsed // size
        if full_windows < self._window.samples - 1:
            elapsed += (self._window.samples - 1 - full_windows) * size
        return max(elapsed, 1)

    def _current_sample(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(now_ms, now_ms))
        return self._samples[self._current]

    def _advance(self, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (self._window.samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(now_ms, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    def _purge(self, now_ms: int) -> None:
        expire_age = self._window.total_ms
        for sample in self._samples:
            # A sample overlapping the window is kept even if it started before it.
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)
