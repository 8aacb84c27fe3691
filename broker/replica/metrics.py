"""Prometheus metrics of the data plane, after Kafka's ReplicaManager metrics
(PartitionCount, LeaderCount, UnderReplicatedPartitions, UnderMinIsrPartitionCount,
AtMinIsrPartitionCount, IsrShrinksPerSec, IsrExpandsPerSec), its purgatories' PurgatorySize
and NumDelayedOperations, ReplicationBytesInPerSec and the controller's
OfflinePartitionsCount as this broker's image has it, with the `kraft_broker_` prefix, plus the
committed records an unclean election cut. Read at scrape time: nothing on the hot path
updates them but a counter or two."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.replica.waiters import OPERATIONS
from metadata.controller_metrics import offline_partition_count

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
        yield GaugeMetricFamily(
            "kraft_broker_at_min_isr_partitions",
            "Partitions this broker leads whose ISR is exactly min.insync.replicas: one more "
            "replica out and acks=all is refused (Kafka's AtMinIsrPartitionCount)",
            value=sum(1 for p in leaders if len(p.isr) == manager.min_isr_of(p)))
        yield GaugeMetricFamily(
            "kraft_broker_offline_partitions",
            "Partitions of the cluster with no leader in this broker's metadata image "
            "(Kafka's controller OfflinePartitionsCount, as this broker sees it)",
            value=offline_partition_count(manager.image))
        yield from self._purgatories()
        yield CounterMetricFamily(
            "kraft_broker_replication_bytes_in",
            "Record bytes fetched from leaders and appended as a follower (Kafka's "
            "ReplicationBytesInPerSec)", value=manager.fetchers.replication_bytes_in)
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

    def _purgatories(self) -> Iterator[GaugeMetricFamily]:
        waiters = self.manager.waiters
        delayed = GaugeMetricFamily(
            "kraft_broker_purgatory_delayed_operations",
            "Requests parked: acks=all produces waiting for the ISR, fetches waiting for data "
            "(Kafka's NumDelayedOperations per delayedOperation)", labels=["operation"])
        size = GaugeMetricFamily(
            "kraft_broker_purgatory_size",
            "Partitions the parked requests wait on, a request counted once per partition "
            "(Kafka's PurgatorySize per delayedOperation)", labels=["operation"])
        for operation in OPERATIONS:
            delayed.add_metric([operation], waiters.delayed[operation])
            size.add_metric([operation], waiters.watched[operation])
        yield from (delayed, size)
