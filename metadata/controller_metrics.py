"""Prometheus metrics of the controller, after Kafka's KafkaController metrics
(ActiveControllerCount, OfflinePartitionsCount) with the `kraft_controller_` prefix. Read at
scrape time from the controller's committed image (immutable, so the scrape thread may read
it): nothing on the controller's path updates them.

As in Kafka, only the active controller reports offline partitions; the others report 0, so
a sum over the controllers counts each partition once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from metadata.image import EMPTY_MAP, MetadataImage
from metadata.records import NO_LEADER

if TYPE_CHECKING:
    from metadata.controller import QuorumController


def offline_partition_count(image: MetadataImage) -> int:
    """Partitions with no leader: the image's leader index keeps them under NO_LEADER, so
    this costs one step per topic that has any, not per partition."""
    leaderless = image.topics.leader_index.get(NO_LEADER, EMPTY_MAP)
    return sum(len(partition_ids) for partition_ids in leaderless.values())


class ControllerCollector(Collector):
    def __init__(self, controller: QuorumController, registry: CollectorRegistry) -> None:
        self.controller = controller
        registry.register(self)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        controller = self.controller
        active = controller.is_active
        yield GaugeMetricFamily(
            "kraft_controller_active", "1 on the active controller (Kafka's "
            "ActiveControllerCount)", value=int(active))
        yield GaugeMetricFamily(
            "kraft_controller_offline_partitions",
            "Partitions with no leader in the committed image, on the active controller; 0 "
            "on the others (Kafka's OfflinePartitionsCount)",
            value=offline_partition_count(controller.committed_image) if active else 0)
