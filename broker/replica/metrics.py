"""Prometheus metrics of the data plane, after Kafka's ReplicaManager metrics
(PartitionCount, LeaderCount, UnderReplicatedPartitions, UnderMinIsrPartitionCount,
IsrShrinksPerSec, IsrExpandsPerSec) with the `kraft_broker_` prefix, plus the committed
records an unclean election cut. Read at scrape time: nothing on the hot path updates them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from broker.replica.manager import ReplicaManager


class DataPlaneCollector(Collector):
    def __init__(self, manager: ReplicaManager, registry: CollectorRegistry) -> None:
        self.manager = manager
        registry.register(self)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        manager = self.manager
        partitions = list(manager.partitions.values())
        leaders = [p for p in partitions if p.is_leader]
        yield GaugeMetricFamily("kraft_broker_partitions",
                                "Partition replicas this broker holds", value=len(partitions))
        yield GaugeMetricFamily("kraft_broker_leader_partitions",
                                "Partitions this broker leads", value=len(leaders))
        yield GaugeMetricFamily(
            "kraft_broker_under_replicated_partitions",
            "Partitions this broker leads whose ISR is smaller than their replica set",
            value=sum(1 for p in leaders if len(p.isr) < len(p.replicas)))
        yield GaugeMetricFamily(
            "kraft_broker_under_min_isr_partitions",
            "Partitions this broker leads whose ISR is below min.insync.replicas (acks=all "
            "produce is refused with NOT_ENOUGH_REPLICAS)",
            value=sum(1 for p in leaders if len(p.isr) < manager.min_isr_of(p)))
        yield CounterMetricFamily("kraft_broker_isr_shrinks",
                                  "ISR shrinks this broker committed as a partition leader",
                                  value=manager.isr.shrinks_committed)
        yield CounterMetricFamily("kraft_broker_isr_expands",
                                  "ISR expansions this broker committed as a partition leader",
                                  value=manager.isr.expands_committed)
        yield CounterMetricFamily(
            "kraft_broker_truncated_records",
            "Records cut by truncation to the leader's log (uncommitted ones after a leader "
            "change, and committed ones below)", value=manager.records_truncated)
        yield CounterMetricFamily(
            "kraft_broker_truncated_committed_records",
            "Records below the high watermark cut by truncation: lost to an unclean election",
            value=manager.records_lost)
