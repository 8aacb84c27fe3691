"""Data writers: confluent-kafka producers (acks=all, idempotent) that journal every record the
brokers acknowledged, and consumers (assign(), from offset 0, read_committed) that journal
every record they read and every high watermark they saw. Both outlive any fault: a client
error is journaled and the client goes on (or is replaced, after a fatal one); nothing they
meet stops the campaign.

A record's value is unique (`p<producer>-<seq>`), so a value names one produce call. A record
whose delivery report is an error, or that had no report when the producer was closed, has an
**unknown outcome**: it may be in the log, at most once; an acknowledged one must be there
exactly once, at the offset of its report."""

from __future__ import annotations

import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from metadata.rpc import admin_pb2 as apb
from server.admin_client import AdminClient, CommandError
from tests.chaos.partitions import Ack, Read, Watermark

MIN_INSYNC = 2
REPLICATION = 3
# Records per producer per tick (every TICK_S): ~100 records/s per producer, so six Python
# processes, the metadata writers and the clients share two cores.
PER_TICK = 5
TICK_S = 0.05
MAX_QUEUED = 2_000  # an outage backs records up in the client: stop adding beyond this
# librdkafka's default. A record that times out in the client makes librdkafka bump the producer
# epoch, and the records it is still retrying after an ambiguous answer (possibly written) go
# out again under the new epoch with fresh sequence numbers (its INTRODUCTION.md, "Message
# timeout considerations"; librdkafka 2.3's #4438): a broker deduplicates within an epoch only,
# as Kafka does, so each such bump may write them twice. With 30 s, the data plane's longest
# outages in a 900-s campaign (up to 130 s) did exactly that (seed 408605, docs/chaos.md).
MESSAGE_TIMEOUT_MS = 300_000
# How stale the producers' view of the partition leaders may get: a periodic metadata refresh
# (librdkafka's default is 5 min; it also asks at once after an error, but may be answered
# with the old leader until that one is fenced). The availability bound counts it.
METADATA_REFRESH_MS = 2000
# librdkafka's retry.backoff.max.ms default (2.x): the longest wait between two retries.
RETRY_BACKOFF_MAX_MS = 1000
FLUSH_S = 60.0
# librdkafka's own log lines (every refused connection during a kill) go here, not to stderr;
# the clients' error callbacks journal them as events.
_QUIET = logging.getLogger("tests.chaos.rdkafka")
_QUIET.addHandler(logging.NullHandler())
_QUIET.propagate = False
# The producers log librdkafka's idempotence decisions (debug "eos": a few lines per error or
# epoch change, not per record); the lines that say why the producer epoch changed are
# journaled, since a record written again under a new epoch is the client's doing only when
# its own log says so (checks.client_duplicates).
EPOCH_LINES = ("skipped sequence numbers", "bumped epoch", "message sequence gap",
               "unknown producer id", "message(s) timed out")


class _EpochLines(logging.Handler):
    """Hands the librdkafka lines about producer-epoch changes to `keep`."""

    def __init__(self, keep: Callable[[str], None]) -> None:
        super().__init__(logging.DEBUG)
        self._keep = keep

    def emit(self, record: logging.LogRecord) -> None:
        line = record.getMessage()
        if any(marker in line for marker in EPOCH_LINES):
            self._keep(line)


def value_of(producer: int, seq: int) -> bytes:
    return f"p{producer}-{seq}".encode()


def create_data_topic(client: AdminClient, topic: str, partitions: int) -> bool:
    """CreateTopics with RF 3 and min.insync.replicas=2; True once it exists."""
    request = apb.CreateTopicsRequest(topics=[apb.CreatableTopic(
        name=topic, num_partitions=partitions, replication_factor=REPLICATION,
        configs=[apb.ConfigValue(name="min.insync.replicas", value=str(MIN_INSYNC))])])
    try:
        [result] = client.call("CreateTopics", request).topics
    except CommandError:
        return False
    return result.error_code in (0, 36)  # NONE, TOPIC_ALREADY_EXISTS (an earlier try landed)


def describe_partitions(client: AdminClient, topic: str) -> dict[int, tuple[int, list[int]]]:
    """partition -> (leader, ISR); empty when the topic cannot be described now."""
    try:
        [t] = client.call("DescribeTopics", apb.DescribeTopicsRequest(names=[topic])).topics
    except (CommandError, ValueError):
        return {}
    if t.error_code:
        return {}
    return {p.partition_index: (p.leader, list(p.isr)) for p in t.partitions}


