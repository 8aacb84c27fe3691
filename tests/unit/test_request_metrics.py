"""The Kafka front's request and topic traffic metrics (broker/kafka/request_metrics.py),
read from a registry after requests went through KafkaApis against an in-memory data plane."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from broker.api import FetchParams, FetchPartitionResult
from broker.kafka.apis import KafkaApis
from broker.kafka.request_metrics import RequestMetrics, api_name, batch_records
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.image import MetadataImage
from tests.unit.test_kafka_apis import CLUSTER, Front, fetch, image, metadata, produce_errors
from tests.unit.test_kafka_fakes import batch_header


class Measured(Front):
    def __init__(self) -> None:
        super().__init__()
        self.registry = CollectorRegistry()
        self.image: MetadataImage = image()
        self.metrics = RequestMetrics(self.registry, lambda: self.image)
        self.apis = KafkaApis(self.plane, image, CLUSTER, metrics=self.metrics)

    def sample(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, labels)

    def requests(self, api: str) -> float | None:
        return self.sample("kraft_broker_request_latency_seconds_count", api=api)


def test_api_names_are_kafkas() -> None:
    assert api_name(ApiKey.LIST_OFFSETS) == "ListOffsets"
    assert api_name(ApiKey.OFFSET_FOR_LEADER_EPOCH) == "OffsetForLeaderEpoch"
    assert api_name(ApiKey.API_VERSIONS) == "ApiVersions"
    assert batch_records(batch_header(records=7)) == 7


def test_latency_is_observed_per_api_and_fetch_split_by_consumer_and_follower() -> None:
    front = Measured()
    assert front.requests("Metadata") is None
    metadata(front, 12)
    metadata(front, 12)
    assert front.requests("Metadata") == 2
    assert front.requests("Produce") is None
    fetch(front, 12, [(0, 0)])
    assert front.requests("FetchConsumer") == 1
    assert front.requests("FetchFollower") is None
    fetch(front, 12, [(0, 0)], replica=(2, -1))
    assert front.requests("FetchFollower") == 1
    # Every observation is in a bucket no wider than the slowest answer allows.
    assert front.sample("kraft_broker_request_latency_seconds_bucket", api="Metadata",
                        le="30.0") == 2


def test_a_failed_handler_is_counted_and_timed() -> None:
    front = Measured()

    async def broken(params: FetchParams) -> list[FetchPartitionResult]:
        raise RuntimeError("disk on fire")

    front.plane.fetch = broken  # type: ignore[method-assign]
    try:
        fetch(front, 12, [(0, 0)])
    except RuntimeError:
        pass
    else:
        raise AssertionError("the handler's failure was swallowed")
    assert front.sample("kraft_broker_request_failures_total", api="FetchConsumer") == 1
    assert front.requests("FetchConsumer") == 1


def test_bytes_and_messages_in_count_what_clients_produced_and_the_leader_appended() -> None:
    front = Measured()
    first, second = batch_header(records=3), batch_header(records=1, extra=0)
    assert produce_errors(front, 9, -1, {0: first, 1: second}) == {0: (0, 0), 1: (0, 0)}
    assert front.sample("kraft_broker_bytes_in_total", topic="t") == len(first) + len(second)
    assert front.sample("kraft_broker_messages_in_total", topic="t") == 4
    # Refused by the leader (nothing appended) or by the front's checks: not counted.
    front.plane.produce_errors[("t", 2)] = Errors.NOT_LEADER_OR_FOLLOWER
    produce_errors(front, 9, -1, {2: batch_header(records=5)})
    produce_errors(front, 3, -1, {0: batch_header(codec=4)})  # zstd before v7
    assert front.sample("kraft_broker_messages_in_total", topic="t") == 4
    assert front.requests("Produce") == 3


def test_bytes_out_per_topic_for_consumers_and_replication_bytes_out_for_followers() -> None:
    front = Measured()
    records = batch_header(records=2)
    produce_errors(front, 9, 1, {0: records})
    assert front.sample("kraft_broker_bytes_out_total", topic="t") is None
    fetch(front, 12, [(0, 0), (1, 0)])
    assert front.sample("kraft_broker_bytes_out_total", topic="t") == len(records)
    assert front.sample("kraft_broker_replication_bytes_out_total") == 0
    fetch(front, 12, [(0, 0)], replica=(2, -1))
    end = front.plane.partitions[("t", 0)].log_end
    fetch(front, 12, [(0, end)], replica=(2, -1))  # at the log end: nothing to send
    assert front.sample("kraft_broker_replication_bytes_out_total") == len(records)
    assert front.sample("kraft_broker_bytes_out_total", topic="t") == len(records)
    # A deleted topic's series go, as Kafka removes its metrics.
    front.image = MetadataImage()
    assert front.sample("kraft_broker_bytes_out_total", topic="t") is None
    assert front.sample("kraft_broker_bytes_in_total", topic="t") is None


def test_without_metrics_nothing_is_measured() -> None:
    front: Any = Front()
    assert produce_errors(front, 9, -1, {0: batch_header()}) == {0: (0, 0)}
