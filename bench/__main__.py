"""`make bench` / `python -m bench [part ...]`: every benchmark, one after the other, in one
run on one machine (so ratios between them mean something). Raw numbers go to bench/results/;
docs/benchmarks-history.md explains them."""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

PARTS = (
    "log_bench", "core_bench", "grpc_rtt_bench", "quorum_bench", "controller_bench", "broker_bench",
    "snapshot_transfer_bench", "tls_bench", "snapshot_bench", "peers", "audit_bench",
    "loop_lag_bench", "data_plane_bench", "flush_hop_bench", "write_trace_bench",
    "authorizer_bench", "authz_produce_bench", "sasl_bench", "scale_bench", "group_tool_bench",
    "group_protocol_bench", "dev_start_bench", "txn_bench",
)
RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("parts", nargs="*", help=f"any of {', '.join(PARTS)} (default: all)")
    args = parser.parse_args(argv)
    unknown = [p for p in args.parts if p not in PARTS]
    if unknown:
        parser.error(f"unknown part {unknown[0]!r}; choose from {', '.join(PARTS)}")
    RESULTS.mkdir(exist_ok=True)
    for part in args.parts or PARTS:
        print(f"\n##### bench.{part}", flush=True)
        module = importlib.import_module(f"bench.{part}")
        code = module.main(["--json", str(RESULTS / f"{part}.json")])
        if code:
            return int(code)
    return 0


if __name__ == "__main__":
    sys.exit(main())
