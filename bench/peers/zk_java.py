"""ZooKeeper read with its own Java client: bench/peers/java/ZkFullRead.java is compiled with
javac at run time (into a build directory under the bench's temp dir) against the jars Debian's
`zookeeper` package installs (/usr/share/java/zookeeper.jar, whose manifest names its
dependencies, Jackson among them), then run once per read in a fresh JVM, as a new controller
would start. It does what `zk.ZooKeeper.full_read` does with kazoo (list the topics, read every
assignment, then every partition's state, async getData pipelined with at most zk.WINDOW in
flight, each state parsed); its own clock runs from before the connect to the last state
parsed, and the process's wall time (JVM start included) is kept beside it."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from bench.peers.zk import JAR, WINDOW

SOURCE = Path(__file__).resolve().parent / "java" / "ZkFullRead.java"
# Without a binding slf4j prints a warning on every start; the no-op binding keeps it quiet.
SLF4J_NOP = "/usr/share/java/slf4j-nop.jar"


def available() -> str | None:
    """Why the Java reader cannot run here, or None when it can."""
    for tool in ("javac", "java"):
        if shutil.which(tool) is None:
            return f"{tool} not found (a JDK, e.g. openjdk-17-jdk-headless)"
    if not os.path.exists(JAR):
        return f"{JAR} not found (apt-get install zookeeper)"
    return None


def build(directory: Path) -> str:
    """Compile the reader into `directory`; returns the class path to run it with."""
    directory.mkdir(parents=True, exist_ok=True)
    out = subprocess.run(["javac", "-d", str(directory), "-cp", JAR, str(SOURCE)],
                         capture_output=True, text=True, timeout=300)
    if out.returncode != 0:
        raise RuntimeError(f"javac {SOURCE.name} failed:\n{out.stderr}")
    parts = [str(directory), JAR] + ([SLF4J_NOP] if os.path.exists(SLF4J_NOP) else [])
    return os.pathsep.join(parts)


def full_read(classpath: str, port: int, heap_mb: int = 2048) -> dict[str, Any]:
    """One read of the whole partition state by a fresh JVM; times in ms."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    out = subprocess.run(["java", f"-Xmx{heap_mb}m", "-cp", classpath, "ZkFullRead",
                          f"127.0.0.1:{port}", str(WINDOW)],
                         capture_output=True, text=True, timeout=3600)
    wall_ms = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # the JVM's CPU, all its threads
    if out.returncode != 0:
        raise RuntimeError(f"ZkFullRead exited {out.returncode}:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    result["process_wall_ms"] = wall_ms
    result["client_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime
                                                                   - before.ru_stime)
    return result
