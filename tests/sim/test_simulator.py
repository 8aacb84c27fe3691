"""The simulator in `make test`: a fixed budget of seeds across every scenario, and proof that
the checker catches a deliberately broken core."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest

from kraft.core import rpc_fetch, rpc_fetch_snapshot
from kraft.sim.__main__ import NAMES, plan, replay_command, run_many, run_seed
from kraft.sim.state_machine import SimStateMachine

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


def test_wiped_voters_come_back_through_fetch_snapshot(monkeypatch: pytest.MonkeyPatch) -> None:
    installed: list[object] = []
    original = rpc_fetch_snapshot._install
    monkeypatch.setattr(
        rpc_fetch_snapshot, "_install",
        lambda core, snapshot_id: (installed.append(snapshot_id), original(core, snapshot_id)),
    )
    results = [run_seed("disk_loss", seed) for seed in range(3)]
    assert all(r.ok for r in results), [r.detail for r in results if not r.ok]
    assert installed, "no follower ever installed a snapshot from its leader"


def test_the_checker_catches_a_snapshot_that_disagrees_with_replay(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The deliberate bug: snapshots record a state the records do not produce.
    original = SimStateMachine.maybe_snapshot

    def corrupt(self: SimStateMachine, store: object, log: object) -> None:
        self.digest += 1
        original(self, store, log)  # type: ignore[arg-type]
        self.digest -= 1

    monkeypatch.setattr(SimStateMachine, "maybe_snapshot", corrupt)
    results = [run_seed(name, seed) for seed in range(2) for name in ("disk_loss", "all_killed")]
    assert any("differs from node" in r.detail for r in results if not r.ok)
