"""A consume-transform-produce app, exactly once, as a Kafka EOS application writes it with
confluent-kafka: a read_committed consumer of the input topic, a transactional producer
writing each input record transformed to the output topic, and the consumed offsets sent in
the same transaction (send_offsets_to_transaction), one transaction per batch.

On an abortable error it aborts the transaction and rewinds the consumer to the group's
committed offsets; on a fatal one (fenced, or the producer's state lost) it starts a new
producer with the same transactional.id (init_transactions fences and aborts what the old one
left open) and rewinds; a retriable commit failure is retried. Every FAIL_EVERY-th transaction
fails on purpose after writing, as the app's own processing error would, and is aborted the
same way. Run by tests/integration/test_transactions_eos.py as a process of its own so that a
broker's kill -9 lands wherever the app happens to be:

    python -m tests.integration.eos_app BOOTSTRAP INPUT PARTITIONS OUTPUT GROUP TXN_ID STACKS \
        [BATCH]

It prints `committed N` (N: the sum of the group's committed input offsets) after each
commit, and `abort REASON` / `reinit REASON` on recovery; it stops once a line with the total
number of input records arrives on stdin and every one of them is committed. SIGUSR1 writes
its threads' stacks to the file STACKS (where a librdkafka call hangs); EOS_APP_DEBUG passes
librdkafka debug contexts (such as eos,cgrp,protocol) to its clients."""

from __future__ import annotations

import faulthandler
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)

T = TypeVar("T")
# Up to this many input records per transaction (the BATCH argument): the chaos campaign passes
# more, as its app works off a backlog of ~130,000 records after the heal (~550 records/s with
# 50); the integration test keeps 50, so its few hundred records make FAIL_EVERY's aborts.
BATCH = 50
CALL_TIMEOUT_S = 30
# Every FAIL_EVERY-th transaction fails after its records and offsets are written: the output
# holds aborted records whichever way the broker kills go.
FAIL_EVERY = 7
DEBUG = {"debug": os.environ["EOS_APP_DEBUG"]} if os.environ.get("EOS_APP_DEBUG") else {}
COORDINATOR_MOVING = frozenset({KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_NOT_AVAILABLE,
                                KafkaError.COORDINATOR_LOAD_IN_PROGRESS})
COORDINATOR_RETRY_S = 0.1


class TransformFailed(Exception):
    """The app's own processing failed mid-transaction."""


def say(line: str) -> None:
    print(line, flush=True)


