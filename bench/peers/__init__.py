"""Side-by-side benchmarks with the peers (etcd, PySyncObj, ZooKeeper): `python -m bench peers`
or `python -m bench.peers [--help]`. See bench/peers/run.py."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    from bench.peers.run import main as run_main  # heavy imports only when it runs

    return run_main(argv)
