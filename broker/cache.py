"""MetadataCache: the broker's view of the metadata, replaced whole on every published image.

Readers take `snapshot()` once per request, so an answer never mixes two images. Waiters
(`wait_until`) are woken on every publish: clients and tests wait for an offset or a topic
without polling.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from metadata.image import EMPTY_IMAGE, MetadataImage


@dataclass(frozen=True, slots=True)
class CacheSnapshot:
    image: MetadataImage
    applied_offset: int  # every record below this + 1 was replayed (control batches included)
    high_watermark: int  # the HW the broker knew when it applied them


class MetadataCache:
    def __init__(self) -> None:
        self._snapshot = CacheSnapshot(EMPTY_IMAGE, -1, 0)
        self._changed = asyncio.Event()
        self.published_at = time.monotonic()
        self.images_published = 0
        self.waiters = 0  # requests parked in wait_until (for tests and introspection)

    def snapshot(self) -> CacheSnapshot:
        return self._snapshot

    @property
    def image(self) -> MetadataImage:
        return self._snapshot.image

    def publish(self, image: MetadataImage, applied_offset: int, high_watermark: int) -> None:
        if image is not self._snapshot.image:
            self.images_published += 1
            self.published_at = time.monotonic()
        self._snapshot = CacheSnapshot(image, applied_offset, high_watermark)
        # Wake every waiter; each re-checks its own condition on the new snapshot.
        self._changed.set()
        self._changed = asyncio.Event()

    async def wait_until(
        self, condition: Callable[[CacheSnapshot], bool], timeout_s: float
    ) -> CacheSnapshot:
        """The first snapshot satisfying `condition`, or the current one at the deadline."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        self.waiters += 1
        try:
            while not condition(self._snapshot):
                remaining = deadline - loop.time()
                if remaining <= 0:
                    break
                try:
                    await asyncio.wait_for(self._changed.wait(), remaining)
                except TimeoutError:
                    break
        finally:
            self.waiters -= 1
        return self._snapshot
