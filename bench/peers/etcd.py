"""etcd (Debian's `etcd-server`, 3.4): three members on loopback, data under a temp dir, v3
puts of 100-byte values through the JSON gRPC gateway on the client port (`/v3/kv/put`,
base64 key and value), leadership found with `/v3/maintenance/status` and moved with
`/v3/maintenance/transfer-leadership` (the gateway's name for the MoveLeader RPC). etcd always
fsyncs its WAL before it acknowledges; heartbeat 100 ms and election timeout 1,000 ms are its
defaults and are left alone."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.peers.load import RECORD_BYTES, HttpConnection, Write
from bench.peers.procs import ProcessGroup, free_ports, which

NAMES = ("e1", "e2", "e3")


def binary() -> str | None:
    return which("etcd", "/usr/bin")


def version(path: str) -> str:
    out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    return out.stdout.splitlines()[0] if out.stdout else "unknown"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class EtcdCluster:
    def __init__(self, root: Path, etcd: str) -> None:
        self.root = root
        self.etcd = etcd
        root.mkdir(parents=True, exist_ok=True)
        self.group = ProcessGroup(root)
        ports = free_ports(2 * len(NAMES))
        self.client_port = dict(zip(NAMES, ports[:3], strict=True))
        self.peer_port = dict(zip(NAMES, ports[3:], strict=True))
        self.initial = ",".join(f"{n}=http://127.0.0.1:{self.peer_port[n]}" for n in NAMES)
        self.member_id: dict[str, str] = {}
        self.value = os.urandom(RECORD_BYTES)

    def start(self, name: str) -> None:
        client = f"http://127.0.0.1:{self.client_port[name]}"
        peer = f"http://127.0.0.1:{self.peer_port[name]}"
        self.group.start(name, [
            self.etcd, "--name", name, "--data-dir", str(self.root / name),
            "--listen-client-urls", client, "--advertise-client-urls", client,
            "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
            "--initial-cluster", self.initial, "--initial-cluster-state", "new",
            "--initial-cluster-token", "bench", "--logger", "zap", "--log-level", "warn"])

    def start_all(self) -> None:
        for name in NAMES:
            self.start(name)

    def stop_all(self) -> None:
        self.group.stop_all()

    def conn(self, name: str) -> HttpConnection:
        return HttpConnection("127.0.0.1", self.client_port[name])

    async def put(self, conn: HttpConnection, key: bytes, timeout_s: float = 5.0) -> bool:
        status, reply = await conn.post_json(
            "/v3/kv/put", {"key": _b64(key), "value": _b64(self.value)}, timeout_s)
        return status == 200 and "header" in reply

    def writer(self, name: str, index: int) -> tuple[Write, HttpConnection]:
        conn = self.conn(name)
        key = f"bench/w{index}".encode()

        async def write() -> bool:
            try:
                return await self.put(conn, key)
            except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
                return False

        return write, conn

    async def status(self, name: str) -> dict[str, Any] | None:
        conn = self.conn(name)
        try:
            code, reply = await conn.post_json("/v3/maintenance/status", {}, timeout_s=1.0)
        except (OSError, TimeoutError, ValueError, asyncio.IncompleteReadError):
            return None
        finally:
            conn.close()
        return reply if code == 200 else None

    async def leader(self, timeout_s: float = 30.0) -> tuple[str, int]:
        """(name of the leader, its raft term) once every running member agrees and a put
        through the leader succeeds."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            running = [n for n in NAMES if self.group.alive(n)]
            views = {n: await self.status(n) for n in running}
            if all(views.values()) and running:
                for n, v in views.items():
                    self.member_id[n] = v["header"]["member_id"]
                leaders = {v.get("leader") for v in views.values()}
                if len(leaders) == 1:
                    lid = leaders.pop()
                    names = [n for n in running if self.member_id[n] == lid]
                    if names:
                        conn = self.conn(names[0])
                        try:
                            if await self.put(conn, b"bench/health", 2.0):
                                return names[0], int(views[names[0]]["raftTerm"])
                        except (OSError, TimeoutError, ValueError,
                                asyncio.IncompleteReadError):
                            pass
                        finally:
                            conn.close()
            await asyncio.sleep(0.05)  # poll interval of a bounded wait for agreement
        views = {n: await self.status(n) for n in NAMES}
        tails = "\n".join(f"--- {n} log ---\n{self.group.log_tail(n, 1500)}" for n in NAMES)
        raise RuntimeError(f"etcd: no agreed leader within {timeout_s} s; views {views}\n"
                           + tails)

    async def leader_seen_by(self, name: str) -> str | None:
        view = await self.status(name)
        if view is None:
            return None
        return next((n for n, mid in self.member_id.items() if mid == view.get("leader")), None)

    async def move_leader(self, leader: str, target: str) -> bool:
        conn = self.conn(leader)
        try:
            code, reply = await conn.post_json("/v3/maintenance/transfer-leadership",
                                               {"targetID": self.member_id[target]}, 10.0)
        finally:
            conn.close()
        return code == 200 and "error" not in reply

    def cpu_seconds(self) -> float:
        return sum(self.group.cpu_seconds(n) for n in NAMES)
