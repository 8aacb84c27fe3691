"""Produce acks=all over mutual TLS with and without the authorizer:
`python -m bench.authz_produce_bench [--json PATH]`.

Two clusters run side by side, identical but for authorization: three combined nodes each
(controller + broker), every listener mutual TLS, a topic of 3 partitions with RF 3 and
min.insync.replicas=2. In `mtls+authz` the nodes run Kafka's StandardAuthorizer with 1,000 ACL
bindings in the metadata log (half PREFIXED, for 100 principals; one of them lets the
producer WRITE the topic) and the producer is not a super user, so every Produce is decided
from the ACLs. In `mtls` there is no authorizer. The producer is confluent-kafka (librdkafka)
in this process, talking to the brokers' processes over TLS, with the client's defaults and
acks=all; each round sends N records of 512 bytes and times from the first send to the last
acknowledgement. Rounds alternate between the clusters so machine noise falls on both alike.
Reported: records/s per round, medians with spread, and the ratio (goal: >= 0.85x).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.log_bench import machine
from harness.cluster import ProcessCluster, run_cli, wait_for
from kraft.security.certs import make_test_certs, principal_of

MODES = ("mtls", "mtls+authz")
TOPIC = "bench-authz"
VALUE = b"x" * 512
NAMES = ["node-1", "node-2", "node-3", "admin", "producer"]


def secure_cluster(root: Path, certs: dict[str, Path], authz: bool) -> ProcessCluster:
    extra = {"internal.test.hooks.enable": "false",
             "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:SSL,ADMIN:SSL",
             "ssl.truststore.location": str(certs["ca"]), "ssl.client.auth": "required"}
    if authz:
        extra |= {"authorizer.class.name": "StandardAuthorizer",
                  "super.users": ";".join(principal_of(n) for n in NAMES[:4])}
    cluster = ProcessCluster(root, 3, extra)
    cluster.make_combined()
    for node_id, node in cluster.nodes.items():
        with node.config_path.open("a") as config:
            config.write(f"ssl.keystore.location={certs[f'node-{node_id}']}\n")
    return cluster


def admin(cluster: ProcessCluster, client_config: Path, *args: str) -> None:
    out = run_cli("server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint,
                  "--command-config", str(client_config), *args)
    if out.returncode != 0:
        raise SystemExit(f"kraft-admin {' '.join(args)} failed: {out.stderr.strip()}")


def unfenced(cluster: ProcessCluster, client_config: Path) -> list[int]:
    out = run_cli("server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint,
                  "--command-config", str(client_config), "brokers", "list", "--json")
    listed = json.loads(out.stdout) if out.returncode == 0 else []
    return sorted(b["id"] for b in listed if not b["fenced"])


def bindings_file(path: Path, count: int) -> Path:
    """`count` bindings as `kraft-admin acls --list --json` prints them; the producer's WRITE
    on the topic is one of them, the rest belong to other principals and names."""
    acls = [{"resourceType": "TOPIC", "resourceName": TOPIC, "patternType": "LITERAL",
             "principal": principal_of("producer"), "host": "*", "operation": "WRITE",
             "permissionType": "ALLOW"}]
    for i in range(count - 1):
        prefixed = i % 2 == 0
        acls.append({
            "resourceType": "TOPIC" if i % 3 else "GROUP",
            "resourceName": f"team-{i}-" if prefixed else f"topic-{i}",
            "patternType": "PREFIXED" if prefixed else "LITERAL",
            "principal": f"User:svc-{i % 100}", "host": "*",
            "operation": ("READ", "WRITE", "DESCRIBE")[i % 3],
            "permissionType": "DENY" if i % 10 == 0 else "ALLOW"})
    path.write_text(json.dumps({"acls": acls}))
    return path


def producer_config(cluster: ProcessCluster, certs: dict[str, Path]) -> dict[str, Any]:
    return {"bootstrap.servers": cluster.bootstrap_servers(), "acks": "all",
            "security.protocol": "SSL", "ssl.ca.location": str(certs["ca"]),
            "ssl.certificate.location": str(certs["producer"]),
            "ssl.key.location": str(certs["producer"])}


def one_round(config: dict[str, Any], records: int) -> float:
    """records/s from the first send to the last acknowledgement."""
    producer = Producer(config)
    producer.produce(TOPIC, VALUE)  # connect and learn the leaders before the clock starts
    if producer.flush(30):
        raise SystemExit("warm-up record not acknowledged")
    failed: list[Any] = []

    def on_delivery(err: Any, _message: Any) -> None:
        if err is not None:
            failed.append(err)

    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                producer.produce(TOPIC, VALUE, on_delivery=on_delivery)
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
    if producer.flush(120):
        raise SystemExit("records not acknowledged within 120 s")
    elapsed = time.perf_counter() - started
    if failed:
        raise SystemExit(f"produce failed: {failed[:3]}")
    return records / elapsed


def run(args: argparse.Namespace) -> dict[str, Any]:
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="kraft-authz-bench-") as tmp:
        root = Path(tmp)
        certs = make_test_certs(root / "certs", NAMES)
        admin_config = root / "admin.properties"
        admin_config.write_text(f"security.protocol=SSL\nssl.keystore.location="
                                f"{certs['admin']}\nssl.truststore.location={certs['ca']}\n")
        clusters = {mode: secure_cluster(root / mode.replace("+", "-"), certs,
                                         authz=mode.endswith("authz")) for mode in MODES}
        try:
            for mode, cluster in clusters.items():
                cluster.format()
                cluster.start_all()
                wait_for(lambda c=cluster: unfenced(c, admin_config) == [1, 2, 3], 90,  # type: ignore[misc]
                         f"{mode}: three brokers registered and unfenced over mTLS")
                admin(cluster, admin_config, "topics", "create", "--topic", TOPIC,
                      "--partitions", "3", "--replication-factor", "3",
                      "--config", "min.insync.replicas=2")
                if mode.endswith("authz"):
                    acls = bindings_file(root / "acls.json", args.bindings)
                    admin(cluster, admin_config, "acls", "--add", "--from-file", str(acls))
            rates: dict[str, list[float]] = {m: [] for m in MODES}
            for round_ in range(args.repeat):
                for mode in MODES:
                    rate = one_round(producer_config(clusters[mode], certs), args.records)
                    rates[mode].append(rate)
                    print(f"round {round_ + 1} {mode:>11}: {rate:,.0f} records/s", flush=True)
        finally:
            for cluster in clusters.values():
                cluster.stop_all()
    medians = {m: statistics.median(r) for m, r in rates.items()}
    ratio = medians["mtls+authz"] / medians["mtls"]
    return {"machine": machine(), "load_before": load_before, "load_after": os.getloadavg(),
            "records": args.records, "bindings": args.bindings, "repeat": args.repeat,
            "rates": rates, "medians": medians,
            "spread": {m: [min(r), max(r)] for m, r in rates.items()},
            "ratio": ratio, "goal": 0.85, "verdict": "met" if ratio >= 0.85 else "MISSED"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.authz_produce_bench",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--bindings", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    result = run(args)
    print(f"medians: mtls {result['medians']['mtls']:,.0f}/s, mtls+authz "
          f"{result['medians']['mtls+authz']:,.0f}/s -> {result['ratio']:.2f}x "
          f"(goal >= 0.85x): {result['verdict']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(result, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
