"""The transactional part of a campaign (issue 30): transactional writers (txn_writer.py) and a
consume-transform-produce app (tests/integration/eos_app.py, reading the data topic), each a
process of its own, run through the faults; after healing, once no transaction is open (the
last stable offset of every partition is its high watermark), both topics are read back with
read_committed and read_uncommitted and checked for exactly once (txn_checks.py).

Two librdkafka bugs can hang a transactional client for good: send_offsets_to_transaction
waits forever once the group coordinator it cached was killed (confluentinc/librdkafka#5511),
and its timeout is not applied (#5456). The app works around the first as it does in
test_transactions_eos (connections.max.idle.ms=3000: an idle connection closed makes the
client look the coordinator up again; the writers set it too). Should a client hang all the
same, the supervisor writes its stacks, kills it and starts another with the same
transactional.id (STALL_S): the new one fences the old, which is more for the checks, not less."""

from __future__ import annotations

import collections
import functools
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import IO

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from harness.cluster import ProcessCluster, wait_for
from server.admin_client import AdminClient
from tests.chaos.checks import Check
from tests.chaos.data import create_data_topic, describe_partitions
from tests.chaos.data_phase import Timed
from tests.chaos.txn_checks import check_eos, check_transactions, check_txn_floor
from tests.chaos.txn_journal import (
    ABORTED,
    COMMITTED,
    OUTCOMES,
    Logged,
    Txn,
    next_txn,
    parse_journal,
)
from tests.chaos.txn_writer import TRANSACTION_TIMEOUT_MS

ROOT = Path(__file__).resolve().parents[2]
SETUP_S = 60.0
# A writer finishes the transaction in progress when told to stop: its calls retry for up to
# txn_writer.RETRY_S on the healed cluster. Beyond this it is killed (its stacks kept first).
STOP_S = 120.0
# The app works off its backlog once healed (it read through the faults).
EOS_FINISH_S = 180.0
# A killed writer's open transaction is aborted by its coordinator after
# transaction.timeout.ms, checked every 10 s (transaction.abort.timed.out.transaction.cleanup.
# interval.ms): then no partition has an open transaction.
SETTLE_S = TRANSACTION_TIMEOUT_MS / 1000 + 10 + 60
READ_S = 60.0
# A client process with no progress for this long while the data producers run (the app
# always has input then) is taken for hung: stacks, kill -9, a new process. The longest
# data-plane outages of the campaigns were about a minute (docs/chaos.md, "Availability").
STALL_S = 120.0
EOS_GROUP = "chaos-eos"
# Input records per transaction of the app: it works off a backlog of ~130,000 after the heal
# of a 900-s run within EOS_FINISH_S (at 50, ~550 records/s, it did not).
EOS_BATCH = 500


class Child:
    """A client process of the campaign: started (and started again) from `argv_of(stacks
    file)`, its stdout's last lines kept by a thread and all of it in `<root>/<name>-<start>.log`
    (librdkafka's debug lines too, with EOS_APP_DEBUG set), and its progress (`on_line` sees
    every line). Killed for not stopping or for a stall, it first writes its threads' stacks
    (SIGUSR1; a new file per start, `<root>/<name>-<start>.stacks`)."""

    def __init__(self, name: str, root: Path, argv_of: Callable[[Path], list[str]],
                 on_line: Callable[[str], None] | None = None) -> None:
        self.name, self.root, self.argv_of, self.on_line = name, root, argv_of, on_line
        self.lines: collections.deque[str] = collections.deque(maxlen=20)
        self.restarts = 0
        self.killed: list[str] = []  # each kill: why, and where its stacks are
        self.exits: list[str] = []  # each exit by itself before the end, with its last lines
        self.stacks = root / f"{name}-0.stacks"
        self.process = self._start()

    def _start(self) -> subprocess.Popen[str]:
        self.stacks = self.root / f"{self.name}-{self.restarts}.stacks"
        self.started_at = self.progress_at = time.monotonic()
        process = subprocess.Popen([sys.executable, "-m", *self.argv_of(self.stacks)], cwd=ROOT,
                                   text=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT)
        log = self.root / f"{self.name}-{self.restarts}.log"
        threading.Thread(target=self._follow, args=(process.stdout, log), daemon=True,
                         name=f"chaos-{self.name}-out").start()
        return process

    def _follow(self, out: IO[str], log_path: Path) -> None:
        with log_path.open("w") as log:
            for line in out:
                self.progress_at = time.monotonic()
                self.lines.append(line.rstrip()[:300])
                log.write(line)
                if self.on_line is not None:
                    self.on_line(line.strip())

    def running(self) -> bool:
        return self.process.poll() is None

    def restart(self) -> None:
        self.exits.append(f"exit {self.process.returncode} "
                          f"({'; '.join(list(self.lines)[-3:])})"[:600])
        self.lines.append(f"(exited with {self.process.returncode}: started again)")
        self.restarts += 1
        self.process = self._start()

    def tell(self, line: str) -> None:
        try:
            assert self.process.stdin is not None
            self.process.stdin.write(line + "\n")
            self.process.stdin.flush()
        except (OSError, ValueError):
            pass  # it exited already

    def wait(self, timeout_s: float, why: str) -> bool:
        """True when it exits by itself within `timeout_s`; else its stacks, then kill -9."""
        try:
            self.process.wait(timeout_s)
            return True
        except subprocess.TimeoutExpired:
            self.kill(f"{why} within {timeout_s:g} s")
            return False

    def kill(self, why: str) -> None:
        """Its stacks written (up to 10 s), then kill -9."""
        self.process.send_signal(signal.SIGUSR1)
        try:
            wait_for(lambda: self.stacks.exists() and self.stacks.stat().st_size > 0, 10,
                     f"{self.name}'s stacks")
            where = f"stacks in {self.stacks}"
        except AssertionError:
            where = "wrote no stacks in 10 s"
        self.process.kill()
        self.process.wait()
        self.killed.append(f"{why}: killed, {where}")


