"""The cost of security on writes: `python -m bench.tls_bench [--json PATH]`.

The controller benchmark's workload (bench/controller_bench.py: three controllers as real
processes, three heartbeating brokers, C clients creating one-partition RF-3 topics through the
Admin API) run three times, each on a fresh cluster: plaintext; mutual TLS on the controller
listener (Raft between controllers, the Admin API and broker lifecycle all over mTLS, client
certificates required); and mTLS with the authorizer on (every RPC checked; the clients and
controllers are super users). Rounds alternate between the three clusters, which all run at
once, so machine noise falls on every mode alike. Reported: topics/s and p50/p99 latency per
mode, and the ratio to plaintext.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._cluster import Cluster
from bench.controller_bench import leader_endpoint, measure, start_brokers
from bench.log_bench import machine
from kraft.security.certs import make_test_certs, principal_of
from kraft.security.tls import TlsConfig

MODES = ("plaintext", "mtls", "mtls+authz")


def cluster_for(mode: str, root: Path, certs: dict[str, Path]) -> Cluster:
    extra: dict[str, str] = {"internal.test.hooks.enable": "false"}
    per_node: dict[int, dict[str, str]] = {}
    if mode != "plaintext":
        extra |= {
            "listener.security.protocol.map": "CONTROLLER:SSL",
            "ssl.truststore.location": str(certs["ca"]),
            "ssl.client.auth": "required",
        }
        per_node = {i: {"ssl.keystore.location": str(certs[f"controller-{i}"])}
                    for i in (1, 2, 3)}
    if mode == "mtls+authz":
        extra |= {
            "authorizer.class.name": "StandardAuthorizer",
            "super.users": ";".join(principal_of(n) for n in (
                "controller-1", "controller-2", "controller-3", "client")),
        }
    return Cluster(root, 3, extra, per_node)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, Any] = {"machine": machine(), "modes": {}}
    with tempfile.TemporaryDirectory(prefix="kraft-tls-bench-") as tmp:
        root = Path(tmp)
        certs = make_test_certs(root / "certs", ["controller-1", "controller-2",
                                                 "controller-3", "client"])
        client_tls = TlsConfig(str(certs["client"]), str(certs["ca"]))
        clusters = {mode: cluster_for(mode, root / mode.replace("+", "-"), certs)
                    for mode in MODES}
        stop = asyncio.Event()
        beats: list[asyncio.Task] = []
        try:
            endpoints = {}
            for mode, cluster in clusters.items():
                tls = None if mode == "plaintext" else client_tls
                cluster_id = cluster.format()
                for node_id in cluster.nodes:
                    cluster.start(node_id)
                endpoints[mode] = await leader_endpoint(cluster, tls=tls)
                beats += await start_brokers(endpoints[mode], cluster_id, stop, tls=tls)
            runs: dict[str, dict[int, list[dict[str, float]]]] = {
                m: {c: [] for c in args.clients} for m in MODES}
            for round_ in range(args.repeat):
                for clients in args.clients:
                    for mode in MODES:
                        tls = None if mode == "plaintext" else client_tls
                        runs[mode][clients].append(await measure(
                            endpoints[mode], clients, args.seconds, 1,
                            f"r{round_}-{clients}", tls=tls))
            for mode in MODES:
                results["modes"][mode] = {str(c): r for c, r in runs[mode].items()}
            for clients in args.clients:
                base = statistics.median(r["topics_per_s"] for r in runs["plaintext"][clients])
                for mode in MODES:
                    rs = runs[mode][clients]
                    tps = [r["topics_per_s"] for r in rs]
                    print(f"{clients:>3} clients {mode:<11} {statistics.median(tps):7.0f} "
                          f"topics/s ({min(tps):.0f}–{max(tps):.0f}), p50 "
                          f"{statistics.median(r['p50_ms'] for r in rs):6.1f} ms, p99 "
                          f"{statistics.median(r['p99_ms'] for r in rs):6.1f} ms, "
                          f"{statistics.median(tps) / base:.2f}× plaintext", flush=True)
        finally:
            stop.set()
            await asyncio.gather(*beats, return_exceptions=True)
            for cluster in clusters.values():
                cluster.kill_all()
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tls_bench", description=__doc__)
    parser.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")],
                        default=[1, 16])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", help="write the raw numbers here")
    args = parser.parse_args(argv)
    results = asyncio.run(run(args))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
