"""Kafka for test suites (issue 33): `python -m bench.dev_start_bench [--trials 5]
[--bytecode cached|none] [--json PATH]`.

Timed from this process; the Kafka client is another process (confluent-kafka, imported before
the clock starts):

* **command -> first ack**: `kraft-server --dev --port P` (then `--brokers 3`) is started, and
  at the same moment the client is told to produce one record with acks=all to a topic that
  does not exist yet (created on first use); the time from the command to the client's
  delivery report. Then SIGINT (Ctrl-C) and the time until the command has exited with its
  directory removed.
* **fixture per test**: `with server.dev.cluster(brokers=1): pass`, what the function-scoped
  `kafka_cluster` fixture does around each test (start, every broker unfenced, stop, removal).
* **idle RSS**: a one-node `--dev` left alone for 3 s: VmRSS of the command (the supervisor)
  and of the node, and their PSS (the node is forked from the supervisor: shared pages count
  once in PSS).

`--bytecode cached` (default) runs the commands with a warmed private bytecode cache
(PYTHONPYCACHEPREFIX), as after `pip install`, which compiles; `none` leaves
PYTHONDONTWRITEBYTECODE as the environment has it (every module compiled at every start).
Goals: one node <= 1 s, three brokers <= 3 s, the fixture's start + stop <= 1.5 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.log_bench import machine
from harness.cluster import free_ports

GOALS_S = {"one node": 1.0, "three brokers": 3.0, "fixture": 1.5}
TOPIC = "first-use"


def spread(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "all": [round(v, 3) for v in values]}


def client_worker() -> int:
    """In the client process: wait for `go BOOTSTRAP`, produce one record with acks=all, print
    the CLOCK_MONOTONIC time of its delivery report (comparable across processes)."""
    from confluent_kafka import Producer

    print("ready", flush=True)
    _, bootstrap = sys.stdin.readline().split()
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 0})
    reports: list[tuple[Any, float]] = []
    producer.produce(TOPIC, b"x", on_delivery=lambda e, _m: reports.append((e, time.monotonic())))
    deadline = time.monotonic() + 60
    while not reports and time.monotonic() < deadline:
        producer.poll(0.005)
    error, acked_at = reports[0] if reports else ("no delivery report within 60 s", 0.0)
    print(json.dumps({"error": None if error is None else str(error), "acked_at": acked_at}),
          flush=True)
    return 0


def _kraft_server() -> str:
    return str(Path(sys.executable).with_name("kraft-server"))


def command_to_ack(brokers: int, env: dict[str, str]) -> dict[str, float]:
    port = free_ports(1)[0] if brokers == 1 else _consecutive_ports(brokers)
    client = subprocess.Popen([sys.executable, "-m", "bench.dev_start_bench", "--client"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert client.stdin is not None and client.stdout is not None
    assert client.stdout.readline().strip() == "ready"
    errors = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115  # closed below
    started = time.monotonic()
    server = subprocess.Popen([_kraft_server(), "--dev", "--brokers", str(brokers),
                               "--port", str(port)], stdout=subprocess.PIPE,
                              stderr=errors, text=True, env=env)
    assert server.stdout is not None
    bootstrap = server.stdout.readline().strip().removeprefix("bootstrap.servers=")
    client.stdin.write(f"go {bootstrap}\n")
    client.stdin.flush()
    report = json.loads(client.stdout.readline())
    client.wait(10)
    ready_line = server.stdout.readline()
    if report["error"] is not None or server.poll() is not None:
        server.kill()
        server.wait()
        errors.seek(0)
        raise RuntimeError(f"the client got {report['error']}: {errors.read()[-2000:]}")
    ready_s = float(ready_line.split()[2]) if ready_line.startswith("ready in") else -1.0
    stopping = time.monotonic()
    server.send_signal(signal.SIGINT)
    server.communicate(timeout=60)
    stopped = time.monotonic()
    errors.seek(0)
    err = errors.read()
    errors.close()
    assert server.returncode == 0 and "removed" in err, err
    return {"ack_s": report["acked_at"] - started, "ready_s": ready_s,
            "stop_s": stopped - stopping}


def _consecutive_ports(count: int) -> int:
    for _ in range(50):
        first = free_ports(1)[0]
        if first + count < 65536 and _all_free(range(first, first + count)):
            return first
    raise RuntimeError("no run of free ports")


def _all_free(ports: range) -> bool:
    import socket

    for port in ports:
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                return False
    return True


def fixture_cost(env: dict[str, str]) -> float:
    """start + stop of `server.dev.cluster(brokers=1)`, in a fresh process as a test session's
    first fixture would be, timed there (the interpreter's own start excluded)."""
    code = ("import time; t = time.monotonic()\n"
            "from server.dev import cluster\n"
            "with cluster(brokers=1): pass\n"
            "print(time.monotonic() - t)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=env, timeout=120, check=True).stdout
    return float(out.strip())


def _status(pid: int) -> dict[str, int]:
    values = {}
    for name in ("status", "smaps_rollup"):
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            key, _, rest = line.partition(":")
            if key in ("VmRSS", "Pss"):
                values[key] = int(rest.split()[0])
    return values


def idle_rss(env: dict[str, str]) -> dict[str, Any]:
    server = subprocess.Popen([_kraft_server(), "--dev", "--port", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    assert server.stdout is not None
    server.stdout.readline()
    server.stdout.readline()  # ready
    time.sleep(3)  # idle on purpose: what an idle dev node holds
    children = Path(f"/proc/{server.pid}/task/{server.pid}/children").read_text().split()
    supervisor = _status(server.pid)
    node = _status(int(children[0]))
    server.send_signal(signal.SIGINT)
    server.communicate(timeout=60)
    mib = 1024
    return {"supervisor_rss_mib": round(supervisor["VmRSS"] / mib, 1),
            "node_rss_mib": round(node["VmRSS"] / mib, 1),
            "pss_total_mib": round((supervisor["Pss"] + node["Pss"]) / mib, 1)}


def bench_env(bytecode: str, root: Path) -> dict[str, str]:
    env = dict(os.environ)
    if bytecode == "cached":
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.dev_start_bench", description=__doc__)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--bytecode", choices=("cached", "none"), default="cached")
    parser.add_argument("--json", type=Path)
    parser.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.client:
        return client_worker()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="dev-start-bench-") as tmp:
        env = bench_env(args.bytecode, Path(tmp))
        command_to_ack(1, env)  # warms the bytecode cache (and the page cache): not counted
        runs: dict[str, list[dict[str, float]]] = {"one node": [], "three brokers": []}
        fixture: list[float] = []
        failures: list[str] = []
        for _ in range(args.trials):  # interleaved, so a load change touches every shape
            for shape, brokers in (("one node", 1), ("three brokers", 3)):
                try:
                    runs[shape].append(command_to_ack(brokers, env))
                except RuntimeError as exc:  # recorded, and the trial not counted
                    failures.append(f"{shape}: {exc}")
                    print(f"failed trial, {shape}: {exc}", file=sys.stderr)
            fixture.append(fixture_cost(env))
        rss = idle_rss(env)
    results: dict[str, Any] = {"machine": machine(), "bytecode": args.bytecode,
                               "trials": args.trials, "load_before": load_before,
                               "load_after": os.getloadavg(), "idle": rss,
                               "failures": failures}
    for shape, trials in runs.items():
        results[shape] = {key: spread([t[key] for t in trials]) for key in trials[0]}
    results["fixture"] = {"start_stop_s": spread(fixture)}
    print(f"bytecode {args.bytecode}, {args.trials} trials, load "
          f"{load_before[0]:.2f} -> {results['load_after'][0]:.2f}")
    for shape in runs:
        ack = results[shape]["ack_s"]
        print(f"{shape}: command -> first acks=all ack median {ack['median']} s "
              f"({ack['min']}-{ack['max']}), goal {GOALS_S[shape]} s; ready "
              f"{results[shape]['ready_s']['median']} s; Ctrl-C -> exited "
              f"{results[shape]['stop_s']['median']} s")
    print(f"failed trials: {len(failures)}")
    cost = results["fixture"]["start_stop_s"]
    print(f"fixture (function scope) start + stop median {cost['median']} s "
          f"({cost['min']}-{cost['max']}), goal {GOALS_S['fixture']} s")
    print(f"idle one node: supervisor RSS {rss['supervisor_rss_mib']} MiB, node RSS "
          f"{rss['node_rss_mib']} MiB, PSS of both {rss['pss_total_mib']} MiB")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
