"""Prometheus metrics of the Kafka listeners, after Kafka's RequestMetrics and
BrokerTopicStats, with the `kraft_broker_` prefix:

* `kraft_broker_request_latency_seconds{api}`: a request's decode to its answer, per API
  (Kafka's TotalTimeMs, without the send; its `_count` is Kafka's RequestsPerSec). Fetch is
  split as Kafka splits it, FetchConsumer and FetchFollower, so followers' long polls do not
  hide consumers' latency. Labels are API names only: bounded.
* `kraft_broker_request_failures{api}`: handlers that raised (the connection is closed).
* `kraft_broker_bytes_in{topic}` / `messages_in{topic}`: client produce appended (Kafka's
  BytesInPerSec, MessagesInPerSec); `bytes_out{topic}`: records answered to consumers
  (BytesOutPerSec); `replication_bytes_out`: records answered to followers
  (ReplicationBytesOutPerSec, all topics as in Kafka). A topic's series go when the topic
  leaves the metadata image, as Kafka removes a deleted topic's metrics.

The hot path adds to a dict (TopicStats); the scrape reads it.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from broker.api import FetchPartitionResult
from broker.kafka.versions import ApiKey
from metadata.image import MetadataImage

# 0.5 ms .. 30 s in 14 buckets: a produce answered from memory up to a long poll that ran out.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                   5.0, 30.0)
_RECORDS_COUNT = struct.Struct(">i")  # a v2 batch header's record count, at byte 57
FETCH_CONSUMER = "FetchConsumer"
FETCH_FOLLOWER = "FetchFollower"


@functools.cache
def api_name(api_key: int) -> str:
    """Kafka's request name: ApiKey.LIST_OFFSETS -> "ListOffsets"."""
    try:
        return "".join(part.capitalize() for part in ApiKey(api_key).name.split("_"))
    except ValueError:
        return str(api_key)


def batch_records(records: bytes) -> int:
    """The record count in a v2 batch's header (no record is parsed)."""
    return int(_RECORDS_COUNT.unpack_from(records, 57)[0])


class TopicStats:
    """Kafka's BrokerTopicStats for client traffic, as running totals."""

    def __init__(self) -> None:
        self.bytes_in: dict[str, int] = {}
        self.messages_in: dict[str, int] = {}
        self.bytes_out: dict[str, int] = {}
        self.replication_bytes_out = 0

    def produced(self, topic: str, records: bytes) -> None:
        """One partition's batch appended by a client produce."""
        self.bytes_in[topic] = self.bytes_in.get(topic, 0) + len(records)
        self.messages_in[topic] = self.messages_in.get(topic, 0) + batch_records(records)

    def fetched(self, follower: bool,
                answers: Iterable[tuple[str | None, FetchPartitionResult]]) -> None:
        """A fetch's answer: (topic, result) per partition it carries."""
        if follower:
            self.replication_bytes_out += sum(len(result.records) for _, result in answers)
            return
        out = self.bytes_out
        for topic, result in answers:
            if result.records and topic is not None:
                out[topic] = out.get(topic, 0) + len(result.records)


class _TopicStatsCollector(Collector):
    def __init__(self, stats: TopicStats, image: Callable[[], MetadataImage]) -> None:
        self.stats = stats
        self.image = image

    def collect(self) -> Iterator[CounterMetricFamily]:
        image = self.image()
        stats = self.stats
        for name, kafka_name, help_text, totals in (
            ("kraft_broker_bytes_in", "BytesInPerSec",
             "Record bytes clients produced and this broker appended as leader",
             stats.bytes_in),
            ("kraft_broker_messages_in", "MessagesInPerSec",
             "Records clients produced and this broker appended as leader", stats.messages_in),
            ("kraft_broker_bytes_out", "BytesOutPerSec",
             "Record bytes this broker answered to consumers' fetches", stats.bytes_out),
        ):
            family = CounterMetricFamily(name, f"{help_text} (Kafka's {kafka_name})",
                                         labels=["topic"])
            for topic, total in totals.copy().items():  # copy: the event loop adds meanwhile
                if image.topic(topic) is None:
                    totals.pop(topic, None)  # deleted: its series goes
                else:
                    family.add_metric([topic], total)
            yield family
        yield CounterMetricFamily(
            "kraft_broker_replication_bytes_out",
            "Record bytes this broker answered to followers' fetches (Kafka's "
            "ReplicationBytesOutPerSec)", value=stats.replication_bytes_out)


class RequestMetrics:
    def __init__(self, registry: CollectorRegistry, image: Callable[[], MetadataImage]) -> None:
        self.latency = Histogram(
            "kraft_broker_request_latency_seconds",
            "A Kafka request's decode to its answer, per API (Kafka's RequestMetrics "
            "TotalTimeMs; _count is its RequestsPerSec)",
            ["api"], buckets=LATENCY_BUCKETS, registry=registry)
        self.failures = Counter(
            "kraft_broker_request_failures",
            "Kafka requests whose handler failed (the connection is closed)", ["api"],
            registry=registry)
        self.topics = TopicStats()
        self._latency_by_api: dict[str, Histogram] = {}  # labels() resolved once per API
        registry.register(_TopicStatsCollector(self.topics, image))

    def observe(self, api: str, seconds: float) -> None:
        child = self._latency_by_api.get(api)
        if child is None:
            child = self._latency_by_api[api] = self.latency.labels(api)
        child.observe(seconds)

    def failed(self, api: str) -> None:
        self.failures.labels(api).inc()
