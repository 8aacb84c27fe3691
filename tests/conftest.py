"""How `make test` (pytest -n 2 --dist loadfile) spreads the suite over its two workers.

xdist's loadfile hands out whole files, the files with the most tests first: the one-test
files that start real clusters or JVMs (the standalone Spark cluster, the chaos campaign) came
last, and one worker ran them alone while the other had nothing left to do. Here the files that
start processes go first and the many small unit files last, so the two workers finish
together. And the audit files that share the session-scoped `spark` fixture are one work unit:
a session fixture is per worker, so split over two workers they started two SparkSessions."""

from __future__ import annotations

from collections import Counter

import pytest

# One work unit: these files share the `spark` session fixture (tests/audit/conftest.py).
SPARK_UNIT = "tests/audit/"
# It starts its own standalone Spark cluster and uses no SparkSession: a unit of its own.
OWN_SPARK = ("tests/audit/test_audit_cluster.py",)
# Rough seconds per test, to order the work units (not a limit): a directory's tests start
# processes (integration: clusters; audit: Spark jobs; sim: long seeded runs) or do not.
PER_TEST_S = {"tests/integration/": 8.0, "tests/audit/": 3.0, "tests/sim/": 10.0}
OTHER_TEST_S = 0.1
SLOW_TEST_S = 90.0  # @pytest.mark.slow
# A file's module-scoped cluster, or the unit's SparkSession, starting.
UNIT_START_S = {"tests/integration/": 15.0, "tests/audit/": 15.0}


def work_unit(nodeid: str) -> str:
    """The unit a test is handed out in: its file, or the audit's shared-Spark unit."""
    path = nodeid.split("::", 1)[0]
    if path.startswith(SPARK_UNIT) and path not in OWN_SPARK:
        return SPARK_UNIT
    return path


def _kind(nodeid: str) -> str:
    return next((d for d in PER_TEST_S if nodeid.startswith(d)), "")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The units with the most estimated seconds first; each unit's tests stay together and
    in their order (a stable sort), so module fixtures are still set up once."""
    cost: Counter[str] = Counter()
    for item in items:
        kind = _kind(item.nodeid)
        unit = work_unit(item.nodeid)
        if unit not in cost:
            cost[unit] = UNIT_START_S.get(kind, 0.0)
        slow = item.get_closest_marker("slow") is not None
        cost[unit] += SLOW_TEST_S if slow else PER_TEST_S.get(kind, OTHER_TEST_S)
    first = {work_unit(item.nodeid): i for i, item in reversed(list(enumerate(items)))}
    items.sort(key=lambda item: (-cost[work_unit(item.nodeid)], first[work_unit(item.nodeid)]))


@pytest.hookimpl(optionalhook=True, tryfirst=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):  # type: ignore[no-untyped-def]
    """--dist loadfile, by work_unit, in the collection's order (the order above)."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class UnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # keep the collection's order of the units
    return UnitScheduling(config, log)
