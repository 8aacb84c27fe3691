"""Prometheus metrics of the log cleaner (Kafka's kafka.log:type=LogCleaner and
LogCleanerManager beans, `kraft_broker_log_cleaner_` prefix), read from its stats at scrape
time."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.log.cleaner import LogCleaner


class CleanerCollector(Collector):
    """Counters and gauges of one LogCleaner."""

    def __init__(self, cleaner: LogCleaner) -> None:
        self._cleaner = cleaner

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        stats = self._cleaner.stats
        prefix = "kraft_broker_log_cleaner_"
        yield CounterMetricFamily(prefix + "cleanings", "Cleanings installed (swapped in)",
                                  value=stats.passes)
        yield CounterMetricFamily(prefix + "aborted_cleanings",
                                  "Cleanings dropped because their log changed meanwhile",
                                  value=stats.aborted)
        yield CounterMetricFamily(prefix + "read_bytes", "Segment bytes read by cleanings",
                                  value=stats.bytes_read)
        yield CounterMetricFamily(prefix + "written_bytes",
                                  "Cleaned segment bytes written", value=stats.bytes_written)
        yield CounterMetricFamily(prefix + "removed_records",
                                  "Records removed (superseded, expired tombstones, keyless)",
                                  value=stats.records_removed)
        yield GaugeMetricFamily(prefix + "last_clean_timestamp_seconds",
                                "Wall-clock time of the last installed cleaning (0: none yet)",
                                value=max(stats.last_clean_ms, 0) / 1000)
        yield GaugeMetricFamily(prefix + "last_clean_duration_seconds",
                                "How long the last installed cleaning took (Kafka's "
                                "max-clean-time-secs, for the last one)",
                                value=stats.last_duration_ms / 1000)
        yield GaugeMetricFamily(prefix + "uncleanable_partitions",
                                "Logs a cleaning failure took out of cleaning until a restart, "
                                "truncation or deletion (Kafka's uncleanable-partitions-count)",
                                value=len(self._cleaner.uncleanable()))


def register(registry: CollectorRegistry, cleaner: LogCleaner) -> None:
    registry.register(CleanerCollector(cleaner))
