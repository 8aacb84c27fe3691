"""The campaign's Kafka clients against librdkafka's failure modes: the consumer learns the
high watermarks from librdkafka's statistics (not from get_watermark_offsets, which holds the
GIL while librdkafka#5476 can deadlock the client), each change of a partition's `hi_offset`
journaled once; a fatal error the producer's client raises is journaled, not fatal to the
campaign."""

from __future__ import annotations

import json
import threading

import pytest
from confluent_kafka import KafkaError, KafkaException

from tests.chaos.data import DataConsumer, DataProducer


def _stats(topic: str, his: dict[int, int]) -> str:
    return json.dumps({"name": "c", "topics": {topic: {"partitions": {
        **{str(p): {"partition": p, "hi_offset": hi} for p, hi in his.items()},
        "-1": {"partition": -1, "hi_offset": -1}}}}})


def test_each_change_of_a_high_watermark_is_journaled_once() -> None:
    consumer = DataConsumer(0, "127.0.0.1:1", "kdata1", 3, 0.0, threading.Event())
    consumer._on_stats(json.dumps({"name": "c", "topics": {}}))  # before the first fetch
    consumer._on_stats(_stats("kdata1", {0: -1, 1: 5, 2: 0}))
    consumer._on_stats(_stats("kdata1", {0: 3, 1: 5, 2: 0}))
    consumer._on_stats(_stats("other", {0: 99}))
    consumer._on_stats("not json")
    assert [(w.partition, w.high) for w in consumer.watermarks] == [(1, 5), (2, 0), (0, 3)]
    assert all(w.consumer == 0 and w.at_s > 0 for w in consumer.watermarks)


def test_a_fatal_error_raised_by_the_client_replaces_the_producer() -> None:
    """librdkafka raised _INCONSISTENT ("unable to guarantee consistency") from the final
    flush of a 900-s campaign, which broke it: now it is journaled and marks the producer for
    replacement."""
    producer = DataProducer(0, "127.0.0.1:1", "kdata1", 3, 0.0, threading.Event())
    fatal = KafkaError(KafkaError._INCONSISTENT, "unable to guarantee consistency", fatal=True)

    def flush() -> None:
        raise KafkaException(fatal)

    producer._guarded("flush", flush)
    assert producer._fatal and "unable to guarantee consistency" in producer.events[0].what
    with pytest.raises(ValueError):
        producer._guarded("poll", lambda: int("x"))  # anything else is the campaign's bug
