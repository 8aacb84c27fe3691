"""MetadataLoader: replays committed records from the Raft log into the next immutable image.

Every node runs one (controllers, brokers, tools); it is the only way state changes. It reads
the log between the offset it has applied and the high watermark, skips the Raft's own control
batches, replays each metadata record into a MetadataDelta and publishes the new image. A
record that cannot be decoded or replayed is fatal: every node must reach the same image from
the same log, so continuing would make this node's view silently different.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from kraft.log.base import ReplicatedLog
from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import RecordDecodeError, decode_record

log = logging.getLogger(__name__)

ImageListener = Callable[[MetadataImage], None]


class MetadataLoadError(Exception):
    """A committed record this node cannot apply; the node must stop."""


class MetadataLoader:
    def __init__(self, raft_log: ReplicatedLog, image: MetadataImage = EMPTY_IMAGE) -> None:
        self._log = raft_log
        self.image = image
        self.next_offset = image.provenance.offset + 1
        self._listeners: list[ImageListener] = []

    def subscribe(self, listener: ImageListener) -> None:
        self._listeners.append(listener)

    def catch_up(self, high_watermark: int) -> MetadataImage:
        """Apply every committed record below `high_watermark` not applied yet."""
        if high_watermark <= self.next_offset:
            return self.image
        delta = MetadataDelta(self.image)
        applied = False
        for batch in self._log.batches(self.next_offset, high_watermark):
            if batch.control:
                continue
            for index, data in enumerate(batch.records):
                offset = batch.base_offset + index
                if offset < self.next_offset or offset >= high_watermark:
                    continue
                try:
                    delta.replay(decode_record(data), offset, batch.epoch, batch.max_timestamp_ms)
                except (RecordDecodeError, MetadataReplayError) as exc:
                    raise MetadataLoadError(
                        f"cannot apply the committed record at offset {offset}: {exc}"
                    ) from exc
                applied = True
        self.next_offset = high_watermark
        if applied:
            self.image = delta.apply()
            for listener in self._listeners:
                listener(self.image)
        return self.image
