"""`make demo`'s transactions part (KIP-98, docs/transactions.md), on the demo's running
brokers: a confluent-kafka producer with a transactional.id commits one transaction and aborts
another on the topic `payments`; a read_uncommitted consumer reads the records of both, a
read_committed one only the committed transaction's; `kraft-admin transactions describe`
shows the id at its coordinator. Raises SystemExit when a reader sees something else.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

ROOT = Path(__file__).resolve().parent.parent
TOPIC = "payments"
TXN_ID = "demo-payments"
COMMITTED = [b"payment 1", b"payment 2", b"payment 3"]
ABORTED = [b"payment 4 (aborted)", b"payment 5 (aborted)"]


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def consumer(bootstrap: str, isolation: str) -> Consumer:
    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-{isolation}",
                     "isolation.level": isolation, "enable.auto.commit": False,
                     "enable.partition.eof": True})


def settled(bootstrap: str) -> bool:
    """The partition's last stable offset (ListOffsets, read_committed) has reached its high
    watermark: the abort's marker is written, no transaction is open."""
    ends = []
    for isolation in ("read_committed", "read_uncommitted"):
        reader = consumer(bootstrap, isolation)
        try:
            ends.append(reader.get_watermark_offsets(TopicPartition(TOPIC, 0), 10,
                                                     cached=False)[1])
        finally:
            reader.close()
    return ends[0] == ends[1]


def read(bootstrap: str, isolation: str) -> list[bytes]:
    """The values of `payments` from the start to its end, as a consumer with `isolation`
    reads them (read_committed: to the last stable offset, aborted records dropped)."""
    reader = consumer(bootstrap, isolation)
    reader.assign([TopicPartition(TOPIC, 0, OFFSET_BEGINNING)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            message = reader.poll(0.5)
            if message is None:
                continue
            if message.error() is None:
                values.append(message.value())
            elif message.error().code() == KafkaError._PARTITION_EOF:
                return values
            else:
                raise SystemExit(f"{isolation} read failed: {message.error()}")
    finally:
        reader.close()
    raise SystemExit(f"a {isolation} read did not reach the end of {TOPIC} in 30 s")


def transactions_demo(bootstrap: str, admin_bootstrap: str) -> None:
    banner("Transactions (KIP-98): a transactional producer commits one transaction and "
           "aborts another")
    subprocess.run([sys.executable, "-m", "server.admin_cli", "--bootstrap-server",
                    admin_bootstrap, "topics", "create", "--topic", TOPIC, "--partitions", "1",
                    "--replication-factor", "3", "--config", "min.insync.replicas=2"],
                   check=True, cwd=ROOT)
    started = time.monotonic()
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": TXN_ID})
    producer.init_transactions(60)  # the first one creates __transaction_state
    print(f"init_transactions(): a producer id and epoch from the coordinator "
          f"({time.monotonic() - started:.1f} s, __transaction_state created on first use)")
    producer.begin_transaction()
    for value in COMMITTED:
        producer.produce(TOPIC, value)
    producer.commit_transaction(30)
    print(f"committed: {', '.join(v.decode() for v in COMMITTED)}")
    producer.begin_transaction()
    for value in ABORTED:
        producer.produce(TOPIC, value)
    producer.flush(30)  # in the partition's log before the abort
    producer.abort_transaction(30)
    print(f"aborted (written to the log, then an ABORT marker): "
          f"{', '.join(v.decode() for v in ABORTED)}")
    deadline = time.monotonic() + 30
    while not settled(bootstrap):
        if time.monotonic() > deadline:
            raise SystemExit(f"the abort's marker did not reach {TOPIC} in 30 s")
        time.sleep(0.1)  # poll interval of a bounded condition wait
    everything = read(bootstrap, "read_uncommitted")
    print(f"isolation.level=read_uncommitted reads {len(everything)}: "
          f"{[v.decode() for v in everything]}")
    committed = read(bootstrap, "read_committed")
    print(f"isolation.level=read_committed reads {len(committed)}: "
          f"{[v.decode() for v in committed]}")
    if everything != COMMITTED + ABORTED or committed != COMMITTED:
        raise SystemExit("the transactions were not read as committed and aborted")
    command = ["--bootstrap-server", bootstrap, "transactions", "describe",
               "--transactional-id", TXN_ID]
    print(f"$ kraft-admin {' '.join(command)}", flush=True)
    subprocess.run([sys.executable, "-m", "server.admin_cli", *command], check=True, cwd=ROOT)
