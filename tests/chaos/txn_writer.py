"""A transactional writer of the chaos campaign, in a process of its own (a librdkafka call
that hangs, or a kill, stays here): a confluent-kafka producer with its own transactional.id
writes transactions of a few records over a few partitions of the transactional topic, one
after another, and aborts every ABORT_EVERY-th on purpose after its records are acknowledged.

    python -m tests.chaos.txn_writer BOOTSTRAP TOPIC PARTITIONS TXN_ID SEED JOURNAL STACKS T0 FIRST

It journals every transaction (txn_journal.py): the records it will produce, that it asks to
commit, the outcome it learned and the offsets of the delivery reports. Recovery as a
Kafka application does it: an abortable error aborts the transaction; a fatal one (fenced, the
producer's state lost) or a commit that never answers starts a new producer with the same
transactional.id (init_transactions fences the old one and aborts what it left open). A line
(or EOF) on stdin stops it after the transaction in progress. SIGUSR1 writes its threads'
stacks to STACKS. T0 is the campaign's time zero on the monotonic clock (shared by the
processes of one machine), so the journal's times are campaign times; FIRST is its first
transaction's number (a writer started again goes on after its journal's last)."""

from __future__ import annotations

import collections
import faulthandler
import json
import logging
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import IO, TypeVar

from confluent_kafka import KafkaError, KafkaException, Producer

from tests.chaos.txn_journal import ABORTED, COMMITTED, UNFINISHED, UNKNOWN, record_value

T = TypeVar("T")
ABORT_EVERY = 5
CALL_TIMEOUT_S = 30.0
# How long a call is retried while librdkafka calls its failure retriable (a coordinator
# moving, a broker down): the longest outages of a campaign are about a minute.
RETRY_S = 90.0
# The coordinator aborts a transaction left open (by a killed writer) after this long.
TRANSACTION_TIMEOUT_MS = 20_000
MAX_ERROR_LINES = 300
CLIENT_LINES = 40
PAUSE_S = 0.05  # between transactions: two cores shared by six nodes and every client


class _Keep(logging.Handler):
    """librdkafka's log lines into a bounded deque, stamped with campaign time."""

    def __init__(self, lines: collections.deque[str], now: Callable[[], float]) -> None:
        super().__init__(logging.DEBUG)
        self.lines, self.now = lines, now

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(f"{self.now():.3f} {record.getMessage()[:300]}")


class Stop(Exception):
    """Told to stop while waiting for the cluster."""


