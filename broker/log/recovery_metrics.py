"""Prometheus metrics of the partition logs' load at start-up, after Kafka's LogManager
beans (kafka.log:type=LogManager remainingLogsToRecover, remainingSegmentsToRecover) with the
`kraft_broker_log_recovery_` prefix, read from the LogLoader's progress at scrape time. They
stay after the load (at 0 left), where Kafka removes them."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.log.log_loader import LogLoader


class RecoveryCollector(Collector):
    def __init__(self, loader: LogLoader) -> None:
        self._loader = loader

    def collect(self) -> Iterator[GaugeMetricFamily]:
        progress = self._loader.progress()
        prefix = "kraft_broker_log_recovery_"
        logs = GaugeMetricFamily(
            prefix + "remaining_logs",
            "Partition logs of the log dir not loaded yet (Kafka's remainingLogsToRecover)",
            labels=["dir"])
        for directory, count in sorted(progress.remaining_logs.items()):
            logs.add_metric([directory], count)
        segments = GaugeMetricFamily(
            prefix + "remaining_segments",
            "Segments the recovery threads check in the logs they are opening now, from each "
            "log's recovery point on; 0 after a clean shutdown (Kafka's "
            "remainingSegmentsToRecover, summed over the dir's threads)", labels=["dir"])
        for directory, count in sorted(progress.remaining_segments.items()):
            segments.add_metric([directory], count)
        yield from (logs, segments)
        yield GaugeMetricFamily(prefix + "loaded_logs",
                                "Partition logs loaded since the broker started",
                                value=progress.loaded_logs)


def register(registry: CollectorRegistry, loader: LogLoader) -> None:
    registry.register(RecoveryCollector(loader))
