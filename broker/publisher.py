"""CachePublisher: the MetadataLoader's publisher that feeds the broker's metadata cache.

Every image the loader publishes reaches the cache with the offset it reflects and the Raft
high watermark at that moment, which the broker's metadata service reports so a client can
tell how current an answer is. It times how long images take to build (the broker's
`image_load` histogram).
"""

from __future__ import annotations

import time

from broker.cache import MetadataCache
from broker.metrics import BrokerMetrics
from kraft.client import LeaderAndEpoch, RaftClient
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.loader import LoaderManifest


class CachePublisher:
    def __init__(self, client: RaftClient, cache: MetadataCache, metrics: BrokerMetrics) -> None:
        self.client = client
        self.cache = cache
        self.metrics = metrics
        self.applied_offset = -1  # the last offset replayed (records and control batches)
        self.high_watermark = 0
        self.started_at = time.monotonic()
        # Start to the controller confirming the broker applied its own registration record
        # (set by the role). An observer's own HW is capped by what it has fetched, so it
        # cannot tell by itself when a long log is done.
        self.initial_catch_up_s: float | None = None

    def on_metadata_update(
        self, delta: MetadataDelta | None, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        if delta is not None or manifest.from_snapshot:
            self.metrics.image_load.observe(manifest.elapsed_s)
        self.applied_offset = manifest.next_offset - 1
        self.high_watermark = max(self.high_watermark, self.client.high_watermark())
        self.cache.publish(image, self.applied_offset, self.high_watermark)

    def on_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        pass