def partition_states(client: AdminClient, topic: str) \
        -> dict[int, tuple[list[int], list[int]]] | None:
    """partition -> (replicas, ISR); None when the topic cannot be described now."""
    try:
        [t] = client.call("DescribeTopics", apb.DescribeTopicsRequest(names=[topic])).topics
    except (CommandError, ValueError):
        return None
    if t.error_code:
        return None
    return {p.partition_index: (sorted(p.replicas), list(p.isr)) for p in t.partitions}


def partition_replicas(client: AdminClient, topic: str) -> dict[int, list[int]]:
    """partition -> its replica set (brokers); empty when the topic cannot be described now."""
    return {p: replicas for p, (replicas, _) in (partition_states(client, topic) or {}).items()}


@dataclass
class ClientEvent:
    who: str
    at_s: float
    what: str


@dataclass
class DataStats:
    sent: int = 0
    acked: int = 0
    failed: int = 0
    unreported: int = 0
    restarts: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class _ClientThread(threading.Thread):
    """A Kafka client of the campaign: its number, where it connects, what it works on, the
    campaign's start time and the event that stops it; and the client events it journals."""

    def __init__(self, role: str, k: int, bootstrap: str, topic: str, partitions: int,
                 t0: float, stop: threading.Event) -> None:
        super().__init__(name=f"chaos-{role}-{k}", daemon=True)
        self.k = k
        self.bootstrap = bootstrap
        self.topic = topic
        self.partitions = partitions
        self.t0 = t0
        self.stop_event = stop
        self.events: list[ClientEvent] = []
        self.error: BaseException | None = None  # what stopped the thread, if anything


class DataProducer(_ClientThread):
    def __init__(self, k: int, bootstrap: str, topic: str, partitions: int, t0: float,
                 stop: threading.Event) -> None:
        super().__init__("producer", k, bootstrap, topic, partitions, t0, stop)
        self.acks: list[Ack] = []
        self.sent: list[bytes] = []
        self.failed: dict[bytes, str] = {}  # value -> the delivery error (unknown outcome)
        self.stats = DataStats()
        self._fatal = False
        # When it sent its first record and when it stopped sending (campaign time): the span
        # in which every partition had records on their way (round-robin, every tick).
        self.started_s: float | None = None
        self.stopped_s: float | None = None
        # librdkafka's lines about its producer epoch (EPOCH_LINES), kept whole and apart
        # from the capped events: the duplicate check reads them.
        self.epoch_lines: list[str] = []
        self._rdkafka = logging.getLogger(f"tests.chaos.rdkafka.producer-{k}")
        self._rdkafka.setLevel(logging.DEBUG)
        self._rdkafka.propagate = False
        self._rdkafka.addHandler(_EpochLines(self._epoch_line))

    def _epoch_line(self, line: str) -> None:
        self.epoch_lines.append(f"{self._now():.3f} s: {line[:400]}")

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _on_error(self, err: KafkaError) -> None:
        if err.fatal():
            self._fatal = True
        self._event(f"error {err.name()}: {err.str()}"[:200])

    def _event(self, what: str) -> None:
        if len(self.events) < 500:
            self.events.append(ClientEvent(f"producer {self.k}", self._now(), what))
        key = what.split(":")[0]
        self.stats.errors[key] = self.stats.errors.get(key, 0) + 1

    def _delivered(self, err: KafkaError | None, msg: object) -> None:
        value = msg.value()  # type: ignore[attr-defined]
        if err is None:
            self.acks.append(Ack(self.k, msg.partition(), msg.offset(),  # type: ignore[attr-defined]
                                 value, self._now()))
            self.stats.acked += 1
        else:
            self.failed[value] = err.name()
            self.stats.failed += 1

    def _producer(self) -> Producer:
        return Producer({
            "bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
            "linger.ms": 5, "compression.type": "none",
            "message.timeout.ms": MESSAGE_TIMEOUT_MS, "reconnect.backoff.max.ms": 1000,
            "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
            "retry.backoff.max.ms": RETRY_BACKOFF_MAX_MS, "error_cb": self._on_error,
            "queue.buffering.max.messages": MAX_QUEUED * 2, "debug": "eos",
            "logger": self._rdkafka,
        })

    def _close(self, producer: Producer, timeout_s: float) -> None:
        """Wait for the outcome of everything sent; what has none by then stays unknown (a
        fatal error of the client raised meanwhile too: journaled, the records left unknown)."""
        self._guarded("flush", lambda: producer.flush(timeout_s))
        left = len(producer)
        if left:
            self.stats.unreported += left
            producer.purge(in_queue=True, in_flight=True, blocking=False)
            # Delivers the purge errors: those records are unknown.
            self._guarded("flush", lambda: producer.flush(0))

    def _guarded(self, what: str, call: Callable[[], object]) -> None:
        """A client call that raises KafkaException once the client is in a fatal state
        (seed 408605, 900 s: librdkafka's _INCONSISTENT "unable to guarantee consistency" in
        the final flush): journaled, and the producer replaced if it is still sending."""
        try:
            call()
        except KafkaException as exc:
            self._event(f"{what} {exc}"[:200])
            error = exc.args[0] if exc.args else None
            if isinstance(error, KafkaError) and error.fatal():
                self._fatal = True

    def run(self) -> None:
        try:
            producer = self._producer()
            seq = 0
            while not self.stop_event.is_set():
                if self._fatal:
                    self._event("fatal error: a new producer")
                    self._close(producer, 5)
                    self.stats.restarts += 1
                    self._fatal = False
                    producer = self._producer()
                if len(producer) < MAX_QUEUED:
                    for _ in range(PER_TICK):
                        value = value_of(self.k, seq)
                        try:
                            producer.produce(self.topic, value=value,
                                             partition=seq % self.partitions,
                                             on_delivery=self._delivered)
                        except BufferError:
                            break
                        except Exception as exc:  # KafkaException on a fatal state
                            self._event(f"produce {type(exc).__name__}: {exc}"[:200])
                            break
                        self.sent.append(value)
                        self.stats.sent += 1
                        if self.started_s is None:
                            self.started_s = self._now()
                        seq += 1
                self._guarded("poll", functools.partial(producer.poll, 0))
                self.stop_event.wait(TICK_S)  # pacing; stop cuts it short
            self.stopped_s = self._now()
            self._close(producer, FLUSH_S)
        except BaseException as exc:  # reported by the campaign, never swallowed
            self.error = exc


