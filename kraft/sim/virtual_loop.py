"""An asyncio event loop on virtual time, so asyncio code (the real QuorumController) runs
inside the deterministic simulator.

The loop never waits: when nothing is ready it jumps its clock to the next timer. With no real
I/O and no threads, the order of callbacks depends only on what was scheduled, so a seed
replays exactly. Nothing may use threads (`run_in_executor`) or sockets on it.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from _typeshed import FileDescriptorLike


class SimulationStalled(RuntimeError):
    """Nothing is ready and no timer is due: every coroutine waits on something that can
    never happen."""


class _VirtualSelector(selectors.BaseSelector):
    """Holds the loop's own wake-up socket and never reports it ready; a wait of `timeout`
    seconds advances the loop's clock by exactly that much."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self._loop = loop
        self._keys: dict[int, selectors.SelectorKey] = {}  # by file descriptor

    def register(
        self, fileobj: FileDescriptorLike, events: int, data: Any = None
    ) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        return key

    def unregister(self, fileobj: FileDescriptorLike) -> selectors.SelectorKey:
        fd = fileobj if isinstance(fileobj, int) else fileobj.fileno()
        return self._keys.pop(fd)

    def select(
        self, timeout: float | None = None
    ) -> list[tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            raise SimulationStalled("the simulation has nothing scheduled")
        self._loop.advance(max(timeout, 0.0))
        return []

    def get_map(self) -> Mapping[FileDescriptorLike, selectors.SelectorKey]:
        return {fd: key for fd, key in self._keys.items()}  # a copy, keyed as the base class's

    def close(self) -> None:
        self._keys.clear()


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._now = 0.0
        super().__init__(_VirtualSelector(self))

    def time(self) -> float:
        return self._now

    def advance(self, seconds: float) -> None:
        self._now += seconds
