"""kraft-audit on a real standalone Spark cluster, run as a new user would run it: a master
and two workers started here with pyspark's own `bin/spark-class` on 127.0.0.1 (free ports,
small heaps), then `kraft-audit --master spark://...` with RELATIVE --log-dir and --out paths
from another working directory. The executors are separate JVMs with their own working
directories, so a path left relative, or a jar left on the driver's class path only, fails
here. The executors get no Python (PYSPARK_PYTHON=/bin/false): the job runs on their JVMs
only, so a cluster needs neither this package nor pyspark on its workers."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark
import pytest

from audit.synthetic import generate
from harness.cluster import free_ports, wait_for
from tests.audit.jvm_flags import quick_jvm_env

SPARK_HOME = Path(pyspark.__file__).parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
WORKERS = 2
START_TIMEOUT = 60.0
AUDIT_TIMEOUT = 150.0
NO_PYTHON = "/bin/false"  # any Python task on an executor fails at once

pytestmark = pytest.mark.slow  # pyspark ships bin/spark-class: without it the test fails


@dataclass
class Cluster:
    url: str  # spark://127.0.0.1:PORT
    webui: str  # http://127.0.0.1:PORT
    procs: list[subprocess.Popen]
    logs: list[Path]
    work: Path  # the workers' work directories live under it

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.webui}/json/", timeout=5) as answer:
            return json.load(answer)

    def log_tail(self) -> str:
        return "\n".join(f"--- {p.name}\n" + p.read_text(errors="replace")[-3000:]
                         for p in self.logs if p.exists())


def _spark_env(root: Path) -> dict[str, str]:
    conf = root / "conf"  # empty: no spark-env.sh or spark-defaults.conf from anywhere else
    conf.mkdir(exist_ok=True)
    # Every JVM here (daemons, executors) starts with jvm_flags.FLAGS.
    return {**quick_jvm_env(), "SPARK_HOME": os.fspath(SPARK_HOME),
            "SPARK_CONF_DIR": os.fspath(conf), "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m", "SPARK_LOG_DIR": os.fspath(root / "logs"),
            "PYSPARK_PYTHON": NO_PYTHON}


def _start(root: Path, env: dict[str, str], name: str, args: list[str]) -> tuple[
        subprocess.Popen, Path]:
    log = root / f"{name}.log"
    with open(log, "wb") as out:
        # Its own session: the worker's executors share its process group, which is ended
        # as a whole at the end (by this group id only).
        proc = subprocess.Popen([os.fspath(SPARK_CLASS), *args], cwd=root, env=env,
                                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return proc, log


def _stop(procs: list[subprocess.Popen]) -> None:
    """SIGTERM to each process group started here (a worker then stops its executors),
    SIGKILL to what is left after 15 s."""
    for proc in reversed(procs):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + 15
    for proc in procs:
        try:
            proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pass
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _wait(cluster: Cluster, ready, what: str) -> dict:  # type: ignore[no-untyped-def]
    """Poll the master's JSON status until `ready(state)`; fail fast if a daemon exits."""

    def status() -> dict | None:
        dead = [p for p in cluster.procs if p.poll() is not None]
        if dead:
            raise AssertionError(f"a Spark daemon exited ({dead[0].args[1]}) before {what}:\n"
                                 + cluster.log_tail())
        state = cluster.state()  # an OSError while the UI is not up yet is polled again
        return state if ready(state) else None

    try:
        return wait_for(status, START_TIMEOUT, what, poll_s=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{cluster.log_tail()}") from None


@contextlib.contextmanager
def standalone_cluster(root: Path) -> Iterator[Cluster]:
    env = _spark_env(root)
    port, webui, *worker_uis = free_ports(2 + WORKERS)
    procs: list[subprocess.Popen] = []
    logs: list[Path] = []
    cluster = Cluster(f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{webui}", procs, logs,
                      root / "work")
    try:
        proc, log = _start(root, env, "master", [
            "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
            "--webui-port", str(webui)])
        procs.append(proc)
        logs.append(log)
        _wait(cluster, lambda s: s.get("status") == "ALIVE", "master")
        for i in range(WORKERS):
            proc, log = _start(root, env, f"worker-{i}", [
                "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                "--cores", "1", "--memory", "768m", "--webui-port", str(worker_uis[i]),
                "--work-dir", os.fspath(cluster.work / str(i)), cluster.url])
            procs.append(proc)
            logs.append(log)
        _wait(cluster, lambda s: sum(w.get("state") == "ALIVE" for w in s.get("workers", []))
              == WORKERS, f"{WORKERS} registered workers")
        yield cluster
    finally:
        _stop(procs)


def _kraft_audit() -> list[str]:
    """The installed console script, as a user runs it (python -m audit.cli without one)."""
    script = Path(sys.executable).parent / "kraft-audit"
    return [os.fspath(script)] if script.exists() else [sys.executable, "-m", "audit.cli"]


def test_kraft_audit_on_a_standalone_cluster_with_relative_paths(tmp_path: Path) -> None:
    here = tmp_path / "here"  # the user's working directory, nowhere near the executors'
    info = generate(here / "demo-data", 3_000, partitions=100, epoch_every=15,
                    segment_bytes=64 << 10)
    spark_root = tmp_path / "spark"
    spark_root.mkdir()
    with standalone_cluster(spark_root) as cluster:
        env = {**quick_jvm_env(), "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": NO_PYTHON,
               "PYTHONPATH": os.pathsep.join(filter(None, (
                   os.fspath(Path(__file__).parents[2]), os.environ.get("PYTHONPATH"))))}
        started = time.monotonic()
        done = subprocess.run(
            [*_kraft_audit(), *(arg for n in (1, 2, 3)
                                for arg in ("--log-dir", f"demo-data/node-{n}")),
             "--out", "audit-out", "--master", cluster.url, "--partitions", "2",
             "--conf", "spark.executor.memory=512m", "--conf", "spark.cores.max=2"],
            cwd=here, env=env, capture_output=True, text=True, timeout=AUDIT_TIMEOUT,
            check=False)
        seconds = time.monotonic() - started
        assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-6000:],
                                      cluster.log_tail())
        report = (here / "audit-out" / "report.md").read_text()
        assert "verdict: no violations" in report
        assert f"log records replayed: {info.records:,}" in report
        assert (here / "audit-out" / "findings.parquet").is_file()
        # It ran on the cluster's executors: the master lists the application, and each
        # executor fetched the audit's jar (spark.jars) into its own directory.
        apps = cluster.state()
        names = [a.get("name") for a in (*apps.get("completedapps", []),
                                         *apps.get("activeapps", []))]
        assert "kraft-audit" in names, apps
        fetched = list(cluster.work.rglob("kraft-audit.jar"))
        assert fetched, sorted(os.fspath(p) for p in cluster.work.rglob("*"))[:50]
    print(f"kraft-audit on the standalone cluster took {seconds:.1f} s")
    shutil.rmtree(cluster.work, ignore_errors=True)
