"""Parked requests, woken by the partitions they wait on (Kafka's purgatory, keyed by
partition): an acks=all produce waits for the high watermark, a consumer fetch for the high
watermark, a follower fetch for the log end offset."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable, Iterable


class Waiters:
    def __init__(self) -> None:
        self._parked: dict[Hashable, list[asyncio.Future[None]]] = {}
        # Told every key notified, parked on or not: the fetch sessions' index of what moved
        # (broker/replica/incremental_fetch.py), so an idle session's fetch reads nothing.
        self.observers: list[Callable[[Hashable], None]] = []

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float) -> bool:
        """Park until one of `keys` is notified (True) or the timeout passes (False)."""
        if timeout_s <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._parked.setdefault(key, []).append(future)
        try:
            await asyncio.wait_for(asyncio.shield(future), timeout_s)
            return True
        except TimeoutError:
            return False
        finally:
            for key in keys:
                parked = self._parked.get(key)
                if parked is not None:
                    try:
                        parked.remove(future)
                    except ValueError:
                        pass
                    if not parked:
                        del self._parked[key]

    def notify(self, key: Hashable) -> None:
        for observer in self.observers:
            observer(key)
        parked = self._parked.pop(key, None)
        if parked:
            for future in parked:
                if not future.done():
                    future.set_result(None)

    def __len__(self) -> int:
        return sum(len(p) for p in self._parked.values())