def retry(call: Callable[[], T], deadline_s: float = 60) -> T:
    """A call retried while its failure is a coordinator moving or loading: what librdkafka
    marks retriable (its transactional calls), and the coordinator errors it passes up as
    they are (consumer.committed()'s OffsetFetch answered NOT_COORDINATOR while the group's
    coordinator moves), after COORDINATOR_RETRY_S, as a real application retries them."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except KafkaException as failure:
            error = failure.args[0]
            moving = error.code() in COORDINATOR_MOVING
            if not (error.retriable() or moving) or time.monotonic() > deadline:
                raise
            if moving:
                time.sleep(COORDINATOR_RETRY_S)  # librdkafka looks the coordinator up anew


class App:
    def __init__(self, bootstrap: str, source: str, partitions: int, sink: str, group: str,
                 txn_id: str) -> None:
        self.bootstrap, self.sink, self.txn_id = bootstrap, sink, txn_id
        self.batch = BATCH
        self.partitions = [TopicPartition(source, p) for p in range(partitions)]
        self.consumer = Consumer({
            "bootstrap.servers": bootstrap, "group.id": group,
            "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", **DEBUG})
        self.producer = self.new_producer()
        self.committed: dict[int, int] = {}  # input partition -> its committed offset
        self.transactions = 0
        self.rewind()

    def new_producer(self) -> Producer:
        # connections.max.idle.ms works around librdkafka issue 5511: send_offsets_to_transaction
        # waits for a state change of some broker connection when the cached group coordinator
        # was dropped from Metadata (killed), so it can hang for good once the other
        # connections are steady (its timeout is not applied either: issue 5456). An idle
        # connection closed is such a change: it looks the coordinator up again.
        producer = Producer({"bootstrap.servers": self.bootstrap,
                             "transactional.id": self.txn_id,
                             "transaction.timeout.ms": 20000, "linger.ms": 2,
                             "connections.max.idle.ms": 3000, **DEBUG})
        retry(lambda: producer.init_transactions(CALL_TIMEOUT_S))
        return producer

    def rewind(self) -> None:
        """Resume from the group's committed offsets: what the aborted transactions consumed
        is read again. The read_committed consumer's OffsetFetch asks for stable offsets, so
        an offset still held by an undecided transaction is waited for."""
        committed = retry(lambda: self.consumer.committed(self.partitions, CALL_TIMEOUT_S))
        self.consumer.assign([TopicPartition(t.topic, t.partition,
                                             t.offset if t.offset >= 0 else OFFSET_BEGINNING)
                              for t in committed])
        self.committed = {t.partition: t.offset for t in committed if t.offset >= 0}

    def process(self, batch: list[Message]) -> None:
        """One transaction: the batch transformed, its offsets, the commit."""
        self.producer.begin_transaction()
        for message in batch:
            self.producer.produce(self.sink, key=message.key(),
                                  value=b"transformed " + (message.value() or b""))
        positions = self.consumer.position(self.partitions)
        self.producer.send_offsets_to_transaction(
            positions, self.consumer.consumer_group_metadata(), CALL_TIMEOUT_S)
        self.transactions += 1
        if self.transactions % FAIL_EVERY == 0:
            self.producer.flush(CALL_TIMEOUT_S)  # its records and offsets are written
            raise TransformFailed
        while True:
            try:
                self.producer.commit_transaction(CALL_TIMEOUT_S)
                break
            except KafkaException as failure:
                if not failure.args[0].retriable():
                    raise
        # A partition not read from since the last rewind has no position (-1001), and
        # librdkafka leaves it out of the offsets it sends: its committed offset stands.
        self.committed.update((p.partition, p.offset) for p in positions if p.offset >= 0)
        say(f"committed {self.done}")

    @property
    def done(self) -> int:
        """The sum of the committed input offsets: how many input records are done."""
        return sum(self.committed.values())

    def abort(self, reason: str) -> None:
        """Abort the open transaction (a new producer if the abort fails fatally) and rewind."""
        say(f"abort {reason}")
        try:
            retry(lambda: self.producer.abort_transaction(CALL_TIMEOUT_S))
        except KafkaException as failure:
            if not failure.args[0].fatal():
                raise
            self.reinit(failure.args[0])
            return
        self.rewind()

    def reinit(self, error: KafkaError) -> None:
        say(f"reinit {error.name()}")
        self.producer = self.new_producer()
        self.rewind()

    def run(self, total: list[int]) -> None:
        while not total or self.done < total[0]:
            batch = [m for m in self.consumer.consume(self.batch, timeout=0.2)
                     if m.error() is None]
            if not batch:
                continue
            try:
                self.process(batch)
            except TransformFailed:
                self.abort("transform failed")
            except KafkaException as failure:
                error = failure.args[0]
                if error.fatal():
                    self.reinit(error)
                else:  # abortable, or a failure the app cannot tell apart: abort to be safe
                    self.abort(error.name())
        self.producer.flush(CALL_TIMEOUT_S)
        self.consumer.close()


def main(argv: list[str]) -> int:
    bootstrap, source, partitions, sink, group, txn_id, stacks, *batch = argv
    with open(stacks, "w") as stacks_file:
        faulthandler.register(signal.SIGUSR1, stacks_file, all_threads=True)
        return run(bootstrap, source, partitions, sink, group, txn_id,
                   int(batch[0]) if batch else BATCH)


def run(bootstrap: str, source: str, partitions: str, sink: str, group: str,
        txn_id: str, batch: int = BATCH) -> int:
    app = App(bootstrap, source, int(partitions), sink, group, txn_id)
    app.batch = batch
    total: list[int] = []

    def read_total() -> None:
        line = sys.stdin.readline()
        if line.strip():
            total.append(int(line))

    threading.Thread(target=read_total, daemon=True).start()
    app.run(total)
    say("finished")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
