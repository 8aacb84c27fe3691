"""MetadataPublisher: committed records -> the shared MetadataLoader -> the metadata cache.

On a broker-only node nothing else drives the loader, so every Raft step that moves the high
watermark makes it replay up to the HW (only committed records). In combined mode the
controller drives the same loader from the same log; the publisher is registered first, so it
does the replay (and times it) and the controller finds the loader already caught up. Either
way each new image reaches the cache through `MetadataLoader.subscribe`, which also covers
images the loader publishes on its own (a snapshot loaded at start-up or on a leader's
redirect).
"""

from __future__ import annotations

import time

from broker.cache import MetadataCache
from broker.metrics import BrokerMetrics
from kraft.core.raft import Output
from kraft.node.raft_node import RaftNode
from metadata.image import MetadataImage
from metadata.loader import MetadataLoader


class MetadataPublisher:
    def __init__(
        self, node: RaftNode, loader: MetadataLoader, cache: MetadataCache, metrics: BrokerMetrics
    ) -> None:
        self.node = node
        self.loader = loader
        self.cache = cache
        self.metrics = metrics
        self.high_watermark = 0
        self.started_at = time.monotonic()
        # Start to the controller confirming the broker applied its own registration record
        # (set by the role). An observer's own HW is capped by what it has fetched, so it
        # cannot tell by itself when a long log is done.
        self.initial_catch_up_s: float | None = None
        loader.subscribe(self._on_image)
        node.add_listener(self._on_raft_output)

    @property
    def applied_offset(self) -> int:
        """The last offset replayed (records and control batches): what heartbeats report."""
        return self.loader.next_offset - 1

    def _on_raft_output(self, out: Output) -> None:
        if out.high_watermark is None and out.snapshot_loaded is None:
            return
        if out.high_watermark is not None:
            self.high_watermark = max(self.high_watermark, out.high_watermark)
        started = time.perf_counter()
        before = self.loader.image
        self.loader.follow(out)  # a MetadataLoadError stops the node
        if self.loader.image is not before:
            self.metrics.image_load.observe(time.perf_counter() - started)
        self.cache.publish(self.loader.image, self.applied_offset, self.high_watermark)

    def _on_image(self, image: MetadataImage) -> None:
        self.cache.publish(image, self.applied_offset, self.high_watermark)
