"""Failover trials for the HTTP-driven peers (etcd, PySyncObj), measured the same way as this
project's: each trial starts from a healthy cluster (every member agrees on the leader and a
write through it succeeded), acts on the leader, and takes the time from the action to the
first write a survivor acknowledges. Writes go to every survivor at once, each retried 5 ms
after a failure (a write to a follower is forwarded to the leader by both peers), so the first
success marks the first moment the cluster accepted a write again. A killed member is then
restarted on its data directory."""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any, Protocol

from bench.peers.load import HttpConnection, Write, first_success, summary

TRIAL_TIMEOUT_S = 30.0


class Peer(Protocol):
    group: Any

    def start(self, name: str) -> None: ...
    def writer(self, name: str, index: int) -> tuple[Write, HttpConnection]: ...
    async def leader(self, timeout_s: float = 30.0) -> tuple[str, int]: ...
    async def leader_seen_by(self, name: str) -> str | None: ...


async def _survivor_writers(peer: Peer, survivors: list[str]
                            ) -> tuple[list[Write], list[HttpConnection]]:
    pairs = [peer.writer(name, 1000 + i) for i, name in enumerate(survivors)]
    writes = [w for w, _ in pairs]
    conns = [c for _, c in pairs]
    for write in writes:  # connect (and warm) every survivor's connection before the clock
        await write()
    return writes, conns


async def kill_trials(peer: Peer, names: tuple[str, ...], trials: int, label: str
                      ) -> dict[str, Any]:
    results = []
    for i in range(trials):
        leader, term = await peer.leader()
        survivors = [n for n in names if n != leader]
        writes, conns = await _survivor_writers(peer, survivors)
        peer.group.signal(leader, signal.SIGKILL)
        seconds = await first_success(writes, TRIAL_TIMEOUT_S)
        for conn in conns:
            conn.close()
        peer.group.wait(leader, 10)
        peer.start(leader)
        results.append({"victim": leader, "term": term,
                        "ms": seconds * 1000 if seconds is not None else None})
        print(f"    {label} kill -9 #{i + 1}: leader {leader}, first write after "
              f"{results[-1]['ms'] or float('nan'):.1f} ms", flush=True)
    await peer.leader()
    return _summarise(results)


async def handover_trials(peer: Peer, names: tuple[str, ...], trials: int, label: str,
                          handover: Any) -> dict[str, Any]:
    """`handover(leader) -> awaitable bool` asks the leader to step down to a follower; the
    time runs from the request to the first write acknowledged with a new leader in place."""
    results = []
    for i in range(trials):
        leader, term = await peer.leader()
        survivors = [n for n in names if n != leader]
        writes, conns = await _survivor_writers(peer, survivors)
        started = time.perf_counter()
        accepted = await handover(leader)
        new_leader = None
        deadline = time.monotonic() + TRIAL_TIMEOUT_S
        while accepted and time.monotonic() < deadline:
            views = await asyncio.gather(*(peer.leader_seen_by(n) for n in survivors))
            new_leader = next((v for v in views if v is not None and v != leader), None)
            if new_leader is not None:
                break
            await asyncio.sleep(0.005)  # poll interval while the handover completes
        seconds = await first_success(writes, TRIAL_TIMEOUT_S) if new_leader else None
        total = time.perf_counter() - started if seconds is not None else None
        for conn in conns:
            conn.close()
        results.append({"victim": leader, "term": term, "new_leader": new_leader,
                        "ms": total * 1000 if total is not None else None})
        print(f"    {label} handover #{i + 1}: {leader} -> {new_leader}, first write after "
              f"{results[-1]['ms'] or float('nan'):.1f} ms", flush=True)
    return _summarise(results)


def _summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    values = [r["ms"] for r in results if r["ms"] is not None]
    return {"trials": results, "ms": values, "summary": summary(values),
            "timeouts": len(results) - len(values)}
