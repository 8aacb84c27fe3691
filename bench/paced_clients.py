"""The paced producer of bench.scale_bench's paced phase with clients that, like Kafka's Java
client, put every ready partition of a broker in one ProduceRequest (librdkafka, which
confluent-kafka wraps, sends one partition per request: its issue 1700). Each worker is
bench.data_plane_bench's paced worker with another client: the same pacing (record seq due at
seq / rate after the start, sent as soon as it can be if late, its latency counted from when
it was due), stop and progress files and result (scheduled, sent, acked, errors), plus the
client's CPU seconds. Run as `python -m bench.paced_clients --worker KIND --spec JSON --out
PATH` by `start_paced`.

* kafka-python (pure Python: about 55 % of a core at 500 records/s over 200 of 3,000
  partitions, so on a loaded machine it falls behind its own schedule);
* aiokafka (asyncio; record batches built in C).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.data_plane_bench import VALUE_SIZE

PYTHON = sys.executable


def worker_paced_kafka_python(spec: dict[str, Any]) -> dict[str, Any]:
    """bench.data_plane_bench's paced worker (same pacing, timing from the scheduled send,
    stop and progress files, result) with kafka-python, which, like Kafka's Java client, puts
    every ready partition for a broker into one ProduceRequest (librdkafka sends one partition
    per request). At its defaults but for acks=all and idempotence, as PACED_SETTINGS."""
    import threading

    from kafka import KafkaProducer
    p = KafkaProducer(bootstrap_servers=spec["bootstrap"], acks="all",
                      enable_idempotence=True)
    topic, rate, partitions = spec["topic"], spec["rate"], spec["partitions"]
    stop_file, progress_file = spec.get("stop_file"), spec.get("progress_file")
    scheduled: list[float] = []
    sent: list[float] = []
    acked: list[tuple[int, float, int]] = []  # (seq, ack time, offset)
    errors: list[tuple[int, str]] = []
    pending: set[int] = set()
    lock = threading.Lock()  # callbacks run on the producer's sender thread

    def on_ack(seq: int) -> Any:
        def done(meta: Any) -> None:
            now = time.monotonic()
            with lock:
                acked.append((seq, now, meta.offset))
                pending.discard(seq)
        return done

    def on_error(seq: int) -> Any:
        def failed(exc: BaseException) -> None:
            with lock:
                errors.append((seq, repr(exc)))
                pending.discard(seq)
        return failed

    p.partitions_for(topic)  # metadata first: the clock starts at the send
    pad = b" " * VALUE_SIZE
    started = time.monotonic()
    end = started + spec.get("seconds", 1e9)
    last_progress, seq = 0.0, 0
    while True:
        due = started + seq / rate
        now = time.monotonic()
        if now < due:
            time.sleep(due - now)
            now = time.monotonic()
        if now >= end or (stop_file and seq % 50 == 0 and os.path.exists(stop_file)):
            break
        scheduled.append(due)
        sent.append(now)
        with lock:
            pending.add(seq)
        future = p.send(topic, (str(seq).encode() + pad)[:VALUE_SIZE], partition=seq % partitions)
        future.add_callback(on_ack(seq)).add_errback(on_error(seq))
        seq += 1
        if progress_file and now - last_progress > 0.1:
            last_progress = now
            Path(progress_file + ".tmp").write_text(str(len(acked)))
            os.replace(progress_file + ".tmp", progress_file)
    p.flush(150)
    p.close(30)
    with lock:
        return {"scheduled": scheduled, "sent": sent, "acked": sorted(acked), "errors": errors,
                "undelivered": len(pending), "client_cpu_s": round(time.process_time(), 2),
                "seconds": time.monotonic() - started, "window": [started, time.monotonic()]}


def worker_paced_aiokafka(spec: dict[str, Any]) -> dict[str, Any]:
    """The same paced worker with aiokafka (asyncio; its record batches built in C), which
    also puts every ready partition of a broker in one ProduceRequest. acks=all and
    idempotence, its defaults otherwise."""
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def main() -> dict[str, Any]:
        p = AIOKafkaProducer(bootstrap_servers=spec["bootstrap"], acks="all",
                             enable_idempotence=True)
        await p.start()
        topic, rate, partitions = spec["topic"], spec["rate"], spec["partitions"]
        stop_file, progress_file = spec.get("stop_file"), spec.get("progress_file")
        scheduled: list[float] = []
        sent: list[float] = []
        acked: list[tuple[int, float, int]] = []
        errors: list[tuple[int, str]] = []
        pending: set[asyncio.Future[Any]] = set()

        def done(seq: int) -> Any:
            def callback(future: asyncio.Future[Any]) -> None:
                now = time.monotonic()
                pending.discard(future)
                if future.exception() is not None:
                    errors.append((seq, repr(future.exception())))
                else:
                    acked.append((seq, now, future.result().offset))
            return callback

        await p.partitions_for(topic)  # metadata first: the clock starts at the send
        pad = b" " * VALUE_SIZE
        started = time.monotonic()
        end = started + spec.get("seconds", 1e9)
        last_progress, seq = 0.0, 0
        while True:
            due = started + seq / rate
            now = time.monotonic()
            if now < due:
                await asyncio.sleep(due - now)
                now = time.monotonic()
            if now >= end or (stop_file and seq % 50 == 0 and os.path.exists(stop_file)):
                break
            scheduled.append(due)
            sent.append(now)
            # send() returns once the record is in a batch; the future is the acknowledgement
            future = await p.send(topic, (str(seq).encode() + pad)[:VALUE_SIZE],
                                  partition=seq % partitions)
            pending.add(future)
            future.add_done_callback(done(seq))
            seq += 1
            if progress_file and now - last_progress > 0.1:
                last_progress = now
                Path(progress_file + ".tmp").write_text(str(len(acked)))
                os.replace(progress_file + ".tmp", progress_file)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(150):
                await p.flush()
                await asyncio.gather(*pending, return_exceptions=True)
        await p.stop()
        return {"scheduled": scheduled, "sent": sent, "acked": sorted(acked), "errors": errors,
                "undelivered": len(pending), "client_cpu_s": round(time.process_time(), 2),
                "seconds": time.monotonic() - started, "window": [started, time.monotonic()]}

    return asyncio.run(main())


WORKERS = {"paced_kafka_python": worker_paced_kafka_python,
           "paced_aiokafka": worker_paced_aiokafka}
# The paced phase's clients (module, worker): confluent-kafka runs bench.data_plane_bench's.
PACED_CLIENTS = {"confluent": ("bench.data_plane_bench", "paced"),
                 "kafka-python": ("bench.paced_clients", "paced_kafka_python"),
                 "aiokafka": ("bench.paced_clients", "paced_aiokafka")}


def start_paced(client: str, spec: dict[str, Any], out: str) -> subprocess.Popen[str]:
    module, kind = PACED_CLIENTS[client]
    return subprocess.Popen([PYTHON, "-m", module, "--worker", kind, "--spec", json.dumps(spec),
                             "--out", out],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.paced_clients")
    parser.add_argument("--worker", choices=sorted(WORKERS), required=True)
    parser.add_argument("--spec", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    Path(args.out).write_text(json.dumps(WORKERS[args.worker](json.loads(args.spec))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
