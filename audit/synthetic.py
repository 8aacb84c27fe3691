"""A generated metadata log that obeys every rule the audit checks, for the benchmark and the
tests: brokers register and unfence, topics are created, ACLs are created and one removed,
SCRAM credentials and client quotas are set and one of each removed, then ISR shrinks and
expansions, leader moves, broker fences and unfences, configs and NoOps, with a LEADER_CHANGE
control batch opening each epoch. Written with the real `SegmentedLog` and record encoders,
then copied to every node's directory (a healthy quorum's logs are identical)."""

from __future__ import annotations

import os
import random
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from kraft.log.codec import LEADER_CHANGE, encode_control_record
from kraft.log.meta_properties import MetaProperties, write_meta_properties
from kraft.log.meta_properties import random_uuid as record_uuid
from kraft.log.segmented import SegmentedLog
from metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    ConfigResourceType,
    FencingChange,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    Record,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    TopicRecord,
    encode_record,
)
from metadata.scram import ScramMechanism, credential_from_password
from metadata.security_records import (
    ClientQuotaRecord,
    EntityData,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from metadata.topics import METADATA_PARTITION_DIR

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"


@dataclass
class _Partition:
    topic_id: str
    index: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int


@dataclass
class SyntheticLog:
    """What was generated: record count and the controller epochs with their leaders."""

    records: int = 0
    epochs: dict[int, int] = field(default_factory=dict)
    fences: int = 0


def generate(
    root: Path,
    records: int,
    nodes: tuple[int, ...] = (1, 2, 3),
    brokers: int = 6,
    partitions: int = 2_000,
    batch_records: int = 100,
    epoch_every: int = 2_000,
    segment_bytes: int = 64 << 20,
    seed: int = 7,
) -> SyntheticLog:
    """Write about `records` records to `root/node-N/__cluster_metadata-0` for each node."""
    rng = random.Random(seed)
    first = root / f"node-{nodes[0]}"
    log = SegmentedLog(first / METADATA_PARTITION_DIR, segment_bytes=segment_bytes, cache_bytes=0)
    info = SyntheticLog()
    clock = [1_700_000_000_000]
    epoch = [0]
    batches_in_epoch = [epoch_every]

    def append(batch: list[bytes], control: bool = False) -> None:
        if not control and batches_in_epoch[0] >= epoch_every:
            epoch[0] += 1
            leader = nodes[epoch[0] % len(nodes)]
            info.epochs[epoch[0]] = leader
            body = {"leaderId": leader, "voters": list(nodes), "grantingVoters": list(nodes)}
            append([encode_control_record(LEADER_CHANGE, body)], control=True)
            batches_in_epoch[0] = 0
        clock[0] += 3
        log.append_as_leader(batch, epoch[0], clock[0], control)
        batches_in_epoch[0] += 1
        info.records += len(batch)
        if log.end_offset - log.flushed_offset > 50_000:
            log.flush()

    fenced: set[int] = set()
    parts: list[_Partition] = []
    append([encode_record(RegisterBrokerRecord(b, record_uuid(), 1 + b, fenced=True))
            for b in range(brokers)])
    append([encode_record(BrokerRegistrationChangeRecord(b, 1 + b, FencingChange.UNFENCE))
            for b in range(brokers)])
    per_topic = 50
    for t in range(max(1, partitions // per_topic)):
        tid = record_uuid()
        batch = [encode_record(TopicRecord(f"topic-{t}", tid))]
        for p in range(per_topic):
            replicas = tuple((t + p + j) % brokers for j in range(3))
            parts.append(_Partition(tid, p, replicas, replicas, replicas[0]))
            batch.append(encode_record(PartitionRecord(p, tid, replicas, replicas,
                                                       leader=replicas[0])))
        append(batch)
    append([encode_record(ConfigRecord(ConfigResourceType.TOPIC, "topic-0",
                                       "min.insync.replicas", "2"))])
    # ACLs (KIP-801): ALLOW User:writer-N WRITE on topic-N (LITERAL), the first one removed.
    # Not drawn from `rng`, so the rest of the log is what it was without them.
    acl_ids = [record_uuid() for _ in range(4)]
    append([encode_record(AccessControlEntryRecord(acl_id, 2, f"topic-{i}", 3,
                                                   f"User:writer-{i}", "*", 4, 3))
            for i, acl_id in enumerate(acl_ids)])
    append([encode_record(RemoveAccessControlEntryRecord(acl_ids[0]))])
    append(_security_records())
    while info.records < records:
        roll = rng.random()
        if roll < 0.01:
            append(_toggle_broker(rng, brokers, fenced, parts, info))
        elif roll < 0.02:
            append([encode_record(NoOpRecord())])
        else:
            append([_change(rng, rng.choice(parts), fenced) for _ in range(batch_records)])
    log.flush()
    log.close()
    for node in nodes:
        if node != nodes[0]:
            shutil.copytree(first / METADATA_PARTITION_DIR,
                            root / f"node-{node}" / METADATA_PARTITION_DIR)
        write_meta_properties(str(root / f"node-{node}"), MetaProperties(CLUSTER_ID, node))
    return info


def _security_records() -> list[bytes]:
    """SCRAM credentials (KIP-554) with real keys, alice's SCRAM-SHA-256 one removed, and
    client quotas (KIP-546) of a user, the default user and a user's client, one removed.
    Fixed, not drawn from `rng`, so the rest of the log is what it was without them."""
    records: list[Record] = []
    for user, mechanism, iterations in (("alice", ScramMechanism.SCRAM_SHA_256, 4096),
                                        ("alice", ScramMechanism.SCRAM_SHA_512, 8192),
                                        ("bob", ScramMechanism.SCRAM_SHA_512, 4096)):
        c = credential_from_password(mechanism, f"{user}-secret", f"salt-{user}".encode(),
                                     iterations)
        records.append(UserScramCredentialRecord(user, mechanism, c.salt, c.stored_key,
                                                 c.server_key, iterations))
    records.append(RemoveUserScramCredentialRecord("alice", ScramMechanism.SCRAM_SHA_256))
    alice = EntityData("user", "alice")
    records += [ClientQuotaRecord((alice,), "producer_byte_rate", 1048576.0),
                ClientQuotaRecord((EntityData("user", None),), "consumer_byte_rate", 2097152.0),
                ClientQuotaRecord((alice, EntityData("client-id", "app")),
                                  "request_percentage", 50.5),
                ClientQuotaRecord((alice,), "producer_byte_rate", 0.0, remove=True)]
    return [encode_record(r) for r in records]


def _change(rng: random.Random, part: _Partition, fenced: set[int]) -> bytes:
    """A valid ISR shrink, ISR expansion or leader move for one partition; leaders and new ISR
    members are always unfenced brokers."""
    if part.leader == -1:
        live = [r for r in part.isr if r not in fenced]
        if not live:
            return encode_record(NoOpRecord())
        part.leader = live[0]
        return encode_record(PartitionChangeRecord(part.index, part.topic_id,
                                                   leader=part.leader))
    outside = [r for r in part.replicas if r not in fenced and r not in part.isr]
    if outside and (len(part.isr) == 1 or rng.random() < 0.5):
        part.isr = (*part.isr, rng.choice(outside))
        return encode_record(PartitionChangeRecord(part.index, part.topic_id, isr=part.isr))
    others = [r for r in part.isr if r != part.leader]
    candidates = [r for r in others if r not in fenced]
    if candidates and rng.random() < 0.5:
        part.leader = rng.choice(candidates)
        return encode_record(PartitionChangeRecord(part.index, part.topic_id,
                                                   leader=part.leader))
    if others:
        part.isr = tuple(r for r in part.isr if r != rng.choice(others))
        return encode_record(PartitionChangeRecord(part.index, part.topic_id, isr=part.isr))
    return encode_record(NoOpRecord())


def _toggle_broker(
    rng: random.Random, brokers: int, fenced: set[int], parts: list[_Partition],
    info: SyntheticLog,
) -> list[bytes]:
    """Unfence a fenced broker, or fence one: it leaves every ISR it is not the last member of
    and gives up its leaderships (leader -1 where it was the last), as the controller does."""
    if fenced:
        broker = fenced.pop()
        return [encode_record(BrokerRegistrationChangeRecord(broker, 1 + broker,
                                                             FencingChange.UNFENCE))]
    broker = rng.randrange(brokers)
    batch = [encode_record(BrokerRegistrationChangeRecord(broker, 1 + broker,
                                                          FencingChange.FENCE))]
    for part in parts:
        if broker not in part.isr:
            continue
        if part.isr == (broker,):
            part.leader = -1
            batch.append(encode_record(PartitionChangeRecord(part.index, part.topic_id,
                                                             leader=-1)))
            continue
        part.isr = tuple(r for r in part.isr if r != broker)
        if part.leader == broker:
            part.leader = part.isr[0]
            batch.append(encode_record(PartitionChangeRecord(
                part.index, part.topic_id, isr=part.isr, leader=part.leader)))
        else:
            batch.append(encode_record(PartitionChangeRecord(part.index, part.topic_id,
                                                             isr=part.isr)))
    fenced.add(broker)
    info.fences += 1
    return batch


def node_dirs(root: Path, nodes: tuple[int, ...] = (1, 2, 3)) -> list[str]:
    return [os.fspath(root / f"node-{n}") for n in nodes]
