"""The pytest plugin shipped with kraft-quorum (entry point `pytest11`): a real Kafka cluster
per test, or shared by a session, with faults on demand. docs/testing-with-kraft.md.

    @pytest.mark.kafka_cluster(brokers=3)
    def test_survives_a_broker(kafka_cluster):
        producer = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers})
        kafka_cluster.kill_broker(kafka_cluster.leader_of("orders", 0))

The marker (on a test, class or module) takes `brokers` (1: one combined node), `scope`
("function": a cluster of its own, started and removed around the test; "session": one per
shape for the whole run, its killed or paused brokers brought back after each test) and
`overrides` (node settings or cluster-wide broker configs). The ini option
`kafka_cluster_scope` sets the default scope. Loading the plugin imports nothing but pytest:
the cluster's modules load when a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from server.dev_cluster import DevCluster

SCOPES = ("function", "session")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("kafka_cluster_scope", "the default scope of the kafka_cluster fixture: "
                  "function (a cluster per test) or session (shared, healed after each test)",
                  default="function")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "kafka_cluster(brokers=1, scope=None, overrides=None): the shape of the "
        "kafka_cluster fixture's cluster (kraft-quorum)")


def _shape(request: pytest.FixtureRequest) -> tuple[int, str, tuple[tuple[str, str], ...]]:
    marker = request.node.get_closest_marker("kafka_cluster")
    options: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    if marker is not None and marker.args:
        options.setdefault("brokers", marker.args[0])
    brokers = int(options.pop("brokers", 1))
    scope = str(options.pop("scope", None) or request.config.getini("kafka_cluster_scope"))
    overrides = tuple(sorted((str(k), str(v))
                             for k, v in (options.pop("overrides", None) or {}).items()))
    if options:
        raise pytest.UsageError(f"kafka_cluster marker: unknown options {sorted(options)}")
    if scope not in SCOPES:
        raise pytest.UsageError(f"kafka_cluster scope must be one of {SCOPES}, not {scope!r}")
    return brokers, scope, overrides


class _SharedClusters:
    """The session's clusters, one per (brokers, overrides), started on first use."""

    def __init__(self) -> None:
        self.clusters: dict[tuple[int, tuple[tuple[str, str], ...]], DevCluster] = {}

    def get(self, brokers: int, overrides: tuple[tuple[str, str], ...]) -> DevCluster:
        key = (brokers, overrides)
        if key not in self.clusters:
            from server.dev_cluster import launch

            self.clusters[key] = launch(brokers, overrides=dict(overrides))
        return self.clusters[key]

    def close(self) -> None:
        for cluster in self.clusters.values():
            cluster.close()
        self.clusters.clear()


@pytest.fixture(scope="session")
def kafka_cluster_pool() -> Iterator[_SharedClusters]:
    """The session-scoped clusters behind `kafka_cluster` with scope="session"."""
    pool = _SharedClusters()
    try:
        yield pool
    finally:
        pool.close()


@pytest.fixture
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[DevCluster]:
    """A running Kafka cluster (server.dev_cluster.DevCluster): `bootstrap_servers`,
    `create_topic`, `leader_of`, `wait_isr`, `kill_broker`, `pause_broker`, `resume_broker`,
    `restart_broker`, ... Shaped by the `kafka_cluster` marker."""
    brokers, scope, overrides = _shape(request)
    if scope == "session":
        pool: _SharedClusters = request.getfixturevalue("kafka_cluster_pool")
        cluster = pool.get(brokers, overrides)
        try:
            yield cluster
        finally:
            cluster.heal()
        return
    from server.dev_cluster import launch

    cluster = launch(brokers, overrides=dict(overrides))
    try:
        yield cluster
    finally:
        cluster.close()
