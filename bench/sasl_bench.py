"""SASL's cost on the broker (issue 29): `python -m bench.sasl_bench [--json PATH]`.

1. **Login CPU**, SCRAM-SHA-512 with 4,096 iterations (goal: <= 10 ms of broker CPU a login).
   In this process: the broker's side of a login alone (ApiVersions, SaslHandshake, two
   SaslAuthenticate frames decoded, answered and encoded), CPU time per login. In a broker
   process (one controller, one broker): N logins over SASL_PLAINTEXT and over SASL_SSL, the
   broker's CPU (/proc, minus its idle rate) divided by N; over SASL_SSL that includes the TLS
   handshake and the connection.
2. **100 logins at once** on a broker that is serving a producer (goal: produce not stalled
   for more than 100 ms): confluent-kafka produces acks=all, one 100-byte record every 5 ms,
   over SASL_SSL; after 3 s another process opens 100 connections at once and logs each in
   (SASL_SSL, SCRAM-SHA-512). Reported: the producer's latencies before and during the burst.
   The login clients hold the salted password (PBKDF2 once, not per login): a client's PBKDF2
   is the client's CPU, and on a 2-core machine it would be taken from the broker.
3. **Produce acks=all over SASL_SSL vs SSL with client certificates** (goal >= 0.85x), two
   clusters of three combined nodes, RF 3, min.insync.replicas=2, mutual TLS between the nodes;
   the producer (confluent-kafka, its defaults, acks=all, N records of 512 bytes per round)
   connects to an SSL listener with its certificate in one and to a SASL_SSL listener with
   SCRAM-SHA-512 in the other; and, as a control, to the second cluster's SSL listener too
   (same processes, same leaders); rounds interleaved, which goes first rotating.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import socket
import ssl
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._cluster import proc_cpu_seconds
from bench.authz_produce_bench import admin as run_admin
from bench.authz_produce_bench import one_round, secure_cluster, unfenced
from bench.log_bench import machine
from broker.kafka.codec import build, decode_response, encode_request, request_module
from broker.kafka.sasl.authenticator import SaslAuthenticator
from broker.kafka.sasl.settings import SaslSettings
from harness.cluster import ProcessCluster, free_ports, run_cli, wait_for
from kraft.security.certs import make_test_certs
from metadata.scram import ScramMechanism, credential_from_password, salted_password

USER, PASSWORD, ITERATIONS = "bench", "bench-secret", 4096
SALT = b"bench-salt"
MECHANISM = ScramMechanism.SCRAM_SHA_512
TOPIC = "bench-sasl"


# ---- a SCRAM client that holds the salted password (no PBKDF2 per login) ----

def _frame(correlation_id: int, api_key: int, version: int, class_name: str,
           **fields: Any) -> bytes:
    return encode_request(correlation_id, "sasl-bench",
                          build(request_module(api_key, version), class_name, **fields))


def _answer(sock: socket.socket, api_key: int, version: int) -> Any:
    size = struct.unpack(">i", _recv(sock, 4))[0]
    return decode_response(api_key, version, _recv(sock, size))[1]


def _recv(sock: socket.socket, count: int) -> bytes:
    data = b""
    while len(data) < count:
        chunk = sock.recv(count - len(data))
        if not chunk:
            raise ConnectionError("closed by the broker")
        data += chunk
    return data


def scram_messages(salted: bytes, server_first: bytes, nonce: str) -> tuple[bytes, bytes]:
    """(client-final, expected server-final) for a server-first message."""
    params = dict(item.split("=", 1) for item in server_first.decode().split(","))
    without_proof = f"c=biws,r={params['r']}"
    auth = f"n={USER},r={nonce},{server_first.decode()},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", "sha512")
    signature = hmac.digest(hashlib.sha512(client_key).digest(), auth, "sha512")
    proof = (int.from_bytes(client_key) ^ int.from_bytes(signature)).to_bytes(len(signature))
    server_signature = hmac.digest(hmac.digest(salted, b"Server Key", "sha512"), auth, "sha512")
    return (f"{without_proof},p={base64.b64encode(proof).decode()}".encode(),
            b"v=" + base64.b64encode(server_signature))


def login(port: int, context: ssl.SSLContext | None, salted: bytes) -> None:
    """One client's login as librdkafka does it: ApiVersions, SaslHandshake v1, two
    SaslAuthenticate; raises unless the broker accepts and signs."""
    raw = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock = context.wrap_socket(raw, server_hostname="127.0.0.1") if context else raw
    with sock:
        nonce = base64.b64encode(os.urandom(18)).decode()
        sock.sendall(_frame(1, 18, 3, "ApiVersionsRequest", client_software_name="bench",
                            client_software_version="1")
                     + _frame(2, 17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-512")
                     + _frame(3, 36, 1, "SaslAuthenticateRequest",
                              auth_bytes=f"n,,n={USER},r={nonce}".encode()))
        _answer(sock, 18, 3)
        _answer(sock, 17, 1)
        first = _answer(sock, 36, 1)
        final, expected = scram_messages(salted, first.auth_bytes, nonce)
        sock.sendall(_frame(4, 36, 1, "SaslAuthenticateRequest", auth_bytes=final))
        answer = _answer(sock, 36, 1)
        if answer.error_code != 0 or answer.auth_bytes != expected:
            raise RuntimeError(f"login refused: {answer.error_message}")


# ---- 1. login CPU ----

def inprocess_login_cpu(logins: int) -> dict[str, float]:
    """The broker's side of a SCRAM-SHA-512 login, CPU per login, in this process."""
    from broker.kafka.codec import encode_response

    credential = credential_from_password(MECHANISM, PASSWORD, SALT, ITERATIONS)
    settings = SaslSettings(("SCRAM-SHA-512",), scram_credentials=lambda u, m: credential)
    salted = salted_password(MECHANISM, PASSWORD.encode(), SALT, ITERATIONS)
    frames = [_frame(1, 18, 3, "ApiVersionsRequest", client_software_name="bench",
                     client_software_version="1")[4:],
              _frame(2, 17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-512")[4:]]
    costs = []
    for _ in range(logins):
        sasl = SaslAuthenticator(settings, time.monotonic)
        nonce = base64.b64encode(os.urandom(18)).decode()
        first = _frame(3, 36, 1, "SaslAuthenticateRequest",
                       auth_bytes=f"n,,n={USER},r={nonce}".encode())[4:]
        spent = 0
        for frame in (*frames, first):
            started = time.thread_time_ns()
            step = sasl.receive(frame)
            encode_response(step.correlation_id, step.response)
            spent += time.thread_time_ns() - started
        final, _ = scram_messages(salted, step.response.auth_bytes, nonce)  # the client's
        frame = _frame(4, 36, 1, "SaslAuthenticateRequest", auth_bytes=final)[4:]
        started = time.thread_time_ns()
        step = sasl.receive(frame)
        encode_response(step.correlation_id, step.response)
        spent += time.thread_time_ns() - started
        assert sasl.authenticated
        costs.append(spent / 1e6)
    costs.sort()
    return {"logins": logins, "median_ms": statistics.median(costs),
            "p99_ms": costs[int(len(costs) * 0.99) - 1], "max_ms": costs[-1]}


def set_config(path: Path, settings: dict[str, str]) -> None:
    lines = [line for line in path.read_text().splitlines()
             if line.split("=", 1)[0] not in settings]
    path.write_text("\n".join([*lines, *(f"{k}={v}" for k, v in settings.items())]) + "\n")


def sasl_broker(root: Path, certs: dict[str, Path]) -> tuple[ProcessCluster, dict[str, int]]:
    """One controller and one broker with SASL_SSL and SASL_PLAINTEXT listeners
    (SCRAM-SHA-512, the bench user bootstrapped by format --add-scram)."""
    cluster = ProcessCluster(root, 1, {"internal.test.hooks.enable": "false"})
    (broker,) = cluster.add_brokers([2]).values()
    secure, plain = free_ports(2)
    set_config(broker.config_path, {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.kafka_port},ADMIN://127.0.0.1:"
                     f"{broker.port},SECURE://127.0.0.1:{secure},SASLPLAIN://127.0.0.1:{plain}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "ADMIN:PLAINTEXT,SECURE:SASL_SSL,SASLPLAIN:"
                                          "SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.location": str(certs["broker"]),
        "ssl.truststore.location": str(certs["ca"]),
        "offsets.topic.replication.factor": "1",
    })
    cluster.cluster_id = run_cli("server.storage_cli", "random-uuid").stdout.strip()
    scram = f"SCRAM-SHA-512=[name={USER},password={PASSWORD},iterations={ITERATIONS}]"
    cluster.format_node(1, cluster.cluster_id, "--add-scram", scram)
    cluster.format_node(2, cluster.cluster_id)
    cluster.start_all()
    cluster.wait_brokers_unfenced([2], 300)
    return cluster, {"SASL_SSL": secure, "SASL_PLAINTEXT": plain}


def broker_login_cpu(pid: int, port: int, context: ssl.SSLContext | None, logins: int,
                     salted: bytes) -> dict[str, float]:
    idle_started, idle_cpu = time.monotonic(), proc_cpu_seconds(pid)
    time.sleep(3)  # the broker's own background rate, to subtract
    idle_rate = (proc_cpu_seconds(pid) - idle_cpu) / (time.monotonic() - idle_started)
    started, cpu = time.monotonic(), proc_cpu_seconds(pid)
    for _ in range(logins):
        login(port, context, salted)
    elapsed = time.monotonic() - started
    spent = proc_cpu_seconds(pid) - cpu - idle_rate * elapsed
    return {"logins": logins, "broker_cpu_ms_per_login": spent / logins * 1000,
            "idle_cpu_rate": idle_rate, "elapsed_s": elapsed}


# ---- 2. 100 logins at once while producing ----

BURST_SCRIPT = """
import ssl, sys, threading, time
sys.path.insert(0, {root!r})
from bench.sasl_bench import login
context = ssl.create_default_context(cafile={ca!r})
salted = bytes.fromhex({salted!r})
barrier = threading.Barrier({clients})
failed = []
def one():
    barrier.wait()
    try:
        login({port}, context, salted)
    except Exception as exc:
        failed.append(repr(exc))
threads = [threading.Thread(target=one) for _ in range({clients})]
for t in threads: t.start()
started = time.time()
for t in threads: t.join()
print(started, time.time(), len(failed), failed[:3])
"""


def burst_while_producing(port: int, ca: Path, salted: bytes, clients: int) -> dict[str, Any]:
    from confluent_kafka import Producer

    producer = Producer({
        "bootstrap.servers": f"127.0.0.1:{port}", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER, "sasl.password": PASSWORD,
        "ssl.ca.location": str(ca), "acks": "all", "linger.ms": 0})
    producer.produce(TOPIC, b"warm-up")
    producer.flush(60)
    latencies: list[tuple[float, float]] = []  # (sent at, latency s)

    def record(sent: float) -> Any:
        def delivered(err: Any, _msg: Any) -> None:
            if err is None:
                latencies.append((sent, time.time() - sent))
        return delivered

    script = BURST_SCRIPT.format(root=str(Path(__file__).resolve().parents[1]), ca=str(ca),
                                 salted=salted.hex(), clients=clients, port=port)
    burst: subprocess.Popen[str] | None = None
    started = time.time()
    finished: float | None = None  # when the logins were all done
    # 3 s of produce alone, then the burst, then 2 s more after its last login.
    while finished is None or time.time() - finished < 2:
        now = time.time()
        if burst is None and now - started >= 3:
            burst = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                                     text=True)
        if burst is not None and finished is None and burst.poll() is not None:
            finished = now
        if now - started > 120:
            raise SystemExit("the logins did not finish within 120 s")
        producer.produce(TOPIC, b"x" * 100, on_delivery=record(now))
        producer.poll(0)
        time.sleep(0.005)  # the producer's pace: one record per 5 ms
    producer.flush(60)
    assert burst is not None
    out, _ = burst.communicate(timeout=120)
    burst_start, burst_end, failures, examples = out.strip().split(" ", 3)
    window = (float(burst_start), float(burst_end) + 0.5)
    before = sorted(lat for sent, lat in latencies if sent < window[0])
    during = sorted(lat for sent, lat in latencies if window[0] <= sent <= window[1])

    def stats(values: list[float]) -> dict[str, float]:
        return {"records": len(values), "median_ms": statistics.median(values) * 1000,
                "p99_ms": values[int(len(values) * 0.99) - 1] * 1000, "max_ms": values[-1] * 1000}

    return {"clients": clients, "logins_s": float(burst_end) - float(burst_start),
            "failed_logins": int(failures), "failure_examples": examples,
            "before": stats(before), "during": stats(during)}


