"""Issue 14, items 4 and 5, in the simulator (kraft/sim/storage_scenarios.py): a crash right
after `snapshot_loaded`, and power losses that tear, zero and garble the bytes of the flush job
in flight. Each fault holds every invariant with its fix, and the checker catches the bug once
the fix is reverted, as tests/sim/test_simulator.py does for the other faults."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kraft.core import rpc_fetch_snapshot
from kraft.core.errors import RaftInvariantError
from kraft.log import snapshots
from kraft.log.base import OffsetAndEpoch
from kraft.log.memory import MemoryLog
from kraft.sim.cluster import SimCluster
from kraft.sim.invariants import SimViolation
from kraft.sim.storage_scenarios import STORAGE_SCENARIOS


@dataclass
class Run:
    seed: int
    cluster: SimCluster | None
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.cluster is not None


def run(name: str, seed: int) -> Run:
    try:
        return Run(seed, STORAGE_SCENARIOS[name](seed))
    except SimViolation as exc:
        return Run(seed, None, str(exc))


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def align_warnings() -> Iterator[list[str]]:
    """The protocol's logs are silenced; the start-up alignment's warnings are collected."""
    kraft = logging.getLogger("kraft")
    level = kraft.level
    kraft.setLevel(logging.CRITICAL)
    align = logging.getLogger("kraft.log.snapshots")
    handler = _Lines()
    align.addHandler(handler)
    align.setLevel(logging.WARNING)
    yield handler.lines
    align.removeHandler(handler)
    align.setLevel(logging.NOTSET)
    kraft.setLevel(level)


# -- item 4: a crash right after snapshot_loaded ------------------------------------------------


def _old_cannot_stand_on(log: object, snapshot: OffsetAndEpoch) -> str | None:
    """The rule before the fix: only a snapshot past the log end restarted the log."""
    return "past the end" if snapshot.offset > log.end_offset else None  # type: ignore[attr-defined]


def _old_install(core: object, snapshot_id: OffsetAndEpoch) -> None:
    """The install before the fix: older snapshots deleted at once, before the reset is
    durable."""
    if snapshot_id.offset < core.high_watermark:  # type: ignore[attr-defined]
        raise RaftInvariantError(f"snapshot {snapshot_id} ends below the high watermark")
    core.log.reset_to(snapshot_id.offset, snapshot_id.epoch)  # type: ignore[attr-defined]
    for older in core.snapshots.ids():  # type: ignore[attr-defined]
        if older.offset < snapshot_id.offset:
            core.snapshots.delete(older)  # type: ignore[attr-defined]
    core.high_watermark = snapshot_id.offset  # type: ignore[attr-defined]
    core.snapshot_to_load = snapshot_id  # type: ignore[attr-defined]


def test_a_crash_right_after_snapshot_loaded_restarts_on_a_log_that_continues_the_snapshot(
    monkeypatch: pytest.MonkeyPatch, align_warnings: list[str]
) -> None:
    seeds = range(8)
    runs = [run("install_crash", s) for s in seeds]
    assert all(r.ok for r in runs), [r.detail for r in runs if not r.ok]
    # The fault happened every time, on a log with a tail past the snapshot it installed.
    assert all(r.cluster.crashes_after_snapshot_load == 1 for r in runs)  # type: ignore[union-attr]
    assert len([w for w in align_warnings if "cannot continue snapshot" in w]) == len(seeds)
    monkeypatch.setattr(snapshots, "_cannot_stand_on", _old_cannot_stand_on)
    monkeypatch.setattr(rpc_fetch_snapshot, "_install", _old_install)
    caught = [r for r in (run("install_crash", s) for s in seeds) if not r.ok]
    assert len(caught) == len(seeds), "a reverted fix went unnoticed"
    assert all("does not continue its snapshot" in r.detail for r in caught), caught[0].detail


# -- item 5: power loss past the flushed offset ---------------------------------------------


def test_power_loss_past_the_flushed_offset_is_cut_and_loses_nothing(
    monkeypatch: pytest.MonkeyPatch, align_warnings: list[str]
) -> None:
    seeds = range(10)
    runs = [run("power_loss", s) for s in seeds]
    assert all(r.ok for r in runs), [r.detail for r in runs if not r.ok]
    clusters = [r.cluster for r in runs if r.cluster is not None]
    assert sum(c.power_losses for c in clusters) >= 4 * len(seeds)
    cut = sum(n.log.torn_tails_cut for c in clusters for n in c.nodes.values())
    assert cut >= len(seeds), "the power losses left nothing to recover"
    assert all(c.verified_acks > 0 for c in clusters)  # and every one of them was committed
    # Revert: no recovery point, so recovery falls back to "a torn tail only at the very end".
    monkeypatch.setattr(MemoryLog, "_read_recovery_point", lambda self: None)
    caught = [r for r in (run("power_loss", s) for s in seeds) if not r.ok]
    assert len(caught) >= len(seeds) // 2, "a reverted fix went unnoticed"
    assert all("refuses to open its log" in r.detail for r in caught), caught[0].detail
