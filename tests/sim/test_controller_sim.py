"""The real QuorumController in the simulator (tests/sim/controller_sim.py) in `make test`: a
budget of seeds, a seed that replays identically, and proof that the checks catch a Raft client
that announces leadership before the state machine has the epoch's first batch."""

from __future__ import annotations

import os

import pytest

from kraft.client import LeaderAndEpoch
from kraft.delivery import ListenerContext
from kraft.sim.invariants import SimViolation
from tests.sim.controller_sim import run_seed

SEEDS = int(os.environ.get("KRAFT_CONTROLLER_SIM_SEEDS", "20"))


def test_the_controller_holds_every_invariant_through_leader_changes() -> None:
    failures = []
    for seed in range(SEEDS):
        try:
            run = run_seed(seed)
        except SimViolation as exc:
            failures.append(f"seed {seed}: {exc}\n  replay: python -m tests.sim.controller_sim "
                            f"--seed {seed}")
            continue
        assert len(run.active_in_epoch) >= 2, f"seed {seed} never changed controllers"
    assert not failures, "\n".join(failures)


def test_a_controller_seed_replays_identically() -> None:
    first, second = run_seed(7), run_seed(7)
    assert (first.cluster.event_count, sorted(first.acknowledged)) == (
        second.cluster.event_count, sorted(second.acknowledged))


def test_the_checks_catch_leadership_announced_before_the_epochs_first_batch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def eager(self: ListenerContext, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        announcement = (leader.leader_id, leader.epoch, epoch_start_offset)
        if announcement != self._announced:
            self._announced = announcement
            self.listener.handle_leader_change(leader, epoch_start_offset)

    monkeypatch.setattr(ListenerContext, "_maybe_announce_leader", eager)
    caught = 0
    for seed in range(8, 28):
        try:
            run_seed(seed)
        except SimViolation as exc:
            assert "speculative image differs" in str(exc) or "replayed" in str(exc)
            caught += 1
    assert caught >= 3