# ---- 3. produce acks=all: SASL_SSL vs SSL with client certificates ----

def sasl_produce_cluster(root: Path, certs: dict[str, Path]) -> tuple[ProcessCluster, list[int]]:
    """authz_produce_bench's mutual-TLS cluster plus a SASL_SSL client listener per node."""
    cluster = secure_cluster(root, certs, authz=False)
    ports = free_ports(len(cluster.nodes))
    for port, node in zip(ports, cluster.nodes.values(), strict=True):
        text = node.config_path.read_text()
        listeners = next(line for line in text.splitlines() if line.startswith("listeners="))
        set_config(node.config_path, {
            "listeners": f"{listeners.split('=', 1)[1]},CLIENT://127.0.0.1:{port}",
            "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:SSL,ADMIN:SSL,"
                                              "CLIENT:SASL_SSL",
            "inter.broker.listener.name": "PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    return cluster, ports


def produce_ratio(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    names = ["node-1", "node-2", "node-3", "admin", "producer"]
    certs = make_test_certs(root / "certs3", names)
    admin_config = root / "admin.properties"
    admin_config.write_text(f"security.protocol=SSL\nssl.keystore.location={certs['admin']}\n"
                            f"ssl.truststore.location={certs['ca']}\n")
    ssl_cluster = secure_cluster(root / "ssl", certs, authz=False)
    sasl_cluster, client_ports = sasl_produce_cluster(root / "sasl", certs)
    scram = f"SCRAM-SHA-512=[name={USER},password={PASSWORD},iterations={ITERATIONS}]"
    clusters = {"ssl": ssl_cluster, "sasl_ssl": sasl_cluster}
    try:
        for mode, cluster in clusters.items():
            cluster.cluster_id = run_cli("server.storage_cli", "random-uuid").stdout.strip()
            for node_id in cluster.nodes:
                flags = ("--add-scram", scram) if mode == "sasl_ssl" else ()
                cluster.format_node(node_id, cluster.cluster_id, *flags)
            cluster.start_all()
            wait_for(lambda c=cluster: unfenced(c, admin_config) == [1, 2, 3], 300,  # type: ignore[misc]
                     f"{mode}: three brokers registered and unfenced")
            run_admin(cluster, admin_config, "topics", "create", "--topic", "bench-authz",
                      "--partitions", "3", "--replication-factor", "3",
                      "--config", "min.insync.replicas=2")
        configs = {
            "ssl": {"bootstrap.servers": ssl_cluster.bootstrap_servers(), "acks": "all",
                    "security.protocol": "SSL", "ssl.ca.location": str(certs["ca"]),
                    "ssl.certificate.location": str(certs["producer"]),
                    "ssl.key.location": str(certs["producer"])},
            "sasl_ssl": {"bootstrap.servers": ",".join(f"127.0.0.1:{p}" for p in client_ports),
                         "acks": "all", "security.protocol": "SASL_SSL",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": USER,
                         "sasl.password": PASSWORD, "ssl.ca.location": str(certs["ca"])}}
        # The SASL cluster's own SSL listener too: the same processes and leaders, so the
        # two listeners compare without the difference between two clusters.
        configs["ssl_same_cluster"] = {**configs["ssl"],
                                       "bootstrap.servers": sasl_cluster.bootstrap_servers()}
        rates: dict[str, list[float]] = {mode: [] for mode in configs}
        order = list(configs)
        for round_ in range(args.repeat):
            # Rotate which goes first, so a machine that speeds up or slows down within a
            # round favours none.
            for mode in order[round_ % 3:] + order[:round_ % 3]:
                rate = one_round(configs[mode], args.records)
                rates[mode].append(rate)
                print(f"round {round_ + 1} {mode:>8}: {rate:,.0f} records/s", flush=True)
    finally:
        for cluster in clusters.values():
            cluster.stop_all()
    medians = {mode: statistics.median(values) for mode, values in rates.items()}
    ratio = medians["sasl_ssl"] / medians["ssl"]
    return {"records": args.records, "repeat": args.repeat, "rates": rates, "medians": medians,
            "spread": {m: [min(r), max(r)] for m, r in rates.items()}, "ratio": ratio,
            "ratio_same_cluster": medians["sasl_ssl"] / medians["ssl_same_cluster"],
            "goal": 0.85, "verdict": "met" if ratio >= 0.85 else "MISSED"}


def run(args: argparse.Namespace) -> dict[str, Any]:
    result: dict[str, Any] = {"machine": machine(), "load_before": os.getloadavg()}
    inprocess = inprocess_login_cpu(args.logins)
    result["login_inprocess"] = inprocess
    print(f"login, broker side in-process: median {inprocess['median_ms']:.3f} ms, "
          f"p99 {inprocess['p99_ms']:.3f} ms", flush=True)
    with tempfile.TemporaryDirectory(prefix="kraft-sasl-bench-") as tmp:
        root = Path(tmp)
        if "broker" in args.parts:
            certs = make_test_certs(root / "certs", ["broker"])
            cluster, ports = sasl_broker(root / "one", certs)
            try:
                process = cluster.nodes[2].process
                assert process is not None
                # The bootstrapped credential has its own random salt: derive from it.
                salted = _salted_for_broker(ports["SASL_PLAINTEXT"])
                context = ssl.create_default_context(cafile=str(certs["ca"]))
                for protocol, context_ in (("SASL_PLAINTEXT", None), ("SASL_SSL", context)):
                    cost = broker_login_cpu(process.pid, ports[protocol], context_,
                                            args.broker_logins, salted)
                    result[f"login_broker_{protocol.lower()}"] = cost
                    print(f"login over {protocol}: {cost['broker_cpu_ms_per_login']:.2f} ms "
                          "of broker CPU", flush=True)
                burst = burst_while_producing(ports["SASL_SSL"], certs["ca"], salted,
                                              args.clients)
                result["burst"] = burst
                print(f"{args.clients} logins at once ({burst['logins_s']:.2f} s, "
                      f"{burst['failed_logins']} failed): produce latency max "
                      f"{burst['before']['max_ms']:.0f} ms before, "
                      f"{burst['during']['max_ms']:.0f} ms during", flush=True)
            finally:
                cluster.stop_all()
                if args.keep_log:
                    Path(args.keep_log).write_text(cluster.logs(2))
        if "produce" in args.parts:
            result["produce"] = produce_ratio(args, root)
            produce = result["produce"]
            print(f"medians: ssl {produce['medians']['ssl']:,.0f}/s, sasl_ssl "
                  f"{produce['medians']['sasl_ssl']:,.0f}/s -> {produce['ratio']:.2f}x "
                  f"(goal >= 0.85x): {produce['verdict']}; the SASL cluster's SSL listener "
                  f"{produce['medians']['ssl_same_cluster']:,.0f}/s -> "
                  f"{produce['ratio_same_cluster']:.2f}x", flush=True)
    result["load_after"] = os.getloadavg()
    return result


def _salted_for_broker(port: int) -> bytes:
    """The salted password of the bootstrapped credential: its salt and iterations come in
    the server-first message (PBKDF2 once here, as a client caches it)."""
    nonce = "salt-probe"
    with socket.create_connection(("127.0.0.1", port), timeout=60) as sock:
        sock.sendall(_frame(1, 17, 1, "SaslHandshakeRequest", mechanism="SCRAM-SHA-512")
                     + _frame(2, 36, 1, "SaslAuthenticateRequest",
                              auth_bytes=f"n,,n={USER},r={nonce}".encode()))
        _answer(sock, 17, 1)
        first = _answer(sock, 36, 1).auth_bytes.decode()
    params = dict(item.split("=", 1) for item in first.split(","))
    return salted_password(MECHANISM, PASSWORD.encode(), base64.b64decode(params["s"]),
                           int(params["i"]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.sasl_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logins", type=int, default=2000, help="in-process logins")
    parser.add_argument("--broker-logins", type=int, default=300)
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--parts", default="broker,produce")
    parser.add_argument("--keep-log", help="copy the single broker's log here")
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    args.parts = set(args.parts.split(","))
    result = run(args)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(result, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
