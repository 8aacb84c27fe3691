"""Loopback ports for the processes a test or a benchmark starts.

Never from the kernel's ephemeral range (`net.ipv4.ip_local_port_range`): every outgoing
connection on the machine (the Kafka clients, gRPC channels, other clusters' nodes) takes its
local port from there, so a port chosen by `bind(0)` can be taken by a connection before the
server binds it, or while a node is down between a kill and its restart ("Address already in
use" at the start or the restart; the test then waits for a node that never came). The ports
handed out here come from outside that range, each once per process, and pytest-xdist workers
draw from disjoint slices, so two workers' clusters do not take each other's ports either."""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LOWEST = 10_000  # below: the well-known and registered services' neighbourhood
MIN_POOL = 2_000  # a pool smaller than this (a machine that made everything ephemeral): bind(0)

_handed_out: set[int] = set()


def ephemeral_range(path: Path = EPHEMERAL_RANGE) -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default where it cannot be read)."""
    try:
        low, high = (int(v) for v in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def port_pool(ephemeral: tuple[int, int], worker: int = 0, workers: int = 1) -> list[int]:
    """The ports outside `ephemeral` this worker (of `workers`) may hand out: a contiguous
    slice of the pool, so workers never share one."""
    low, high = ephemeral
    pool = [p for p in range(LOWEST, 65536) if not low <= p <= high]
    size = len(pool) // max(workers, 1)
    return pool[worker * size:(worker + 1) * size]


def _xdist_worker() -> tuple[int, int]:
    name = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw3"
    count = os.environ.get("PYTEST_XDIST_WORKER_COUNT", "")
    if name.startswith("gw") and name[2:].isdigit() and count.isdigit() \
            and int(name[2:]) < int(count):
        return int(name[2:]), int(count)
    return 0, 1


def _bindable(port: int) -> bool:
    with socket.socket() as probe:  # no SO_REUSEADDR: any socket on the port refuses it
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _kernel_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def free_ports(count: int) -> list[int]:
    """`count` distinct loopback ports, free now, outside the ephemeral range, never handed
    out before by this process."""
    pool = port_pool(ephemeral_range(), *_xdist_worker())
    if len(pool) < MIN_POOL:
        return _kernel_ports(count)
    start = random.SystemRandom().randrange(len(pool))
    ports: list[int] = []
    for i in range(len(pool)):
        port = pool[(start + i) % len(pool)]
        if port in _handed_out or not _bindable(port):
            continue
        _handed_out.add(port)
        ports.append(port)
        if len(ports) == count:
            return ports
    raise RuntimeError(f"no {count} free loopback ports left outside the ephemeral range "
                       f"{ephemeral_range()}")
