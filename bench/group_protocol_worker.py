"""The client processes of bench.group_protocol_bench, each its own `python -m` process so the
group members' polling and rebalance callbacks never share an interpreter (or the GIL) with
another member, the producer or the bench:

    python -m bench.group_protocol_worker produce BOOTSTRAP TOPIC PARTITIONS RATE
    python -m bench.group_protocol_worker consume BOOTSTRAP TOPIC GROUP PROTOCOL HEARTBEAT_MS OUT

`produce` feeds every partition in turn at RATE records/s in total (CreateTime timestamps).
`consume` joins GROUP with PROTOCOL (`consumer`: KIP-848, the coordinator's assignor and
heartbeat interval; `range` or `cooperative-sticky`: the classic protocol with that assignor and
heartbeat.interval.ms HEARTBEAT_MS) and appends to OUT, one line
each: `S t` when it subscribed, `A t p,p` / `R t p,p` for partitions assigned / revoked or
lost, `C t partition offset timestamp_ms` per record read (t: time.time() on receipt), `X t`
after it left the group. SIGTERM stops either: the consumer closes (committing and leaving)."""

from __future__ import annotations

import signal
import sys
import time
from types import FrameType
from typing import Any, TextIO

from confluent_kafka import Consumer, Producer, TopicPartition

SESSION_MS = 10000  # classic session.timeout.ms (group.min.session.timeout.ms is 6000)
TICK_S = 0.01  # the producer sends RATE/100 records every 10 ms

stopping = False


def _stop(_signum: int, _frame: FrameType | None) -> None:
    global stopping
    stopping = True


def produce(bootstrap: str, topic: str, partitions: int, rate: float) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    sent = 0
    start = time.monotonic()
    while not stopping:
        due = int((time.monotonic() - start) * rate)
        while sent < due:
            producer.produce(topic, value=b"x", partition=sent % partitions)
            sent += 1
        producer.poll(0)
        time.sleep(TICK_S)  # pacing of the load, not a synchronisation
    producer.flush(10)


def consumer_settings(bootstrap: str, group: str, protocol: str,
                      heartbeat_ms: int) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "latest",
        "enable.auto.commit": True, "auto.commit.interval.ms": 1000}
    if protocol == "consumer":
        settings["group.protocol"] = "consumer"  # session and heartbeat: the coordinator's
    else:
        settings.update({"partition.assignment.strategy": protocol,
                         "heartbeat.interval.ms": heartbeat_ms,
                         "session.timeout.ms": max(SESSION_MS, 3 * heartbeat_ms)})
    return settings


def consume(bootstrap: str, topic: str, group: str, protocol: str, heartbeat_ms: int,
            out: TextIO) -> None:
    def changed(kind: str) -> Any:
        def callback(_consumer: Consumer, partitions: list[TopicPartition]) -> None:
            parts = ",".join(str(tp.partition) for tp in partitions)
            out.write(f"{kind} {time.time():.6f} {parts}\n")
            out.flush()
        return callback

    consumer = Consumer(consumer_settings(bootstrap, group, protocol, heartbeat_ms))
    consumer.subscribe([topic], on_assign=changed("A"), on_revoke=changed("R"),
                       on_lost=changed("R"))
    out.write(f"S {time.time():.6f}\n")
    out.flush()
    try:
        while not stopping:
            messages = consumer.consume(500, timeout=0.05)
            now = time.time()
            lines = [f"C {now:.6f} {m.partition()} {m.offset()} {m.timestamp()[1]}\n"
                     for m in messages if m.error() is None]
            if lines:
                out.writelines(lines)
                out.flush()
    finally:
        consumer.close()
        out.write(f"X {time.time():.6f}\n")
        out.flush()


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGTERM, _stop)
    if argv[0] == "produce":
        bootstrap, topic, partitions, rate = argv[1:5]
        produce(bootstrap, topic, int(partitions), float(rate))
    elif argv[0] == "consume":
        bootstrap, topic, group, protocol, heartbeat_ms, path = argv[1:7]
        with open(path, "a", encoding="utf-8") as out:
            consume(bootstrap, topic, group, protocol, int(heartbeat_ms), out)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
