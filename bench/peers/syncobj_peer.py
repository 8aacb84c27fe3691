"""PySyncObj: three nodes (`bench.peers.syncobj_node`) in separate processes on loopback, each
with a journal file under a temp dir, driven over the nodes' small HTTP front-end.

What PySyncObj supports for durability: a journal file (`journalFile`), an mmap'ed file the
log is written into; nothing in its write path calls `flush()`/msync or fsync, so a commit is
acknowledged from the page cache (the journal is flushed only when the node shuts down). It has
no option to fsync per commit: "fsync on" cannot be had, and its numbers are those of a
journal without fsync. Timeouts are its defaults (election 0.4-1.4 s, append period 0.1 s)."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from bench.peers.load import RECORD_BYTES, HttpConnection, Write
from bench.peers.procs import ProcessGroup, free_ports

NAMES = ("s1", "s2", "s3")
DEFAULT_TICK_S = 0.0  # PySyncObj's defaults: autoTickPeriod 0.05 s, appendEntriesPeriod 0.1 s
ERRORS = (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError)


def available() -> str | None:
    """PySyncObj's version, or None when it is not installed in this environment."""
    try:
        return metadata.version("pysyncobj")
    except metadata.PackageNotFoundError:
        return None


class SyncObjCluster:
    def __init__(self, root: Path, tick_s: float = DEFAULT_TICK_S) -> None:
        self.root = root
        self.tick_s = tick_s
        root.mkdir(parents=True, exist_ok=True)
        self.group = ProcessGroup(root)
        ports = free_ports(2 * len(NAMES))
        self.raft_port = dict(zip(NAMES, ports[:3], strict=True))
        self.http_port = dict(zip(NAMES, ports[3:], strict=True))
        self.value = os.urandom(RECORD_BYTES // 2).hex()  # 100 characters

    def start(self, name: str) -> None:
        partners = [str(self.raft_port[n]) for n in NAMES if n != name]
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))
        self.group.start(name, [
            sys.executable, "-m", "bench.peers.syncobj_node", str(self.tick_s),
            str(self.raft_port[name]),
            str(self.http_port[name]), str(self.root / f"{name}.journal"), *partners], env=env)

    def start_all(self) -> None:
        for name in NAMES:
            self.start(name)

    def stop_all(self) -> None:
        self.group.stop_all()

    def conn(self, name: str) -> HttpConnection:
        return HttpConnection("127.0.0.1", self.http_port[name])

    async def put(self, conn: HttpConnection, key: str, timeout_s: float = 5.0) -> bool:
        status, _ = await conn.post_json("/put", {"key": key, "value": self.value}, timeout_s)
        return status == 200

    def writer(self, name: str, index: int) -> tuple[Write, HttpConnection]:
        conn = self.conn(name)
        key = f"w{index}"

        async def write() -> bool:
            try:
                return await self.put(conn, key)
            except ERRORS:
                return False

        return write, conn

    async def status(self, name: str) -> dict[str, Any] | None:
        conn = self.conn(name)
        try:
            code, reply = await conn.post_json("/status", {}, timeout_s=1.0)
        except ERRORS:
            return None
        finally:
            conn.close()
        return reply if code == 200 else None

    def name_of(self, address: str | None) -> str | None:
        for name, port in self.raft_port.items():
            if address == f"127.0.0.1:{port}":
                return name
        return None

    async def leader(self, timeout_s: float = 30.0) -> tuple[str, int]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            running = [n for n in NAMES if self.group.alive(n)]
            views = {n: await self.status(n) for n in running}
            if running and all(views.values()):
                leaders = {v["leader"] for v in views.values()}
                commits = {v["commit_idx"] for v in views.values()}
                name = self.name_of(leaders.pop()) if len(leaders) == 1 else None
                if name is not None and len(commits) == 1:
                    conn = self.conn(name)
                    try:
                        if await self.put(conn, "health", 2.0):
                            return name, int(views[name]["term"])
                    except ERRORS:
                        pass
                    finally:
                        conn.close()
            await asyncio.sleep(0.05)  # poll interval of a bounded wait for agreement
        views = {n: await self.status(n) for n in NAMES}
        tails = "\n".join(f"--- {n} log ---\n{self.group.log_tail(n, 1500)}" for n in NAMES)
        raise RuntimeError(f"PySyncObj: no agreed leader within {timeout_s} s; views {views}\n"
                           + tails)

    async def leader_seen_by(self, name: str) -> str | None:
        view = await self.status(name)
        return self.name_of(view["leader"]) if view else None

    async def transfer(self, leader: str) -> bool:
        conn = self.conn(leader)
        try:
            code, _ = await conn.post_json("/transfer", {}, 5.0)
        finally:
            conn.close()
        return code == 200

    def cpu_seconds(self) -> float:
        return sum(self.group.cpu_seconds(n) for n in NAMES)