class Writer:
    def __init__(self, bootstrap: str, topic: str, partitions: int, txn_id: str, seed: int,
                 journal: IO[str], t0: float, first: int) -> None:
        self.bootstrap, self.topic, self.txn_id = bootstrap, topic, txn_id
        self.partitions, self.first = partitions, first
        self.rng = random.Random(f"{seed}/{txn_id}/{first}")
        self.journal, self.t0 = journal, t0
        self.stop = threading.Event()
        self.offsets: dict[str, int] = {}
        self.failed: dict[str, str] = {}
        self.producer: Producer | None = None
        self.errors = 0  # the client's error callbacks (journaled up to MAX_ERROR_LINES)
        self.client_lines: collections.deque[str] = collections.deque(maxlen=CLIENT_LINES)
        self.client_log = logging.getLogger(f"chaos.txn_writer.{txn_id}")
        self.client_log.propagate = False
        self.client_log.setLevel(logging.DEBUG)
        self.client_log.addHandler(_Keep(self.client_lines, self.now))

    def note(self, event: str, n: int, **more: object) -> None:
        self.journal.write(json.dumps({"e": event, "txn": n, "t": round(self.now(), 3),
                                       **more}) + "\n")
        self.journal.flush()

    def now(self) -> float:
        return time.monotonic() - self.t0

    def retry(self, call: Callable[[], T]) -> T:
        deadline = time.monotonic() + RETRY_S
        while True:
            try:
                return call()
            except KafkaException as failure:
                error = failure.args[0]
                if not error.retriable() or time.monotonic() > deadline:
                    raise
                if self.stop.is_set() and self.producer is None:
                    raise Stop from failure

    def new_producer(self) -> Producer:
        """A producer with the transactional.id, initialised: it fences its predecessor."""
        self.producer = None
        producer = Producer({
            "bootstrap.servers": self.bootstrap, "transactional.id": self.txn_id,
            "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, "linger.ms": 5,
            "reconnect.backoff.max.ms": 1000, "topic.metadata.refresh.interval.ms": 2000,
            # As eos_app: a dropped coordinator connection is looked up again (librdkafka
            # #5511); costs nothing here.
            "connections.max.idle.ms": 3000,
            # Kill -9 of brokers can leave the client knowing none that is up: librdkafka drops
            # brokers missing from a Metadata answer, and a 60-s smoke run (seed 7) had one
            # writer commit nothing in 110 s with "No brokers available for Transactions (1
            # broker(s) known)". Bootstrap again after 10 s without metadata (default 5 min).
            "metadata.recovery.rebootstrap.trigger.ms": 10_000,
            "error_cb": self.client_error,
            # librdkafka's transaction state changes (a few lines a transaction), the last
            # CLIENT_LINES kept and journaled with a transaction that did not go as planned.
            "debug": "eos", "logger": self.client_log,
        })
        while True:
            try:
                self.retry(lambda: producer.init_transactions(CALL_TIMEOUT_S))
                break
            except KafkaException as failure:  # retried beyond RETRY_S, or refused
                self.note("error", -1, what=f"init_transactions {failure.args[0].name()}")
                if self.stop.is_set():
                    raise Stop from failure
        self.producer = producer
        return producer

    def client_error(self, err: KafkaError) -> None:
        self.errors += 1
        if self.errors <= MAX_ERROR_LINES:
            self.note("error", -1, what=f"{err.name()}: {err.str()}"[:200])

    def delivered(self, err: KafkaError | None, msg: object) -> None:
        value = (msg.value() or b"").decode()  # type: ignore[attr-defined]
        if err is None:
            self.offsets[value] = msg.offset()  # type: ignore[attr-defined]
        else:
            self.failed[value] = err.name()

    def plan(self, n: int) -> list[tuple[int, str]]:
        """A few records over a few partitions, in the order they are produced."""
        parts = self.rng.sample(range(self.partitions), min(self.partitions,
                                                            self.rng.randint(2, 3)))
        return [(self.rng.choice(parts), record_value(self.txn_id, n, i).decode())
                for i in range(self.rng.randint(3, 6))]

    def transaction(self, producer: Producer, n: int) -> tuple[str, str]:
        """One transaction: its outcome and why. KafkaException escapes only when the
        producer must be replaced (the outcome is in the exception's note)."""
        records = self.plan(n)
        self.offsets.clear()
        self.failed.clear()
        self.note("begin", n, records=records)
        asked = False
        try:
            producer.begin_transaction()
            for p, value in records:
                producer.produce(self.topic, value=value.encode(), partition=p,
                                 on_delivery=self.delivered)
            producer.flush(CALL_TIMEOUT_S)  # the delivery reports: offsets
            if n % ABORT_EVERY == ABORT_EVERY - 1:
                self.retry(lambda: producer.abort_transaction(CALL_TIMEOUT_S))
                return ABORTED, "on purpose"
            self.note("commit", n)
            asked = True
            self.retry(lambda: producer.commit_transaction(CALL_TIMEOUT_S))
            return COMMITTED, ""
        except KafkaException as failure:
            error = failure.args[0]
            if error.txn_requires_abort():
                try:
                    self.retry(lambda: producer.abort_transaction(CALL_TIMEOUT_S))
                    return ABORTED, f"abortable {error.name()}"
                except KafkaException as again:
                    error = again.args[0]
            outcome = UNKNOWN if asked else UNFINISHED
            failure.add_note(f"{outcome}:{error.name()}: {error.str()}"[:200])
            raise

    def run(self) -> None:
        producer = self.new_producer()
        n = self.first
        while not self.stop.is_set():
            try:
                outcome, reason = self.transaction(producer, n)
            except KafkaException as failure:
                outcome, reason = failure.__notes__[-1].split(":", 1)
                self.end(n, outcome, reason)
                n += 1
                producer = self.new_producer()
                continue
            self.end(n, outcome, reason)
            n += 1
            self.stop.wait(PAUSE_S)  # pacing; stop cuts it short
        self.note("exit", n)

    def end(self, n: int, outcome: str, reason: str) -> None:
        planned = outcome == COMMITTED or (outcome, reason) == (ABORTED, "on purpose")
        if self.producer is not None:
            try:
                self.producer.poll(0)  # the client's log lines still queued
            except KafkaException:
                pass  # a producer in a fatal state raises it again here: already journaled
        self.note("end", n, outcome=outcome, reason=reason,
                  offsets=sorted(self.offsets.items()), failed=sorted(self.failed.items()),
                  **({} if planned else {"client": list(self.client_lines)}))
        self.client_lines.clear()
        print(f"end {n} {outcome}", flush=True)  # the campaign's supervisor sees progress


def main(argv: list[str]) -> int:
    bootstrap, topic, partitions, txn_id, seed, journal_path, stacks, t0, first = argv
    with open(stacks, "w") as stacks_file, open(journal_path, "a") as journal:
        faulthandler.register(signal.SIGUSR1, stacks_file, all_threads=True)
        writer = Writer(bootstrap, topic, int(partitions), txn_id, int(seed), journal,
                        float(t0), int(first))

        def read_stop() -> None:
            sys.stdin.readline()  # a line or EOF: stop after the transaction in progress
            writer.stop.set()

        threading.Thread(target=read_stop, daemon=True).start()
        try:
            writer.run()
        except Stop:
            writer.note("exit", -1, what="stopped while waiting for the cluster")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