class ConsumerStuck(Exception):
    """The client's own threads stopped: no statistics for CONSUMER_STUCK_S."""


# The consumer learns the high watermarks from librdkafka's statistics (the same per-partition
# `hi_offset` get_watermark_offsets(cached=True) reads), not from that call: it holds the GIL
# while it waits for the client's handle lock, and librdkafka 2.16 can deadlock that lock
# against a partition lock when a leader becomes unreachable while an OffsetForLeaderEpoch
# request is in flight (confluentinc/librdkafka#5476) — which froze every thread of a
# 600-s campaign 39 s in. Statistics arrive through consume(), which waits without the GIL.
STATS_INTERVAL_MS = 100
# A deadlocked client sends no statistics: replace it. Closing one hangs too (#5476 is about
# rd_kafka_destroy), so every close runs in a daemon thread and is waited for this long only.
CONSUMER_STUCK_S = 30.0
CLOSE_S = 30.0


class DataConsumer(_ClientThread):
    """Reads every partition from offset 0 with assign(); journals each record and each change
    of the high watermark the client holds for a partition (from its fetch responses, as its
    statistics report them)."""

    def __init__(self, k: int, bootstrap: str, topic: str, partitions: int, t0: float,
                 stop: threading.Event) -> None:
        super().__init__("consumer", k, bootstrap, topic, partitions, t0, stop)
        self.reads: list[Read] = []
        self.watermarks: list[Watermark] = []
        self.restarts = 0
        self._high = dict.fromkeys(range(partitions), -1)
        self._last_stats = time.monotonic()

    def _now(self) -> float:
        return time.monotonic() - self.t0

    def _event(self, what: str) -> None:
        if len(self.events) < 500:
            self.events.append(ClientEvent(f"consumer {self.k}", self._now(), what[:200]))

    def _on_stats(self, text: str) -> None:
        """Journal each partition's high watermark when it changed (called from consume())."""
        self._last_stats = time.monotonic()
        try:
            partitions = json.loads(text)["topics"][self.topic]["partitions"]
        except (ValueError, KeyError, TypeError):
            return  # no statistics for the topic yet
        for p in range(self.partitions):
            hw = partitions.get(str(p), {}).get("hi_offset", -1)
            if isinstance(hw, int) and hw >= 0 and hw != self._high[p]:
                self._high[p] = hw
                self.watermarks.append(Watermark(self.k, p, hw, self._now()))

    def run(self) -> None:
        try:
            position = dict.fromkeys(range(self.partitions), OFFSET_BEGINNING)
            while not self.stop_event.is_set():
                consumer = Consumer({
                    "bootstrap.servers": self.bootstrap,
                    "group.id": f"chaos-reader-{uuid.uuid4()}", "enable.auto.commit": False,
                    "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                    "topic.metadata.refresh.interval.ms": 2000,
                    "reconnect.backoff.max.ms": 1000,
                    "statistics.interval.ms": STATS_INTERVAL_MS, "stats_cb": self._on_stats,
                    "error_cb": lambda err: self._event(f"error {err.name()}: {err.str()}"),
                    "logger": _QUIET,
                })
                self._last_stats = time.monotonic()
                try:
                    consumer.assign([TopicPartition(self.topic, p, o)
                                     for p, o in position.items()])
                    self._consume(consumer, position)
                except ConsumerStuck as exc:
                    self._event(f"consumer stuck, replacing it: {exc}")
                    self.restarts += 1
                except Exception as exc:  # a client failure: journal it, start a new one
                    self._event(f"consumer failed, restarting: {type(exc).__name__}: {exc}")
                    self.restarts += 1
                    self.stop_event.wait(0.5)
                finally:
                    self._close(consumer)
        except BaseException as exc:  # reported by the campaign, never swallowed
            self.error = exc

    def _close(self, consumer: Consumer) -> None:
        closing = threading.Thread(target=consumer.close, daemon=True,
                                   name=f"chaos-close-consumer-{self.k}")
        closing.start()
        closing.join(CLOSE_S)
        if closing.is_alive():  # the client is deadlocked: leave it to the daemon thread
            self._event(f"consumer close hung for {CLOSE_S:g} s (librdkafka#5476): left behind")

    def _consume(self, consumer: Consumer, position: dict[int, int]) -> None:
        while not self.stop_event.is_set():
            batch = consumer.consume(500, 0.2)
            for message in batch:
                if message.error() is not None:
                    if message.error().code() != KafkaError._PARTITION_EOF:
                        self._event(f"message error {message.error().name()}")
                    continue
                p, offset = message.partition(), message.offset()
                if position[p] >= 0 and offset < position[p]:
                    self._event(f"partition {p}: offset {offset} after {position[p] - 1}: "
                                "re-reading")
                self.reads.append(Read(self.k, p, offset, message.value() or b"", self._now()))
                position[p] = offset + 1
            quiet = time.monotonic() - self._last_stats
            if quiet > CONSUMER_STUCK_S:
                raise ConsumerStuck(f"no statistics from the client for {quiet:.0f} s "
                                    "(librdkafka#5476)")


