"""The one load generator every system is measured with.

W writer tasks in one asyncio event loop in the benchmark process; each owns one connection
(an HTTP/1.1 keep-alive connection for etcd and PySyncObj, a grpc.aio channel for this
project's Admin API) or calls the in-process leader, and issues one 100-byte write at a time
in a closed loop for a fixed time. A write counts once the system acknowledged it as
committed. The process's own CPU time over the run (`time.process_time`) is the client's CPU.

The HTTP client is a minimal asyncio one (no extra package): a POST with a JSON body, the
response read by Content-Length or chunks.
"""

from __future__ import annotations

import asyncio
import json
import math
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

RECORD_BYTES = 100
Write = Callable[[], Awaitable[bool]]


class HttpError(Exception):
    pass


class HttpConnection:
    """One keep-alive HTTP/1.1 connection to host:port; reconnects after any failure."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None

    async def post(self, path: str, body: bytes, timeout_s: float = 5.0) -> tuple[int, bytes]:
        try:
            async with asyncio.timeout(timeout_s):
                return await self._post(path, body)
        except BaseException:
            self.close()  # a half-read response would poison the next request
            raise

    async def _post(self, path: str, body: bytes) -> tuple[int, bytes]:
        if self._writer is None:
            await self._connect()
        assert self._reader is not None and self._writer is not None
        self._writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
            + body)
        status_line = await self._reader.readline()
        if not status_line:
            raise HttpError("connection closed")
        status = int(status_line.split()[1])
        length, chunked, closing = 0, False, False
        while True:
            line = await self._reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip().lower()
            if name == "content-length":
                length = int(value)
            elif name == "transfer-encoding" and "chunked" in value:
                chunked = True
            elif name == "connection" and value == "close":
                closing = True
        if chunked:
            parts = []
            while True:
                size = int((await self._reader.readline()).split(b";")[0], 16)
                if size == 0:
                    await self._reader.readline()
                    break
                parts.append(await self._reader.readexactly(size))
                await self._reader.readline()
            data = b"".join(parts)
        else:
            data = await self._reader.readexactly(length)
        if closing:
            self.close()
        return status, data

    async def post_json(self, path: str, payload: dict[str, Any], timeout_s: float = 5.0
                        ) -> tuple[int, dict[str, Any]]:
        status, data = await self.post(path, json.dumps(payload).encode(), timeout_s)
        try:
            return status, json.loads(data) if data else {}
        except ValueError:
            return status, {"raw": data.decode(errors="replace")}


# -- statistics -------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in [0, 100])."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def summary(values: list[float]) -> dict[str, float]:
    return {"n": len(values), "median": statistics.median(values) if values else float("nan"),
            "p90": percentile(values, 90), "p99": percentile(values, 99),
            "min": min(values, default=float("nan")), "max": max(values, default=float("nan"))}


# -- the closed-loop load generator -------------------------------------------------------------


async def closed_loop(writers: list[Write], seconds: float,
                      server_cpu: Callable[[], float] | None = None) -> dict[str, Any]:
    """Every writer issues one write at a time until `seconds` have passed; returns the
    committed writes/s, latency percentiles (ms) of the successful writes, failures, the CPU
    the benchmark process used per wall second (the client's CPU) and, given `server_cpu`
    (CPU seconds of the system's processes so far), the servers' CPU per wall second."""
    latencies: list[float] = []
    failures = 0
    deadline = time.perf_counter() + seconds

    async def loop(write: Write) -> None:
        nonlocal failures
        while time.perf_counter() < deadline:
            started = time.perf_counter()
            ok = await write()
            if ok:
                latencies.append(time.perf_counter() - started)
            else:
                failures += 1

    server0 = server_cpu() if server_cpu is not None else float("nan")
    cpu0, began = time.process_time(), time.perf_counter()
    async with asyncio.timeout(seconds + 60):
        await asyncio.gather(*(loop(w) for w in writers))
    wall = time.perf_counter() - began
    ms = [x * 1000 for x in latencies]
    return {"writers": len(writers), "wall_s": wall, "writes": len(ms), "failures": failures,
            "writes_per_s": len(ms) / wall, "p50_ms": percentile(ms, 50),
            "p99_ms": percentile(ms, 99), "max_ms": max(ms, default=float("nan")),
            "client_cpu": (time.process_time() - cpu0) / wall,
            "server_cpu": ((server_cpu() - server0) / wall if server_cpu is not None
                           else float("nan"))}


@dataclass
class Target:
    """One system under write load: how to open `count` writers on it and close them again,
    and the CPU seconds its server processes have used so far (None if unknown)."""

    name: str
    make: Callable[[int], Awaitable[list[Write]]]
    close: Callable[[list[Write]], Awaitable[None]]
    server_cpu: Callable[[], float] | None = None


async def interleaved(targets: list[Target], counts: list[int], seconds: float, repeat: int,
                      warmup_s: float) -> dict[str, list[dict[str, Any]]]:
    """Every system under the same load in turn: for each writer count, one warm-up run per
    system, then `repeat` rounds in which every system runs once (the order rotates from round
    to round). The machine is shared, so its load drifts; interleaving puts each system's runs
    in the same minutes, which is what makes their ratios meaningful."""
    out: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets}
    for count in counts:
        writers: dict[str, list[Write]] = {}
        try:
            for target in targets:
                writers[target.name] = await target.make(count)
                await closed_loop(writers[target.name], warmup_s)
            runs: dict[str, list[dict[str, Any]]] = {t.name: [] for t in targets}
            for round_no in range(repeat):
                shift = round_no % len(targets)
                for target in targets[shift:] + targets[:shift]:
                    run = await closed_loop(writers[target.name], seconds, target.server_cpu)
                    runs[target.name].append(run | {"round": round_no})
        finally:
            for target in targets:
                if target.name in writers:
                    await target.close(writers[target.name])
        for target in targets:
            rs = runs[target.name]
            out[target.name].append({"writers": count, "runs": rs})
            print(f"  {target.name}: {count} writers: "
                  f"{statistics.median(r['writes_per_s'] for r in rs):,.0f} writes/s, p50 "
                  f"{statistics.median(r['p50_ms'] for r in rs):.2f} ms, client CPU "
                  f"{statistics.median(r['client_cpu'] for r in rs):.2f}, server CPU "
                  f"{statistics.median(r['server_cpu'] for r in rs):.2f}", flush=True)
    return out


async def first_success(attempts: list[Callable[[], Awaitable[bool]]], timeout_s: float,
                        pause_s: float = 0.005) -> float | None:
    """Seconds until the first of several retrying write loops succeeds (each loop retries its
    own target every `pause_s` after a failure); None after `timeout_s`."""
    started = time.perf_counter()
    done = asyncio.Event()
    result: list[float] = []

    async def loop(attempt: Callable[[], Awaitable[bool]]) -> None:
        while not done.is_set():
            try:
                ok = await attempt()
            except Exception:  # a refused or reset connection is a failed attempt
                ok = False
            if ok and not done.is_set():
                result.append(time.perf_counter() - started)
                done.set()
                return
            await asyncio.sleep(pause_s)  # retry pause while the cluster has no leader

    tasks = [asyncio.create_task(loop(a)) for a in attempts]
    try:
        await asyncio.wait_for(done.wait(), timeout_s)
    except TimeoutError:
        pass
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    return result[0] if result else None