def create_topic(client: AdminClient, topic: str, partitions: int) -> None:
    """RF 3, min.insync.replicas 2, every partition led with a full ISR."""
    wait_for(lambda: create_data_topic(client, topic, partitions), SETUP_S, f"topic {topic}")

    def full() -> bool:
        parts = describe_partitions(client, topic)
        return len(parts) == partitions and all(
            leader >= 0 and len(isr) == 3 for leader, isr in parts.values())

    wait_for(full, SETUP_S, f"{topic}'s partitions led, with full ISRs")


def _ends(bootstrap: str, topic: str, partitions: int, isolation: str) -> list[int]:
    """Each partition's end as `isolation` sees it: the LSO (read_committed) or the HW."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-ends-{uuid.uuid4()}",
                         "isolation.level": isolation})
    try:
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), 10, cached=False)[1]
                for p in range(partitions)]
    finally:
        consumer.close()


def settled(bootstrap: str, topic: str, partitions: int) -> bool:
    """No transaction open on `topic`: every partition's LSO is its high watermark."""
    try:
        return (_ends(bootstrap, topic, partitions, "read_committed")
                == _ends(bootstrap, topic, partitions, "read_uncommitted"))
    except Exception:  # a leader not answering yet
        return False


def read_topic(bootstrap: str, topic: str, partitions: int, isolation: str) -> Logged:
    """Every record `isolation` shows, from offset 0 to each partition's end (EOF)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"chaos-read-{uuid.uuid4()}",
                         "isolation.level": isolation, "enable.auto.commit": False,
                         "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    read: Logged = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    try:
        def drained() -> bool:
            for message in consumer.consume(1000, timeout=0.2):
                if message.error() is None:
                    read[message.partition()].append((message.offset(), message.value() or b""))
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
            return len(at_end) == partitions

        wait_for(drained, READ_S, f"a {isolation} read of {topic} to its end", poll_s=0)
    finally:
        consumer.close()
    return read


class TxnPart:
    def __init__(self, cluster: ProcessCluster, root: Path, seed: int, writers: int,
                 partitions: int, eos: bool, eos_input: str, eos_input_partitions: int) -> None:
        self.cluster, self.root, self.seed = cluster, root, seed
        self.n_writers, self.partitions = writers, partitions
        self.topic, self.eos_topic = f"ktxn{seed}", f"keos{seed}"
        self.eos, self.eos_input, self.eos_input_partitions = eos, eos_input, eos_input_partitions
        self.writers: list[Child] = []
        self.app: Child | None = None
        self.app_lines: collections.Counter[str] = collections.Counter()
        self.app_finished = False
        self.app_total: int | None = None  # input records, told once known (after healing)
        self.stopping = threading.Event()  # the writers' end
        self.app_stopping = threading.Event()  # the app's: finished, or given up on
        self.txns: list[Txn] = []
        self.read: dict[str, Logged] = {}
        self.group_offsets: dict[int, int] | None = None
        self.stalls = 0  # client processes killed for a stall (then started again)
        self.problems: list[Check] = []  # what failed before the checks (liveness, reads)

    def txn_id(self, k: int) -> str:
        return f"chaos{self.seed}-txn-{k}"

    def journal(self, k: int) -> Path:
        return self.root / f"txn-writer-{k}.jsonl"

    def setup(self, client: AdminClient) -> None:
        """The topics, and __transaction_state made by a first InitProducerId before any fault:
        created later it would wait for every broker to be up (RF 3), and a campaign's first
        minute may never have them all (the smoke run at seed 5: 30 s of init_transactions)."""
        create_topic(client, self.topic, self.partitions)
        if self.eos:
            create_topic(client, self.eos_topic, self.partitions)
        producer = Producer({"bootstrap.servers": self.cluster.bootstrap_servers(),
                             "transactional.id": f"chaos{self.seed}-setup"})

        def initialised() -> bool:
            try:
                producer.init_transactions(10)
            except KafkaException as failure:
                if failure.args[0].retriable():
                    return False
                raise
            return True

        wait_for(initialised, SETUP_S, "the transaction coordinator (__transaction_state)")

    def _writer_argv(self, k: int, t0: float, stacks: Path) -> list[str]:
        """Its command line; a writer started again numbers on after its journal's last
        transaction."""
        first = next_txn(self.journal(k).read_text().splitlines()
                         if self.journal(k).exists() else [])
        return ["tests.chaos.txn_writer", self.cluster.bootstrap_servers(), self.topic,
                str(self.partitions), self.txn_id(k), str(self.seed), str(self.journal(k)),
                str(stacks), repr(t0), str(first)]

    def _app_argv(self, stacks: Path) -> list[str]:
        return ["tests.integration.eos_app", self.cluster.bootstrap_servers(), self.eos_input,
                str(self.eos_input_partitions), self.eos_topic, EOS_GROUP,
                f"chaos{self.seed}-eos", str(stacks), str(EOS_BATCH)]

    def _app_line(self, line: str) -> None:
        word = line.split(" ", 1)[0]
        self.app_lines[word] += 1
        if word == "abort":
            self.app_lines[line] += 1
        self.app_finished |= word == "finished"

    def start(self, t0: float) -> None:
        self.writers = [Child(f"txn-writer-{k}", self.root,
                              functools.partial(self._writer_argv, k, t0))
                        for k in range(self.n_writers)]
        if self.eos:
            self.app = Child("eos-app", self.root, self._app_argv, self._app_line)
        threading.Thread(target=self._supervise, args=(t0,), daemon=True,
                         name="chaos-txn-supervisor").start()

    def _supervise(self, t0: float) -> None:
        """A client process that exits by itself before the end is started again (a writer
        numbers on after its journal), and so is one that stalls while the data producers run
        (no transaction ended for STALL_S: a writer's `end` lines, the app's output; the
        librdkafka hangs of the module's docstring), after its stacks are written: nothing a
        client meets stops the campaign, and a restart is one more fencing of the
        transactional.id to check."""
        while not self.app_stopping.wait(0.5):  # polling interval of the supervision
            now = time.monotonic()
            for child in self.writers:
                self._look_after(child, self.stopping.is_set(), now)
            if self.app is not None and not self.app_finished:
                self._look_after(self.app, self.app_stopping.is_set(), now)

    def _look_after(self, child: Child, stopping: bool, now: float) -> None:
        if child.running() and not self.stopping.is_set() and now - child.progress_at > STALL_S:
            self.stalls += 1
            child.kill(f"no progress for {now - child.progress_at:.0f} s")
        if not child.running() and not stopping:
            child.restart()
            if child is self.app and self.app_total is not None:
                child.tell(str(self.app_total))

    def stop(self) -> None:
        """The writers are told to finish their transaction in progress and exit."""
        self.stopping.set()
        for child in self.writers:
            child.tell("stop")

    def join(self) -> None:
        """Each writer's exit, waited for up to STOP_S (on the healed cluster)."""
        for child in self.writers:
            child.wait(STOP_S, "did not stop")

    def after_heal(self, timed: Timed, healed: float,
                   inputs: dict[int, dict[int, bytes]] | None) -> None:
        """The app given the input's size and waited for; every transaction settled; both topics
        read back with both isolation levels (while the brokers run)."""
        bootstrap = self.cluster.bootstrap_servers()
        app = self.app
        if app is not None:
            if inputs is not None:
                self.app_total = sum(len(log) for log in inputs.values())
                app.tell(str(self.app_total))
                timed("eos: the app committed every input record", EOS_FINISH_S,
                      lambda: self.app_finished, healed,
                      lambda: f"its last lines: {list(app.lines)[-5:]}")
            self.app_stopping.set()
            app.wait(0 if inputs is None else 10,
                     "no read-back of its input" if inputs is None else "not finished")
        topics = [self.topic, *([self.eos_topic] if self.eos else [])]
        for topic in topics:
            # Timed from here, not from the heal: the app's finish (above) came first.
            ok = timed(f"transactions: every transaction on {topic} settled (LSO = high "
                       "watermark)", SETTLE_S, lambda t=topic: settled(bootstrap, t,
                                                                       self.partitions),
                       time.monotonic(), None)
            if not ok:
                continue
            for isolation in ("read_committed", "read_uncommitted"):
                try:
                    self.read[f"{topic} {isolation}"] = read_topic(bootstrap, topic,
                                                                   self.partitions, isolation)
                except AssertionError as exc:
                    self.problems.append(Check(f"liveness: transactions: {topic} read back "
                                               f"{isolation}", False, str(exc)))
        if self.eos:
            self.group_offsets = self._group_offsets(bootstrap)

    def _group_offsets(self, bootstrap: str) -> dict[int, int] | None:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": EOS_GROUP,
                             "isolation.level": "read_committed", "enable.auto.commit": False})
        asked = [TopicPartition(self.eos_input, p) for p in range(self.eos_input_partitions)]
        def committed() -> list[TopicPartition] | None:
            try:
                return consumer.committed(asked, 10)  # type: ignore[no-any-return]
            except Exception:  # the group's coordinator not answering yet
                return None

        try:
            got = wait_for(committed, SETTLE_S, "the app's committed offsets")
            return {t.partition: max(t.offset, 0) for t in got}
        except AssertionError as exc:
            self.problems.append(Check("liveness: eos: the app's committed offsets", False,
                                       str(exc)[:300]))
            return None
        finally:
            consumer.close()

    def checks(self, inputs: dict[int, dict[int, bytes]] | None) -> list[Check]:
        self.txns = [t for k in range(self.n_writers) for t in parse_journal(
            self.txn_id(k), self.journal(k).read_text().splitlines()
            if self.journal(k).exists() else [])]
        out = [*self.problems, check_txn_floor(self.txns, self.n_writers)]
        committed = self.read.get(f"{self.topic} read_committed")
        if committed is None:
            out.append(Check("transactions: every committed transaction exactly once, in order "
                             "(read_committed)", False, f"no read-back of {self.topic}"))
        else:
            out.extend(check_transactions(self.txns, committed,
                                          self.read.get(f"{self.topic} read_uncommitted")))
        if self.eos:
            output = self.read.get(f"{self.eos_topic} read_committed")
            if inputs is None or output is None or self.group_offsets is None:
                out.append(Check("eos: each input record below the group's committed offsets "
                                 "exactly once in the output (read_committed)", False,
                                 "no read-back of the input, the output or the group's "
                                 "offsets"))
            else:
                out.append(check_eos(inputs, self.group_offsets, output))
        return out

    def counts(self) -> dict[str, object]:
        outcomes = collections.Counter(t.outcome for t in self.txns)
        reasons = collections.Counter(  # why the transactions that did not go as planned
            f"{t.outcome}: {t.reason}" for t in self.txns
            if t.outcome != COMMITTED and (t.outcome, t.reason) != (ABORTED, "on purpose"))
        out: dict[str, object] = {
            "topic": self.topic, "writers": self.n_writers,
            "transactions": {o: outcomes[o] for o in OUTCOMES},
            "abortedOnPurpose": sum(t.outcome == ABORTED and t.reason == "on purpose"
                                    for t in self.txns),
            "records": sum(len(t.records) for t in self.txns),
            "reasons": dict(reasons.most_common(10)),
            "writerRestarts": sum(w.restarts for w in self.writers),
            "killed": {w.name: w.killed for w in self.writers if w.killed},
            "exits": {w.name: w.exits for w in self.writers if w.exits},
            "stalls": self.stalls,
        }
        if self.eos and self.app is not None:
            uncommitted = self.read.get(f"{self.eos_topic} read_uncommitted", {})
            committed = self.read.get(f"{self.eos_topic} read_committed", {})
            out["eos"] = {
                "topic": self.eos_topic, "input": self.eos_input,
                "committedTransactions": self.app_lines["committed"],
                "aborts": self.app_lines["abort"], "reinits": self.app_lines["reinit"],
                "abortReasons": {k: n for k, n in self.app_lines.items()
                                 if k.startswith("abort ")},
                "finished": self.app_finished, "restarts": self.app.restarts,
                "killed": self.app.killed, "exits": self.app.exits,
                "outputRecords": sum(len(v) for v in committed.values()),
                "abortedOutputRecords": sum(len(v) for v in uncommitted.values())
                - sum(len(v) for v in committed.values()),
                "groupOffsets": self.group_offsets, "lastLines": list(self.app.lines)[-5:],
            }
        return out

    def kill(self) -> None:
        """On the campaign's way out (an error too): no client process outlives it."""
        self.stopping.set()
        self.app_stopping.set()
        for child in [*self.writers, *([self.app] if self.app is not None else [])]:
            if child.process.poll() is None:
                child.process.kill()
                child.process.wait()
