"""The simulator in `make test`: a fixed budget of seeds across every scenario, and proof that
the checker catches a deliberately broken core."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from kraft.core import rpc_fetch
from kraft.sim.__main__ import NAMES, plan, replay_command, run_many, run_seed

SEEDS = int(os.environ.get("KRAFT_SIM_SEEDS", "300"))


@pytest.fixture(autouse=True)
def quiet_protocol_logs() -> Iterator[None]:
    logger = logging.getLogger("kraft")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def test_simulator_seeds_hold_every_invariant() -> None:
    results = run_many(plan(SEEDS, 0, None), jobs=min(2, os.cpu_count() or 1))
    failures = [f"{r.detail.strip()}\n  replay: {replay_command(r)}" for r in results if not r.ok]
    assert not failures, "\n".join(failures)
    assert {r.scenario for r in results} == set(NAMES)


def test_a_seed_replays_identically() -> None:
    first = run_seed("chaos", 11)
    second = run_seed("chaos", 11)
    assert first.ok and (first.events, first.virtual_ms) == (second.events, second.virtual_ms)


def test_the_checker_catches_a_follower_that_acknowledges_unflushed_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The deliberate bug: voters fetch (and so acknowledge) before their log is durable.
    monkeypatch.setattr(rpc_fetch, "must_flush_first", lambda core: False)
    results = [run_seed(name, seed) for seed in range(2) for name in NAMES]
    caught = [r for r in results if not r.ok]
    assert caught, "the simulator did not notice acknowledgements of unflushed records"
    assert any("durable on only" in r.detail for r in caught)
