"""Failover trials for the HTTP-driven peers (etcd, PySyncObj), measured the same way as this
project's: each trial starts from a healthy cluster (every member agrees on the leader and a
write through it succeeded), acts on the leader, and takes the time from the action to the
first write acknowledged by a new leader: the survivors' status is polled every 5 ms and, as
soon as one names a new leader, a write goes through it (over a connection opened before the
clock started). A killed member is then restarted on its data directory; a stopped one
(SIGSTOP: a hung leader, alive but silent) gets SIGCONT and the next trial waits until the
cluster is healthy again (every member agrees on one leader and a write through it succeeds)."""

from __future__ import annotations

import asyncio
import signal
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

from bench.peers.load import HttpConnection, Write, summary

TRIAL_TIMEOUT_S = 30.0
POLL_S = 0.005


class Peer(Protocol):
    group: Any

    def start(self, name: str) -> None: ...
    def writer(self, name: str, index: int) -> tuple[Write, HttpConnection]: ...
    async def leader(self, timeout_s: float = 30.0) -> tuple[str, int]: ...
    async def leader_seen_by(self, name: str) -> str | None: ...


async def _survivor_writers(peer: Peer, survivors: list[str]
                            ) -> tuple[dict[str, Write], list[HttpConnection]]:
    pairs = {name: peer.writer(name, 1000 + i) for i, name in enumerate(survivors)}
    for write, _ in pairs.values():  # connect every survivor's connection before the clock
        await write()
    return {n: w for n, (w, _) in pairs.items()}, [c for _, c in pairs.values()]


async def first_write_by_new_leader(peer: Peer, old: str, writes: dict[str, Write],
                                    started: float) -> tuple[str | None, float | None]:
    """Poll the survivors' status every POLL_S; as soon as one names a new leader, write
    through it (as quorum_bench does for this project: NodeStatus poll, then an append).
    A write is not sent blindly: both peers hold a write sent while there is no leader until
    the request times out, which would measure the client's timeout, not the election."""
    deadline = started + TRIAL_TIMEOUT_S
    while time.perf_counter() < deadline:
        views = await asyncio.gather(*(peer.leader_seen_by(n) for n in writes))
        leader = next((v for v in views if v is not None and v != old and v in writes), None)
        if leader is not None and await writes[leader]():
            return leader, time.perf_counter() - started
        await asyncio.sleep(POLL_S)  # poll interval while the cluster has no leader
    return None, None


async def kill_trials(peer: Peer, names: tuple[str, ...], trials: int, label: str
                      ) -> dict[str, Any]:
    results = []
    for i in range(trials):
        leader, term = await peer.leader()
        survivors = [n for n in names if n != leader]
        writes, conns = await _survivor_writers(peer, survivors)
        started = time.perf_counter()
        peer.group.signal(leader, signal.SIGKILL)
        new_leader, seconds = await first_write_by_new_leader(peer, leader, writes, started)
        for conn in conns:
            conn.close()
        peer.group.wait(leader, 10)
        peer.start(leader)
        results.append({"victim": leader, "term": term, "new_leader": new_leader,
                        "ms": seconds * 1000 if seconds is not None else None})
        print(f"    {label} kill -9 #{i + 1}: leader {leader} -> {new_leader}, first write "
              f"after {results[-1]['ms'] or float('nan'):.1f} ms", flush=True)
    await peer.leader()
    return _summarise(results)


async def stop_trials(peer: Peer, names: tuple[str, ...], trials: int, label: str
                      ) -> dict[str, Any]:
    """SIGSTOP of the leader -> first write acknowledged by a new leader; then SIGCONT, and
    the next trial starts only from a healthy cluster. The old leader is never left stopped:
    SIGCONT runs in `finally`, whatever happened in between."""
    results = []
    for i in range(trials):
        leader, term = await peer.leader()
        survivors = [n for n in names if n != leader]
        writes, conns = await _survivor_writers(peer, survivors)
        started = time.perf_counter()
        peer.group.signal(leader, signal.SIGSTOP)
        try:
            new_leader, seconds = await first_write_by_new_leader(peer, leader, writes,
                                                                  started)
        finally:
            peer.group.signal(leader, signal.SIGCONT)
            for conn in conns:
                conn.close()
        healthy = time.perf_counter()
        await peer.leader()  # the old leader back as a follower, all agree, a write commits
        results.append({"victim": leader, "term": term, "new_leader": new_leader,
                        "ms": seconds * 1000 if seconds is not None else None,
                        "healthy_after_sigcont_s": time.perf_counter() - healthy})
        print(f"    {label} SIGSTOP #{i + 1}: leader {leader} -> {new_leader}, first write "
              f"after {results[-1]['ms'] or float('nan'):.1f} ms (healthy "
              f"{results[-1]['healthy_after_sigcont_s']:.1f} s after SIGCONT)", flush=True)
    return _summarise(results)


async def handover_trials(peer: Peer, names: tuple[str, ...], trials: int, label: str,
                          handover: Callable[[str], Awaitable[bool]]) -> dict[str, Any]:
    """`handover(leader)` asks the leader to hand over to a follower; the time runs from the
    request to the first write acknowledged by the new leader."""
    results = []
    for i in range(trials):
        leader, term = await peer.leader()
        survivors = [n for n in names if n != leader]
        writes, conns = await _survivor_writers(peer, survivors)
        started = time.perf_counter()
        new_leader, seconds = None, None
        if await handover(leader):
            new_leader, seconds = await first_write_by_new_leader(peer, leader, writes,
                                                                  started)
        for conn in conns:
            conn.close()
        results.append({"victim": leader, "term": term, "new_leader": new_leader,
                        "ms": seconds * 1000 if seconds is not None else None})
        print(f"    {label} handover #{i + 1}: {leader} -> {new_leader}, first write after "
              f"{results[-1]['ms'] or float('nan'):.1f} ms", flush=True)
    return _summarise(results)


def _summarise(results: list[dict[str, Any]]) -> dict[str, Any]:
    values = [r["ms"] for r in results if r["ms"] is not None]
    return {"trials": results, "ms": values, "summary": summary(values),
            "timeouts": len(results) - len(values)}
