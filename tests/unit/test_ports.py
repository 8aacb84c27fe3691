"""Test clusters' ports come from outside the kernel's ephemeral range (an outgoing connection
took a node's port between its kill and restart: "Address already in use", and the test
waited 60 s for an unclean election that needed that node), once each, and xdist workers'
pools are disjoint."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness import ports


def test_the_pool_avoids_the_ephemeral_range_and_workers_do_not_share() -> None:
    pool = ports.port_pool((32768, 60999))
    assert pool and min(pool) >= ports.LOWEST and max(pool) <= 65535
    assert not [p for p in pool if 32768 <= p <= 60999]
    slices = [set(ports.port_pool((32768, 60999), w, 3)) for w in range(3)]
    assert all(slices) and not (slices[0] & slices[1] or slices[1] & slices[2]
                                or slices[0] & slices[2])
    assert set().union(*slices) <= set(pool)


def test_the_range_is_read_from_the_kernel_or_defaults(tmp_path: Path) -> None:
    (tmp_path / "range").write_text("20000\t50000\n")
    assert ports.ephemeral_range(tmp_path / "range") == (20000, 50000)
    assert ports.ephemeral_range(tmp_path / "missing") == (32768, 60999)


def test_ports_are_free_distinct_outside_the_range_and_never_handed_out_twice() -> None:
    low, high = ports.ephemeral_range()
    first, second = ports.free_ports(20), ports.free_ports(20)
    assert len(set(first + second)) == 40
    if len(ports.port_pool((low, high))) >= ports.MIN_POOL:
        assert not [p for p in first + second if low <= p <= high]


def test_a_port_in_use_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as taken, socket.socket() as connected_side:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        # A connection's local port (what an outgoing client holds) is refused too.
        connected_side.connect(taken.getsockname())
        busy = [taken.getsockname()[1], connected_side.getsockname()[1]]
        spare = ports.free_ports(2)
        ports._handed_out.difference_update(spare)
        monkeypatch.setattr(ports, "MIN_POOL", 0)
        monkeypatch.setattr(ports, "port_pool", lambda *_: [*busy, *spare])
        assert sorted(ports.free_ports(2)) == sorted(spare)
