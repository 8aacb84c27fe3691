"""The JVM partition replay against the step-by-step reference (reference_replay.py) on
random logs that break every partition rule: the same findings, in the same words, and the
same leader changes."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from audit import replay
from audit.consistency import NodeRange
from audit.findings import Finding
from audit.job import read_options, run_audit
from audit.layout import discover
from audit.source import NAME
from kraft.log.codec import encode_batch
from kraft.log.meta_properties import random_uuid
from metadata.records import (
    BrokerRegistrationChangeRecord,
    FencingChange,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    encode_record,
)
from metadata.topics import METADATA_PARTITION_DIR
from tests.audit.reference_replay import ROW_FIELDS, ReferenceReplayer

BROKERS = (1, 2, 3, 4, 5)


def _ids(rng: random.Random, low: int = 0) -> tuple[int, ...]:
    return tuple(rng.sample(BROKERS, rng.randint(low, 3)))


def random_records(rng: random.Random, count: int) -> list[bytes]:
    """Brokers coming and going, topics created and removed (and one never created), and
    partition records that move leaders in and out of ISRs and replicas, set epochs up and
    down and mark recoveries: every partition rule broken somewhere."""
    topics = [random_uuid() for _ in range(4)]
    ghost = random_uuid()
    out = [encode_record(RegisterBrokerRecord(b, random_uuid(), 10 + b, fenced=False))
           for b in BROKERS[:3]]
    out += [encode_record(TopicRecord(f"t{i}", tid)) for i, tid in enumerate(topics[:3])]
    for _ in range(count):
        tid = rng.choice([*topics, ghost] if rng.random() < 0.05 else topics)
        part = rng.randrange(3)
        roll = rng.random()
        if roll < 0.15:
            replicas = _ids(rng, 1)
            out.append(encode_record(PartitionRecord(
                part, tid, replicas, _ids(rng), leader=rng.choice([-1, *replicas]),
                leader_epoch=rng.randrange(6), partition_epoch=rng.randrange(6),
                leader_recovery_state=rng.choice((0, 0, 1)))))
        elif roll < 0.8:
            out.append(encode_record(PartitionChangeRecord(
                part, tid, isr=_ids(rng) if rng.random() < 0.5 else None,
                leader=rng.choice((-2, -2, -1, *BROKERS)),
                replicas=_ids(rng, 1) if rng.random() < 0.2 else None,
                leader_recovery_state=rng.choice((-1, -1, 0, 1)))))
        elif roll < 0.9:
            broker = rng.choice(BROKERS)
            out.append(encode_record(BrokerRegistrationChangeRecord(
                broker, 10 + broker, fenced=rng.choice((FencingChange.FENCE,
                                                        FencingChange.UNFENCE)),
                in_controlled_shutdown=int(rng.random() < 0.2))))
        elif roll < 0.95:
            broker = rng.choice(BROKERS)
            out.append(encode_record(RegisterBrokerRecord(broker, random_uuid(), 10 + broker,
                                                          fenced=rng.random() < 0.5)))
        elif roll < 0.97:
            out.append(encode_record(UnregisterBrokerRecord(rng.choice(BROKERS), 0)))
        elif roll < 0.985:
            out.append(encode_record(RemoveTopicRecord(rng.choice(topics))))
        else:
            name = f"t{rng.randrange(4)}"
            out.append(encode_record(TopicRecord(name, topics[int(name[1])])))
    return out


def write_log(root: Path, records: list[bytes], per_batch: int = 7) -> Path:
    partition = root / METADATA_PARTITION_DIR
    partition.mkdir(parents=True)
    with open(partition / f"{0:020d}.log", "wb") as file:
        for base in range(0, len(records), per_batch):
            file.write(encode_batch(base, 1, records[base:base + per_batch], 1_000 + base))
    return root


def reference(spark, log_dir: Path, complete: bool = True):  # type: ignore[no-untyped-def]
    """Findings and leader changes of the reference replay, over the Python source's rows."""
    rows = spark.read.format(NAME).option("includeJson", "false").option(
        "nodeIds", "1").load([os.fspath(log_dir)])
    history = replay.cluster_history(rows, complete)
    parts = rows.where(rows.record_type.isin(*replay.PARTITION_TYPES)).select(
        *ROW_FIELDS).orderBy("topic_id", "partition", "offset").collect()
    replayer = ReferenceReplayer(history.broker_offsets, history.broker_states,
                                 history.topics, complete)
    return history, replayer.feed([r.asDict() for r in parts])


def _key(row: dict) -> tuple:
    return tuple(str(row.get(k)) for k in (
        "kind", "offset", "topic_id", "partition", "check", "severity", "detail", "node_id",
        "prev_leader", "leader", "leader_epoch", "partition_epoch", "unclean", "topic_name",
        "timestamp_ms"))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_jvm_replay_matches_the_reference(spark, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    log_dir = write_log(tmp_path / "node-1", random_records(rng, 3_000))
    history, expected = reference(spark, log_dir)
    log = discover(os.fspath(log_dir), 1)
    plan = replay.plan_canonical([NodeRange(1, 0, 10**9, None)], [])
    files = replay.canonical_files([log], plan, read_options(
        [log], node_ranges=plan.node_ranges)["nodeRanges"])
    got = replay.partition_replay(spark, files, history, True, shards=3).toArrow().to_pylist()
    checks = {r["check"] for r in expected if r["kind"] == "finding"}
    assert {"unknown-topic", "unknown-partition", "leader-epoch-decrease",
            "partition-epoch-decrease", "leader-not-in-isr", "isr-not-subset-of-replicas",
            "leader-on-fenced-broker", "unclean-election"} <= checks
    assert sorted(map(_key, got)) == sorted(map(_key, expected))


def test_the_audit_reports_the_reference_findings(spark, tmp_path: Path) -> None:
    log_dir = write_log(tmp_path / "node-1", random_records(random.Random(9), 2_000))
    history, expected = reference(spark, log_dir)
    result = run_audit(spark, [discover(os.fspath(log_dir), 1)], partitions=2)
    want = [Finding(r["severity"], r["check"], r["node_id"], r["offset"], r["detail"])
            for r in expected if r["kind"] == "finding"] + history.findings
    assert sorted(result.findings, key=str) == sorted(want, key=str)
    assert result.leader_changes.num_rows == sum(r["kind"] == "leader_change"
                                                 for r in expected)
