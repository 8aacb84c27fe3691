"""The campaign's consumer learns the high watermarks from librdkafka's statistics (not from
get_watermark_offsets, which holds the GIL while librdkafka#5476 can deadlock the client):
each change of a partition's `hi_offset` is journaled once, with the consumer's time."""

from __future__ import annotations

import json
import threading

from tests.chaos.data import DataConsumer


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
