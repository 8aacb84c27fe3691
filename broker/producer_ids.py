"""ProducerIdManager: cluster-unique producer ids for InitProducerId, a block at a time.

Kafka's RPCProducerIdManager: ids come from blocks the active controller hands out
(AllocateProducerIds, 1000 ids each); once 90% of the current block is used the next one is
fetched in the background, so a steady stream of InitProducerId calls never waits for the
controller. Blocks only move forward; a block that does not is refused rather than used.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

PREFETCH_AT = 0.9  # Kafka's PID_PREFETCH_THRESHOLD


class ProducerIdManager:
    def __init__(
        self,
        allocate: Callable[[], Awaitable[tuple[int, int]]],
        prefetch_at: float = PREFETCH_AT,
    ) -> None:
        """`allocate()` returns a new block as (first id, count), e.g.
        BrokerLifecycleManager.allocate_producer_ids."""
        self._allocate = allocate
        self._prefetch_at = prefetch_at
        self._next = 0
        self._end = 0  # the current block is [.., end); empty at first
        self._prefetch_from = 0  # fetch the next block once _next reaches this
        self._ready: tuple[int, int] | None = None  # the next block, fetched ahead
        self._fetching: asyncio.Task[None] | None = None

    async def next_producer_id(self) -> int:
        """A producer id no broker of the cluster ever handed out before. Waits for a block
        only when the current one is used up and the next has not arrived; a failed fetch
        raises here (ConnectionError, ...) and the next call tries again."""
        while True:
            if self._next < self._end:
                producer_id = self._next
                self._next += 1
                if self._next >= self._prefetch_from:
                    self._fetch_next()
                return producer_id
            if self._ready is not None:
                first, count = self._ready
                self._ready = None
                self._next, self._end = first, first + count
                self._prefetch_from = first + max(1, int(count * self._prefetch_at))
                continue
            self._fetch_next()
            assert self._fetching is not None
            # Shielded: a caller that gives up must not cancel the fetch the others wait for.
            await asyncio.shield(self._fetching)

    def _fetch_next(self) -> None:
        if self._fetching is None and self._ready is None:
            self._fetching = asyncio.ensure_future(self._fetch())
            self._fetching.add_done_callback(_log_failure)

    async def _fetch(self) -> None:
        try:
            first, count = await self._allocate()
            if count <= 0 or first < max(self._end, 0):
                raise RuntimeError(
                    f"producer id block [{first}, {first + count}) does not follow the "
                    f"current block, which ends at {self._end}")
            self._ready = (first, count)
        finally:
            self._fetching = None


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        log.warning("fetching producer ids failed: %s", task.exception())
