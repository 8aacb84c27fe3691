"""A small three-node metadata log written as real segment files (kraft.log.codec's batch
encoder, the metadata record encoders, segment names from kraft.log.segmented,
meta.properties), obeying every rule the audit checks, as a list of batch specs a test can
change before writing: one fault at a time, at a known node and offset."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kraft.log.codec import LEADER_CHANGE, encode_batch, encode_control_record
from kraft.log.meta_properties import MetaProperties, write_meta_properties
from kraft.log.segmented import segment_path
from metadata.records import (
    BrokerRegistrationChangeRecord,
    FencingChange,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
    encode_record,
)
from metadata.topics import METADATA_PARTITION_DIR

NODES = (1, 2, 3)
CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
T0 = 1_700_000_000_000
ORDERS = "AAAAAAAAAAAAAAAAAAAAEA"  # fixed topic ids: the log is the same bytes every run
PAYMENTS = "AAAAAAAAAAAAAAAAAAAAFA"
OTHER = "AAAAAAAAAAAAAAAAAAAAGA"
INCARNATIONS = ("AAAAAAAAAAAAAAAAAAAABA", "AAAAAAAAAAAAAAAAAAAACA", "AAAAAAAAAAAAAAAAAAAADA")


@dataclass(frozen=True)
class Spec:
    """One batch to write. `base` None: right after the previous batch."""

    epoch: int
    records: tuple[bytes, ...]
    control: bool = False
    base: int | None = None


def leader_change(leader: int) -> tuple[bytes, ...]:
    return (encode_control_record(LEADER_CHANGE, {"leaderId": leader, "voters": list(NODES),
                                                  "grantingVoters": list(NODES)}),)


def rec(*records: object) -> tuple[bytes, ...]:
    return tuple(encode_record(r) for r in records)  # type: ignore[arg-type]


def healthy() -> list[Spec]:
    """Two controller epochs, three brokers, two topics, ISR and leader changes: 9 batches,
    offsets 0..22, obeying every rule the audit checks."""
    return [
        Spec(1, leader_change(1), control=True),                                 # 0
        Spec(1, rec(*(RegisterBrokerRecord(b, INCARNATIONS[b], 10 + b, fenced=True)
                      for b in range(3)))),                                      # 1-3
        Spec(1, rec(*(BrokerRegistrationChangeRecord(b, 10 + b, FencingChange.UNFENCE)
                      for b in range(3)))),                                      # 4-6
        Spec(1, rec(TopicRecord("orders", ORDERS),
                    *(PartitionRecord(p, ORDERS, (0, 1, 2), (0, 1, 2), leader=p)
                      for p in range(3)))),                                      # 7-10
        Spec(1, rec(PartitionChangeRecord(0, ORDERS, isr=(0, 1)),
                    PartitionChangeRecord(1, ORDERS, leader=2))),                # 11-12
        Spec(2, leader_change(2), control=True),                                 # 13
        Spec(2, rec(TopicRecord("payments", PAYMENTS),
                    PartitionRecord(0, PAYMENTS, (1, 2), (1, 2), leader=1))),    # 14-15
        Spec(2, rec(NoOpRecord(), PartitionChangeRecord(0, ORDERS, isr=(0, 1, 2)))),  # 16-17
        Spec(2, rec(*(NoOpRecord() for _ in range(5)))),                         # 18-22
    ]


SEGMENT_STARTS = (0, 4, 7)  # batch indexes that open a segment: three segment files
END = 23


@dataclass(frozen=True)
class Written:
    """Where a batch landed: its file, byte position and size."""

    path: str
    position: int
    size: int


def write_node(root: Path, node: int, specs: list[Spec]) -> dict[int, Written]:
    """The node's metadata.log.dir under `root`: meta.properties, and the batches as segment
    files. Returns where each batch (by base offset) was written."""
    node_dir = root / f"node-{node}"
    partition = node_dir / METADATA_PARTITION_DIR
    partition.mkdir(parents=True)
    write_meta_properties(os.fspath(node_dir), MetaProperties(CLUSTER_ID, node))
    where: dict[int, Written] = {}
    offset, path, data = 0, "", bytearray()
    for i, spec in enumerate(specs):
        base = offset if spec.base is None else spec.base
        if i in SEGMENT_STARTS:
            if path:
                Path(path).write_bytes(data)
            path, data = segment_path(os.fspath(partition), base), bytearray()
        frame = encode_batch(base, spec.epoch, list(spec.records), T0 + base, spec.control)
        where[base] = Written(path, len(data), len(frame))
        data += frame
        offset = base + len(spec.records)
    Path(path).write_bytes(data)
    return where


def write_nodes(root: Path, specs: list[Spec], **per_node: list[Spec]) -> dict[int, dict]:
    """Every node with `specs`, except those named `node_N=` with their own."""
    return {n: write_node(root, n, per_node.get(f"node_{n}", specs)) for n in NODES}
