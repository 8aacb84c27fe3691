"""The event loop's time a request takes: what the request quota counts.

Kafka's request quota counts the time a request holds a handler thread. Here requests are
coroutines on one event loop, so the time one takes from everyone else is the time its own
steps run (each send/throw into the coroutine), not the time it spends awaiting a replication,
a long poll or the controller. `LoopTimed` drives a coroutine as `await` would and sums the
wall time of those steps.
"""

from __future__ import annotations

import time
from collections.abc import Coroutine, Generator
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class LoopTimed(Generic[T]):
    """An awaitable running `coro` once, timing its steps."""

    __slots__ = ("_coro", "_seconds", "_step_start")

    def __init__(self, coro: Coroutine[Any, Any, T]) -> None:
        self._coro = coro
        self._seconds = 0.0
        self._step_start: float | None = None

    def seconds(self) -> float:
        """The steps' time so far, the running step's included."""
        running = self._step_start
        return self._seconds + (time.perf_counter() - running if running is not None else 0.0)

    def __await__(self) -> Generator[Any, Any, T]:
        coro = self._coro
        sent: Any = None
        thrown: BaseException | None = None
        while True:
            start = self._step_start = time.perf_counter()
            try:
                if thrown is None:
                    yielded = coro.send(sent)
                else:
                    yielded, thrown = coro.throw(thrown), None
            except StopIteration as stop:
                return stop.value  # type: ignore[no-any-return]
            finally:
                self._seconds += time.perf_counter() - start
                self._step_start = None
            try:
                sent = yield yielded
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as exc:  # a cancellation: the coroutine decides
                sent, thrown = None, exc
