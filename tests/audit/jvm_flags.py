"""JVM flags for the tests' Spark JVMs (the `spark` fixture's, and the standalone cluster's
master, workers, executors and kraft-audit driver): C1 only and the serial collector. A test's
JVM lives seconds to minutes on tiny logs: C2's compiler threads and the parallel collector's
burn CPU it never earns back, and on the 2-core machine `make test` runs on that CPU is the
other worker's. Measured: the standalone cluster's JVMs used 67 s of CPU instead of 122 s for
the same audit, test_audit_checks.py took 154 s instead of 262 s (load 11-16)."""

from __future__ import annotations

import os

FLAGS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def quick_jvm_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """`env` (default os.environ) with FLAGS added to JDK_JAVA_OPTIONS, which every `java`
    launched with it reads, Spark's launcher and the JVMs it starts included."""
    base = dict(os.environ if env is None else env)
    base["JDK_JAVA_OPTIONS"] = " ".join(filter(None, (base.get("JDK_JAVA_OPTIONS"), FLAGS)))
    return base
