"""Prometheus metrics, named like Kafka's raft-metrics and etcd's server metrics.

Gauges that mirror the core's state are read at scrape time by a custom collector, so the core
itself stays metric-free; latencies and rates are histograms and counters updated by the driver.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Iterator
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from kraft.core.output import NodeStatus

STATES = ("Unattached", "Voted", "Prospective", "Candidate", "Leader", "Follower", "Resigned")
# etcd's fsync buckets (1 ms .. 8 s) and finer ones for commit and election latency.
FSYNC_BUCKETS = tuple(0.001 * 2**i for i in range(14))
LATENCY_BUCKETS = tuple(0.0001 * 2**i for i in range(20))
# Event-loop lag: 1 ms .. ~16 s; the goal is that nothing stalls the loop for 20 ms.
LOOP_LAG_BUCKETS = (0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.03, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0,
                    5.0, 16.0)
LOOP_LAG_INTERVAL_S = 0.05
# A sample at least this late is logged ("event loop lag N ms"); bench.loop_lag_bench lowers it
# through the environment to see every stall.
LOOP_LAG_LOG_ENV = "KRAFT_LOOP_LAG_LOG_MS"
LOOP_LAG_LOG_MS = 100.0

log = logging.getLogger(__name__)


class ObservedNode(Protocol):
    """What the scrape reads of a node (RaftNode): the metrics know no driver."""

    @property
    def core(self) -> object | None:
        """None until the node starts."""

    @property
    def disk_full(self) -> bool: ...

    def status(self) -> NodeStatus: ...


class _StateCollector(Collector):
    def __init__(self) -> None:
        self.node: ObservedNode | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self.node
        if node is None or node.core is None:
            return
        status = node.status()
        state = GaugeMetricFamily(
            "kraft_current_state", "1 for the node's current Raft state", labels=["state"]
        )
        for name in STATES:
            state.add_metric([name], 1.0 if status.state == name else 0.0)
        yield state
        yield _gauge("kraft_current_leader", "Leader id, -1 when unknown", status.leader_id)
        yield _gauge("kraft_current_epoch", "Current epoch", status.epoch)
        yield _gauge("kraft_current_vote", "Voted-for id in this epoch, -1 if none",
                     status.voted_id)
        yield _gauge("kraft_has_leader", "1 when a leader is known", int(status.leader_id >= 0))
        yield _gauge("kraft_is_leader", "1 when this node leads",
                     int(status.state == "Leader"))
        yield _gauge("kraft_high_watermark", "High watermark", status.high_watermark)
        yield _gauge("kraft_log_end_offset", "Log end offset", status.log_end_offset)
        yield _gauge("kraft_log_flushed_offset", "Durable log end offset",
                     status.flushed_offset)
        yield _gauge("kraft_log_end_epoch", "Epoch of the last log batch", status.last_epoch)
        yield _gauge("kraft_log_disk_full", "1 while flushes are refused for want of space",
                     int(node.disk_full))


def _gauge(name: str, doc: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, value=value)


class RaftMetrics:
    def __init__(self, node_id: int | None, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self._collector = _StateCollector()
        self.registry.register(self._collector)
        self.commit_latency = Histogram(
            "kraft_commit_latency_seconds", "Append to commit, at the leader",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.election_latency = Histogram(
            "kraft_election_latency_seconds", "Leader unknown to leader known",
            buckets=LATENCY_BUCKETS, registry=self.registry,
        )
        self.fsync_duration = Histogram(
            "kraft_log_fsync_duration_seconds", "One group commit: write + fdatasync",
            buckets=FSYNC_BUCKETS, registry=self.registry,
        )
        self.leader_changes = Counter(
            "kraft_leader_changes_seen", "Leader or epoch changes seen", registry=self.registry
        )
        self.records_appended = Counter(
            "kraft_records_appended", "Records appended as leader", registry=self.registry
        )
        self.event_loop_lag = Histogram(
            "kraft_event_loop_lag_seconds",
            "How late a wakeup scheduled every 50 ms fires: the longest the event loop was busy",
            buckets=LOOP_LAG_BUCKETS, registry=self.registry,
        )
        self.records_fetched = Counter(
            "kraft_records_fetched", "Records appended as follower", registry=self.registry
        )
        # Answers without records are the long poll's overhead: a newer high watermark alone,
        # or nothing once the wait ran out (the bench divides them by the writes).
        fetch_answers = Counter(
            "kraft_fetch_answers",
            "Fetch responses sent as leader, by whether they carried records",
            ["carrying"], registry=self.registry,
        )
        self.fetch_answers_with_records = fetch_answers.labels("records")
        self.fetch_answers_without_records = fetch_answers.labels("none")

    def bind(self, node: ObservedNode) -> None:
        self._collector.node = node


class LoopLagSampler:
    """Measures how late the event loop runs a wakeup it scheduled `interval_s` ahead: a
    callback that blocks the loop for 100 ms shows as ~100 ms of lag in one sample. Started by
    `RaftNode.start`. `max_lag_s` is the worst sample seen; `sampled` is set after each."""

    def __init__(self, histogram: Histogram, interval_s: float = LOOP_LAG_INTERVAL_S) -> None:
        self.histogram = histogram
        self.interval_s = interval_s
        self.log_threshold_s = float(
            os.environ.get(LOOP_LAG_LOG_ENV, LOOP_LAG_LOG_MS)) / 1000
        self.max_lag_s = 0.0
        self.samples = 0
        self.sampled = asyncio.Event()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            expected = loop.time() + self.interval_s
            await asyncio.sleep(self.interval_s)
            lag = max(0.0, loop.time() - expected)
            self.histogram.observe(lag)
            if lag >= self.log_threshold_s:
                log.info("event loop lag %.1f ms", lag * 1000)
            self.max_lag_s = max(self.max_lag_s, lag)
            self.samples += 1
            self.sampled.set()
