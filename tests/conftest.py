"""How `make test` spreads the tests over two workers (pytest-xdist, --dist loadgroup): each
test file is one group, so its tests share their module fixtures (one cluster) and keep their
order on one worker; every Spark test (tests/audit) is one group, so one SparkSession (a JVM of
its own) serves them all instead of one per worker."""

from __future__ import annotations

import pytest

SPARK_GROUP = "spark"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        group = SPARK_GROUP if path.startswith("tests/audit/") else path
        item.add_marker(pytest.mark.xdist_group(group))
