"""Prometheus metrics of the broker role, next to the node's `kraft_*` Raft metrics.

Named after Kafka's broker metadata metrics (`last-applied-record-offset`,
`last-applied-record-lag-ms`, `metadata-load-time`), with the `kraft_broker_` prefix. Gauges
are read at scrape time from the role, so nothing on the hot path updates them. The client
quotas' throttles per quota type (Kafka's throttle-time sensors, summed over clients) are read
from the quota managers the same way.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.quotas import ClientQuotas
from broker.state import BrokerState

# 0.1 ms .. ~52 s: one record's delta up to a cold load of a big log.
LOAD_BUCKETS = tuple(0.0001 * 2**i for i in range(20))
STATES = (
    BrokerState.STARTING,
    BrokerState.RECOVERY,
    BrokerState.RUNNING,
    BrokerState.PENDING_CONTROLLED_SHUTDOWN,
    BrokerState.SHUTTING_DOWN,
)


@dataclass(frozen=True)
class BrokerSample:
    state: BrokerState
    applied_offset: int
    high_watermark: int
    last_record_timestamp_ms: int  # -1: nothing applied yet
    initial_catch_up_s: float | None


class _Collector(Collector):
    def __init__(self) -> None:
        self.source: Callable[[], BrokerSample] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.source is None:
            return
        s = self.source()
        state = GaugeMetricFamily(
            "kraft_broker_state", "1 for the broker's current state", labels=["state"])
        for candidate in STATES:
            state.add_metric([candidate.label], 1.0 if s.state is candidate else 0.0)
        yield state
        yield GaugeMetricFamily(
            "kraft_broker_last_applied_offset",
            "Offset of the last metadata log entry replayed into the broker's image",
            value=s.applied_offset)
        yield GaugeMetricFamily(
            "kraft_broker_metadata_lag_records",
            "Committed metadata log entries not yet in the broker's image (HW - applied - 1)",
            value=max(0, s.high_watermark - s.applied_offset - 1))
        lag_ms = 0.0
        if s.last_record_timestamp_ms >= 0:
            lag_ms = max(0.0, time.time() * 1000 - s.last_record_timestamp_ms)
        yield GaugeMetricFamily(
            "kraft_broker_metadata_lag_ms",
            "Now minus the append time of the last record applied (Kafka's "
            "last-applied-record-lag-ms; NoOps keep it below the idle interval when caught up)",
            value=lag_ms)
        if s.initial_catch_up_s is not None:
            yield GaugeMetricFamily(
                "kraft_broker_initial_catch_up_seconds",
                "Start of the process to the controller confirming it applied its registration",
                value=s.initial_catch_up_s)


class _QuotaCollector(Collector):
    def __init__(self, quotas: ClientQuotas) -> None:
        self.quotas = quotas

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        managers = self.quotas.managers
        throttled = CounterMetricFamily(
            "kraft_broker_client_quota_throttled",
            "Answers throttled by a client quota, by the quota that set the throttle",
            labels=["quota"])
        seconds = CounterMetricFamily(
            "kraft_broker_client_quota_throttle_seconds",
            "Throttle time given by a client quota (the client's connection muted that long)",
            labels=["quota"])
        sensors = GaugeMetricFamily(
            "kraft_broker_client_quota_sensors",
            "Users and client ids whose rate a client quota is measuring", labels=["quota"])
        for manager in managers:
            throttled.add_metric([manager.key], manager.throttled)
            seconds.add_metric([manager.key], manager.throttle_time_ms / 1000)
            sensors.add_metric([manager.key], manager.sensors)
        yield from (throttled, seconds, sensors)


class BrokerMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._collector = _Collector()
        self.registry.register(self._collector)
        self.image_load = Histogram(
            "kraft_broker_image_load_seconds",
            "Replaying newly committed records into the next image (one per published image)",
            buckets=LOAD_BUCKETS, registry=self.registry)

    def bind(self, source: Callable[[], BrokerSample]) -> None:
        self._collector.source = source

    def bind_quotas(self, quotas: ClientQuotas) -> None:
        self.registry.register(_QuotaCollector(quotas))
