"""ZooKeeper (Debian's `zookeeper`, 3.8): the cost KRaft removed. One standalone server
(forceSync on, its default) with data under a temp dir, populated with Kafka's ZooKeeper
layout for N partitions in topics of 1,000 partitions:

    /brokers/topics/<t>                        {"version":2,"partitions":{"0":[1,2,3],...},...}
    /brokers/topics/<t>/partitions/<p>/state   {"controller_epoch":1,"leader":1,"version":1,
                                                "leader_epoch":0,"isr":[1,2,3]}

A new ZooKeeper-mode controller had to read all of it before it could act; measured here as
one fresh kazoo client doing what Kafka's controller did on failover: list the topics, read
every topic znode (the assignment), then read every partition's state znode, async reads
pipelined (up to WINDOW in flight). A ZooKeeper read is served by the one server the client is
connected to, so an ensemble would not change this cost; a single server is used."""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.peers.procs import ProcessGroup, free_ports

JAR = "/usr/share/java/zookeeper.jar"
WINDOW = 5000
PARTITIONS_PER_TOPIC = 1000
STATE = json.dumps({"controller_epoch": 1, "leader": 1, "version": 1, "leader_epoch": 0,
                    "isr": [1, 2, 3]}, separators=(",", ":")).encode()


logging.getLogger("kazoo").setLevel(logging.ERROR)  # it warns on every dropped connection


def available() -> str | None:
    """Why ZooKeeper cannot run here, or None when it can."""
    if not os.path.exists(JAR):
        return f"{JAR} not found (apt-get install zookeeper)"
    try:
        import kazoo  # noqa: F401
    except ImportError:
        return "kazoo is not installed in this environment (pip install kazoo)"
    return None


def _assignment(partitions: int) -> bytes:
    return json.dumps({"version": 2, "partitions": {str(p): [1 + p % 3, 1 + (p + 1) % 3,
                                                             1 + (p + 2) % 3]
                                                    for p in range(partitions)},
                       "adding_replicas": {}, "removing_replicas": {}},
                      separators=(",", ":")).encode()


def pipelined(calls: Iterable[Callable[[], Any]], window: int = WINDOW) -> list[Any]:
    """Issue async kazoo calls with at most `window` outstanding; results in order."""
    out: list[Any] = []
    pending: list[Any] = []
    for call in calls:
        pending.append(call())
        if len(pending) >= window:
            out.extend(r.get() for r in pending)
            pending = []
    out.extend(r.get() for r in pending)
    return out


class ZooKeeper:
    def __init__(self, root: Path, heap_mb: int = 4096) -> None:
        self.root = root
        (root / "data").mkdir(parents=True, exist_ok=True)
        self.group = ProcessGroup(root)
        self.port = free_ports(1)[0]
        (root / "zoo.cfg").write_text(
            f"tickTime=2000\ndataDir={root / 'data'}\nclientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\nadmin.enableServer=false\nmaxClientCnxns=0\n"
            "forceSync=yes\n4lw.commands.whitelist=*\n")
        self.heap_mb = heap_mb

    def start(self) -> None:
        self.group.start("zookeeper", [
            "java", f"-Xmx{self.heap_mb}m", "-cp", JAR,
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(self.root / "zoo.cfg")])

    def stop(self) -> None:
        self.group.stop_all()

    def client(self) -> Any:
        from kazoo.client import KazooClient

        client = KazooClient(hosts=f"127.0.0.1:{self.port}", timeout=30)
        client.start(timeout=60)
        return client

    def wait_ready(self, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                self.client().stop()
                return
            except Exception:  # kazoo raises its own timeout types while the JVM starts
                if time.monotonic() > deadline or not self.group.alive("zookeeper"):
                    raise RuntimeError("ZooKeeper did not start:\n"
                                       + self.group.log_tail("zookeeper")) from None
                time.sleep(0.5)  # poll interval of a bounded wait for the JVM

    def populate(self, partitions: int, already: int) -> dict[str, float]:
        """Add topics until `partitions` partitions exist (`already` exist)."""
        client = self.client()
        started = time.perf_counter()
        try:
            client.ensure_path("/brokers/topics")
            first = already // PARTITIONS_PER_TOPIC
            topics = range(first, partitions // PARTITIONS_PER_TOPIC)
            assignment = _assignment(PARTITIONS_PER_TOPIC)
            base = "/brokers/topics/t{}"
            pipelined(lambda t=t: client.create_async(base.format(t), assignment)
                      for t in topics)
            pipelined(lambda t=t: client.create_async(base.format(t) + "/partitions")
                      for t in topics)
            # Partition znodes go in multi transactions of one topic's partitions each (one
            # request per 1,000 znodes), pipelined like the reads.
            txns = WINDOW // PARTITIONS_PER_TOPIC + 1
            pipelined((lambda t=t: self._partitions_txn(client, base.format(t))
                       for t in topics), window=txns)
            pipelined((lambda t=t: self._partitions_txn(client, base.format(t), STATE)
                       for t in topics), window=txns)
        finally:
            client.stop()
            client.close()
        wall = time.perf_counter() - started
        return {"partitions": partitions, "populate_s": wall,
                "znodes_per_s": 2 * (partitions - already) / wall}

    @staticmethod
    def _partitions_txn(client: Any, topic_path: str, state: bytes | None = None) -> Any:
        txn = client.transaction()
        for p in range(PARTITIONS_PER_TOPIC):
            path = f"{topic_path}/partitions/{p}"
            if state is None:
                txn.create(path)
            else:
                txn.create(path + "/state", state)
        return txn.commit_async()

    def full_read(self) -> dict[str, float]:
        """A new controller's view: connect, list topics, read assignments and every state."""
        started = time.perf_counter()
        client = self.client()
        try:
            connected = time.perf_counter()
            topics = client.get_children("/brokers/topics")
            assignments = pipelined(lambda t=t: client.get_async(f"/brokers/topics/{t}")
                                    for t in topics)
            paths = [f"/brokers/topics/{t}/partitions/{p}/state"
                     for t, (data, _) in zip(topics, assignments, strict=True)
                     for p in json.loads(data)["partitions"]]
            states = pipelined(lambda path=path: client.get_async(path) for path in paths)
            leaders = sum(1 for data, _ in states if json.loads(data)["leader"] >= 0)
        finally:
            client.stop()
            client.close()
        wall = time.perf_counter() - started
        return {"read_s": wall, "connect_s": connected - started, "partitions": len(paths),
                "with_leader": leaders, "znodes_per_s": (len(paths) + len(topics)) / wall}

    def cpu_seconds(self) -> float:
        return self.group.cpu_seconds("zookeeper")
