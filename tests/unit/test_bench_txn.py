"""bench/txn_bench.py's figures: the brokers' CPU per 1,000 records of a produce trial (the
controllers' and the client's CPU are not the brokers')."""

from __future__ import annotations

from bench.txn_bench import broker_cpu_ms_per_1000


def test_broker_cpu_per_1000_records_counts_the_brokers_only() -> None:
    trial = {"records": 30_000, "server_cpu_s": {"1": 0.1, "2": 0.2, "3": 0.3,
                                                  "4": 0.6, "5": 0.45, "6": 0.45}}
    assert broker_cpu_ms_per_1000(trial) == 50.0  # 1.5 s over 30 transactions of 1,000
