"""The audit on the logs of a real three-controller run with a leader kill and a fenced
broker: no violations, and the timelines say what the test did."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from audit.job import run_audit
from audit.layout import discover
from metadata.records import PartitionChangeRecord, decode_record, encode_record
from tests.audit.faults import find_batch, rewrite_batch


def _logs(dirs: dict[int, Path]) -> list:
    return [discover(os.fspath(d)) for d in dirs.values()]


def test_real_run_has_no_violation_and_matching_timelines(spark, real_run) -> None:
    result = run_audit(spark, _logs(real_run.node_dirs), partitions=2)
    assert result.violations == [], [f.line() for f in result.violations]
    led = {x.epoch: x.leader_id for x in result.leadership}
    for epoch, leader in real_run.leaders:
        assert led[epoch] == leader, (led, real_run.leaders)
    killed_epoch = max(e for e, n in real_run.leaders if n == real_run.killed)
    after = [x for x in result.leadership if x.epoch > killed_epoch]
    assert after and after[0].leader_id != real_run.killed
    assert after[0].timestamp_ms >= real_run.kill_time_ms
    assert next(x for x in result.leadership if x.epoch == killed_epoch).timestamp_ms \
        <= real_run.kill_time_ms
    events = [(e["event"], e["broker_epoch"]) for e in result.broker_events
              if e["broker_id"] == real_run.fenced_broker]
    first, second = real_run.broker_epochs[real_run.fenced_broker]
    assert events == [("REGISTER", first), ("UNFENCE", first), ("FENCE", first),
                      ("REGISTER", second), ("UNFENCE", second)]
    fence_offset = next(e["offset"] for e in result.broker_events
                        if e["broker_id"] == 1 and e["event"] == "FENCE")
    moved = [r for r in result.leader_changes.to_pylist()
             if r["prev_leader"] == 1 and r["offset"] <= fence_offset + 10]
    assert moved and all(r["leader"] != 1 and r["topic_name"] == "orders" for r in moved)
    assert {r["topic_name"] for r in result.leader_changes.to_pylist()} == {"orders",
                                                                            "payments"}


def test_real_run_with_a_leader_outside_the_isr(spark, real_run, tmp_path: Path) -> None:
    copy = {n: tmp_path / d.name for n, d in real_run.node_dirs.items()}
    for n, d in real_run.node_dirs.items():
        shutil.copytree(d, copy[n])
    batch = find_batch(copy[1], lambda b: not b.control and any(
        decode_record(r).record_type.name == "PARTITION_CHANGE_RECORD" for r in b.records))
    index, change = next((i, decode_record(r)) for i, r in enumerate(batch.records)
                         if decode_record(r).record_type.name == "PARTITION_CHANGE_RECORD")
    assert isinstance(change, PartitionChangeRecord)
    bad = PartitionChangeRecord(change.partition_id, change.topic_id, isr=(2,), leader=3)
    records = list(batch.records)
    records[index] = encode_record(bad)
    for d in copy.values():
        rewrite_batch(d, batch.base_offset, records)
    result = run_audit(spark, _logs(copy), partitions=2)
    hits = [f for f in result.violations if f.check == "leader-not-in-isr"]
    assert [(f.node_id, f.offset) for f in hits][:1] == [(1, batch.base_offset + index)]