def read_back(bootstrap: str, topic: str, partitions: int,
              timeout_s: float) -> tuple[dict[int, int], dict[int, dict[int, bytes]]]:
    """Each partition's high watermark (asked of its leader) and every record below it, read
    from offset 0 with a fresh consumer: the log the leaders serve after healing. Raises
    AssertionError when the leaders cannot be asked or read within `timeout_s`."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-final-{uuid.uuid4()}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed", "logger": _QUIET})
    deadline = time.monotonic() + timeout_s
    try:
        hws: dict[int, int] = {}
        for p in range(partitions):
            while p not in hws:
                try:
                    _, hws[p] = consumer.get_watermark_offsets(TopicPartition(topic, p),
                                                               timeout=5, cached=False)
                except Exception as exc:
                    if time.monotonic() >= deadline:
                        raise AssertionError(f"partition {p}'s high watermark: {exc}") from exc
        logs: dict[int, dict[int, bytes]] = {p: {} for p in range(partitions)}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        left = {p for p in range(partitions) if hws[p] > 0}
        while left:
            if time.monotonic() >= deadline:
                raise AssertionError("reading back " + ", ".join(
                    f"partition {p} ({len(logs[p])} of {hws[p]})" for p in sorted(left)))
            for message in consumer.consume(1000, 0.5):
                if message.error() is not None:
                    continue
                p = message.partition()
                if message.offset() < hws[p]:
                    logs[p][message.offset()] = message.value() or b""
                if message.offset() >= hws[p] - 1:
                    left.discard(p)
        return hws, logs
    finally:
        consumer.close()
