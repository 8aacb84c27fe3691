"""A SHORT FIXED-SEED CHAOS CAMPAIGN (part of `make test`, under a minute): 3 controllers and
3 brokers under 30 s of seeded faults of every kind (broker kills and pauses included), 3
metadata writers, and the data part: 2 idempotent acks=all producers and a consumer on an
RF-3, 3-partition topic with min.insync.replicas=2. Safety is checked strictly (every
acknowledged write committed exactly once on every node, in order, served by every node, nodes
agreeing, every log readable up to its high watermark; every acknowledged record exactly once
at its offset on the leaders and in every ISR replica's files, the ISR replicas' batches
identical below the HW, no consumer-seen HW lost, no phantom read; the campaign's fault, write
and record floors scaled to its 30 s, and at least one broker kill and one broker pause
applied); liveness with the campaign's generous bounds; availability measured and attributed
(every partition acknowledged, its longest window reported with a cause); the
clock step also reached the active controller and fenced no running broker. The Spark audit is
off here (a JVM start costs minutes on a loaded machine); `make chaos` runs it. Replay a
failure with the command the assertion message prints."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.chaos.campaign import Options, run_campaign
from tests.chaos.report import summary_lines
from tests.chaos.schedule import KINDS

# Its 30 s schedule holds every kind of fault, brokers killed early and paused, and controller
# kills late enough to restart from a snapshot (seed 1 needed 40 s for every kind; 30 s saves
# a third of the campaign in `make test`).
SEED = 133
DURATION_S = 30
# Half the campaign's default (65,536): its writes still reach a snapshot the restarted nodes
# load (checked below). Seed 1's 40 s at load 12-23 made 495 metadata writes and no snapshot.
SNAPSHOT_BYTES = 32_768
# `python -m tests.chaos` derives its availability bound from the product's timeouts (18.5 s,
# docs/chaos.md "Availability") and `make chaos` enforces it. On the shared 2-core machine
# `make test` runs on, seed 1's longest window was 7.9-13.5 s at load average 12-15 but 30-36 s
# at 15-22, most of it a restarted broker's interpreter starting (11-18 s): here the bound is
# the run's length, so only a partition never acknowledged fails, and the test checks that the
# measure and its causes are reported.
AVAILABILITY_BOUND_S = float(DURATION_S)


@pytest.mark.slow  # tests/conftest.py hands it out among the first
@pytest.mark.timeout(240)
def test_a_short_chaos_campaign_loses_no_acknowledged_write(tmp_path: Path) -> None:
    options = Options(seed=SEED, duration_s=DURATION_S, writers=3, audit=False,
                      snapshot_bytes=SNAPSHOT_BYTES, work_dir=tmp_path / "chaos",
                      availability_bound_s=AVAILABILITY_BOUND_S)
    report = run_campaign(options, say=print)
    lines = "\n".join(summary_lines(report))
    assert report["ok"], f"{lines}\nnode logs in {options.work_dir}"
    # The campaign did what it says: faults were applied (confirmed by the nodes) and writes
    # went through them, at least the floors scaled to 30 s (checks "enough ..."); brokers
    # were killed and paused (applied, not only scheduled: "data: broker kills and pauses").
    assert {f["kind"] for f in report["faults"]} == set(KINDS), lines
    applied = [f for f in report["faults"] if f["applied"]]
    assert len(applied) == report["faultsApplied"] >= report["floors"]["faults"] > 0, lines
    assert report["writes"]["acknowledged"] >= report["floors"]["writes"] > 0, lines
    assert max(report["snapshots"].values()) >= 1, lines  # restarts loaded snapshots
    names = {c["name"] for c in report["checks"]}
    assert {"acknowledged writes are committed", "acknowledgement order",
            "every node's log is readable up to its high watermark",
            "served metadata equals the committed log", "enough faults applied",
            "enough writes acknowledged", "liveness: a write acknowledged",
            "liveness: every node caught up with the leader",
            "data: acknowledged records present exactly once at their offsets",
            "data: ISR replicas hold the same batches below the high watermark",
            "data: the high watermark consumers saw never went back",
            "data: consumers read no record that is not in the log",
            "enough records acknowledged", "data: broker kills and pauses applied",
            "liveness: data: every ISR replica on disk up to the high watermark",
            "data: availability (longest window without an acknowledgement, majority up)",
            "clock steps fence no running broker"} <= names
    # Every partition measured, each with its longest window and what it waited for.
    availability = report["availability"]
    assert [r["partition"] for r in availability["partitions"]] == [0, 1, 2], lines
    assert all(r["longest"]["steps"] for r in availability["partitions"]), lines
    assert report["clockSteps"]["onActiveController"] >= 1, lines
    assert report["data"]["acknowledged"] >= report["data"]["floor"] > 0, lines
