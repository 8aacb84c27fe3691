"""One SparkSession (local[2], its JVM with tests/audit/jvm_flags.py) for every audit test,
and logs to audit: a generated valid log copied to three nodes, and the logs of a real
three-controller run with failovers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from audit.synthetic import SyntheticLog, generate


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from audit.session import spark_session
    from tests.audit.jvm_flags import quick_jvm_env

    # The JVM reads the flags as it starts; the tests' later subprocesses do not get them.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JDK_JAVA_OPTIONS", quick_jvm_env()["JDK_JAVA_OPTIONS"])
        session = spark_session("local[2]", shuffle_partitions=2)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, SyntheticLog]:
    """~20,000 records over several 256 KiB segments, identical on nodes 1, 2 and 3."""
    root = tmp_path_factory.mktemp("synthetic")
    info = generate(root, 20_000, partitions=200, epoch_every=60, segment_bytes=256 << 10)
    return root, info


@pytest.fixture(scope="session")
def real_run(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    from tests.audit.real_run import run_cluster

    return run_cluster(tmp_path_factory.mktemp("real"))
