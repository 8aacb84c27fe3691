"""Parked requests, woken by the partitions they wait on (Kafka's purgatory, keyed by
partition): an acks=all produce waits for the high watermark, a consumer fetch for the high
watermark, a follower fetch for the log end offset.

Each park names its operation (Kafka's purgatories: "Produce", "Fetch") and is counted, for
the purgatory metrics (broker/replica/metrics.py): `delayed` the requests parked (Kafka's
NumDelayedOperations), `watched` the partitions they wait on (Kafka's PurgatorySize counts a
request once per partition it watches)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Hashable, Iterable, Iterator

PRODUCE = "Produce"
FETCH = "Fetch"
OPERATIONS = (PRODUCE, FETCH)


class Waiters:
    def __init__(self) -> None:
        self._parked: dict[Hashable, list[asyncio.Future[None]]] = {}
        # Told every key notified, parked on or not: the fetch sessions' index of what moved
        # (broker/replica/incremental_fetch.py), so an idle session's fetch reads nothing.
        self.observers: list[Callable[[Hashable], None]] = []
        # Per operation: parked requests and the partitions they watch (read at scrape time).
        self.delayed = dict.fromkeys(OPERATIONS, 0)
        self.watched = dict.fromkeys(OPERATIONS, 0)

    @contextlib.contextmanager
    def counted(self, operation: str, partitions: int) -> Iterator[None]:
        """Count a request parked for `operation` on `partitions` partitions while inside
        (also used by the fetch sessions, which park on their own event)."""
        self.delayed[operation] += 1
        self.watched[operation] += partitions
        try:
            yield
        finally:
            self.delayed[operation] -= 1
            self.watched[operation] -= partitions

    async def wait_any(self, keys: Iterable[Hashable], timeout_s: float,
                       operation: str = FETCH) -> bool:
        """Park until one of `keys` is notified (True) or the timeout passes (False)."""
        if timeout_s <= 0:
            return False
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._parked.setdefault(key, []).append(future)
        try:
            with self.counted(operation, len(keys)):
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
