from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.cluster import ProcessCluster


@pytest.fixture
def make_cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[type]:
    """Build clusters under tmp_path; every process is killed at teardown, and the node logs are
    printed when the test failed."""
    clusters: list[ProcessCluster] = []

    def factory(size: int = 3, **extra: str) -> ProcessCluster:
        root = tmp_path / f"cluster-{len(clusters)}"
        root.mkdir()
        cluster = ProcessCluster(root, size, {k.replace("_", "."): v for k, v in extra.items()})
        clusters.append(cluster)
        return cluster

    yield factory  # type: ignore[misc]
    for cluster in clusters:
        cluster.stop_all()
        if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
            for node_id in cluster.nodes:
                print(f"----- node {node_id} log -----\n{cluster.logs(node_id)[-6000:]}")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)
