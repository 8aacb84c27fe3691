"""The attacks of issue 29 against a real broker process (one controller, one broker):

* memory: 10 connections each declare a 100 MB request and send 30 MB of it, then stall. A
  broker without limits held every byte (72 -> 398 MB). With queued.max.request.bytes at its
  smallest (socket.request.max.bytes) at most two bodies are read at once, the rest wait
  unread, and socket.request.body.timeout.ms reaps each stalled body.
* idle: 500 connections from one address that send nothing. max.connections.per.ip=100 closes
  400 of them at once and connections.max.idle.ms closes the rest, where they stayed open for
  good before.

Both check the broker's resident memory and its open sockets (/proc) and that it still serves
a real client afterwards."""

from __future__ import annotations

import os
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster import ProcessCluster, kafka_cluster, wait_for

WAIT_S = 60
MB = 1_000_000
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "queued.max.request.bytes": "104857600",
    "socket.request.body.timeout.ms": "3000",
    "max.connections.per.ip": "100",
    # Longer than opening 500 connections takes on a loaded machine: a connection reaped as
    # idle meanwhile would free a slot, and a later one be served instead of refused.
    "connections.max.idle.ms": "6000",
    "offsets.topic.replication.factor": "1",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("limits"), [2], SETTINGS) as running:
        yield running


def broker_pid(cluster: ProcessCluster) -> int:
    process = cluster.nodes[2].process
    assert process is not None
    return process.pid


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def sockets(pid: int) -> int:
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
        except OSError:
            pass  # closed meanwhile
    return count


class Sampler:
    """The broker's peak RSS while an attack runs (sampled every 50 ms)."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = rss_mb(pid)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            self.peak = max(self.peak, rss_mb(self.pid))

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(5)
        return self.peak


def serves(cluster: ProcessCluster) -> bool:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all"})
    producer.produce("after-the-attack", b"still here")
    return producer.flush(30) == 0


def closed_by_broker(sock: socket.socket, timeout_s: float) -> bool:
    sock.settimeout(timeout_s)
    try:
        return sock.recv(1) == b""
    except ConnectionError:
        return True
    except TimeoutError:
        return False


def test_ten_half_sent_100_mb_requests_do_not_grow_the_broker(cluster: ProcessCluster) -> None:
    pid = broker_pid(cluster)
    before = rss_mb(pid)
    sampler = Sampler(pid)
    reaped: list[bool] = []

    def attack() -> None:
        with socket.create_connection(("127.0.0.1", cluster.nodes[2].kafka_port)) as sock:
            sock.settimeout(WAIT_S)
            try:
                sock.sendall(struct.pack(">i", 100 * MB))
                chunk = b"\0" * MB
                for _ in range(30):
                    sock.sendall(chunk)
            except OSError:
                pass  # closed by the broker while still sending
            reaped.append(closed_by_broker(sock, WAIT_S))

    threads = [threading.Thread(target=attack) for _ in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT_S)
    peak = sampler.stop()
    print(f"broker RSS {before:.0f} MB before, {peak:.0f} MB at the peak")
    assert reaped == [True] * 10
    assert peak - before < 150, (before, peak)  # two 30 MB bodies and their copies, not 300
    assert "request body did not arrive within 3000 ms" in cluster.logs(2)
    assert serves(cluster)


def test_500_idle_connections_are_refused_or_reaped(cluster: ProcessCluster) -> None:
    pid = broker_pid(cluster)
    before_sockets, before_rss = sockets(pid), rss_mb(pid)
    attackers = [socket.create_connection(("127.0.0.1", cluster.nodes[2].kafka_port))
                 for _ in range(500)]
    try:
        refused = sum(closed_by_broker(sock, 1.0) for sock in attackers[100:])
        open_now = sockets(pid)
        rss = rss_mb(pid)
        print(f"broker sockets {before_sockets} before, {open_now} with 500 attackers; "
              f"RSS {before_rss:.0f} -> {rss:.0f} MB")
        assert refused == 400  # over max.connections.per.ip
        assert open_now <= before_sockets + 100 + 5
        assert rss - before_rss < 30
        started = time.monotonic()
        assert all(closed_by_broker(sock, 10) for sock in attackers[:100])  # idle: reaped
        assert time.monotonic() - started < 10
        wait_for(lambda: sockets(pid) <= before_sockets + 5, 10, "the broker's sockets to close")
    finally:
        for sock in attackers:
            sock.close()
    log = cluster.logs(2)
    assert "refusing" in log and "max.connections.per.ip 100" in log
    assert "idle for 6 s" in log
    assert serves(cluster)
