"""Transactional offset commits (TxnOffsetCommit, API 28; Kafka's
GroupMetadataManager.storeOffsets for a producer and its pendingTransactionalOffsetCommits).

A transactional producer's `send_offsets_to_transaction` commits a group's offsets inside its
transaction: the offset records are appended to the group's `__consumer_offsets` partition as
a transactional batch of the producer (its id and epoch, the next sequence of the producer on
that partition), acks=all, and kept *pending* per (partition, producer) — not visible to
OffsetFetch — until the transaction coordinator's marker for that partition is replicated
(broker/replica/txn_markers.py tells `on_marker`): COMMIT makes them the group's offsets,
ABORT drops them. A leader loading the partition does the same from the log (`resolve`):
records of a transactional batch count at their producer's COMMIT marker, are dropped at its
ABORT marker, and stay pending when the log holds no marker yet.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.api import ProducePartition
from broker.group.coordinator import PartitionStatus
from broker.group.errors import GroupError, append_error
from broker.group.model import Group
from broker.group.offsets import CommitPartition, _check_commit
from broker.group.placement import OFFSETS_TOPIC
from broker.group.records import (
    NO_EXPIRY,
    OffsetKey,
    OffsetValue,
    decode_key,
    decode_offset_value,
    offset_record,
)
from broker.log.producer_txn import COMMIT, marker_of
from broker.records import TRANSACTIONAL_BIT, Record, build_batch, decode_records, parse_header

if TYPE_CHECKING:
    from broker.group.storage import GroupStorage

log = logging.getLogger(__name__)

E = GroupError
INVALID_PRODUCER_EPOCH = 47
PendingOffset = tuple[str, tuple[str, int], OffsetValue]  # group, (topic, partition), value


@dataclass
class Resolved:
    """A partition's records with its transactions resolved (`resolve`)."""

    records: list[tuple[bytes, bytes | None]] = field(default_factory=list)
    # Producer id -> the records of its transaction without a marker yet, in log order.
    pending: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)


def resolve(batch: bytes, resolved: Resolved) -> None:
    """Add a whole uncompressed batch of `__consumer_offsets` (in log order) to `resolved`: a
    plain batch's keyed records at once, a transactional one's at its producer's COMMIT
    marker."""
    header = parse_header(batch)
    if header.control:
        held = resolved.pending.pop(header.producer_id, [])
        marker = marker_of(batch)
        if marker is not None and marker[0] == COMMIT:
            resolved.records.extend(held)
        return
    records = [(r.key, r.value) for r in decode_records(batch) if r.key is not None]
    if header.transactional and header.producer_id >= 0:
        resolved.pending.setdefault(header.producer_id, []).extend(records)
    else:
        resolved.records.extend(records)


class TxnOffsets:
    """The pending transactional offsets of the partitions this broker coordinates."""

    def __init__(self, storage: GroupStorage) -> None:
        self._storage = storage
        self._pending: dict[int, dict[int, list[PendingOffset]]] = {}  # partition -> pid -> ...
        # Markers replicated while their partition loads (partition -> pid -> commit): the
        # load, which read the log as it was before them, applies them at its end.
        self._decided: dict[int, dict[int, bool]] = {}
        storage.replicas.marker_listeners.append(self.on_marker)

    def pending_count(self, group_id: str) -> int:
        """Offsets of `group_id` waiting for their transaction's outcome."""
        partition = self._storage.coordinator.partition_of(group_id)
        return sum(1 for offsets in self._pending.get(partition, {}).values()
                   for group, _, _ in offsets if group == group_id)

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The partitions with an offset of `group_id` waiting for its transaction's outcome
        (OffsetFetch's `require_stable` answers them UNSTABLE_OFFSET_COMMIT)."""
        partition = self._storage.coordinator.partition_of(group_id)
        return {tp for offsets in self._pending.get(partition, {}).values()
                for group, tp, _ in offsets if group == group_id}

    def loaded(self, partition: int, pending: dict[int, list[tuple[bytes, bytes | None]]]
               ) -> None:
        """A partition's load found these producers' offsets without a marker."""
        found: dict[int, list[PendingOffset]] = {}
        decided = self._decided.pop(partition, {})
        for producer_id, records in pending.items():
            for key_bytes, value_bytes in records:
                key = decode_key(key_bytes)
                if isinstance(key, OffsetKey) and value_bytes is not None:
                    found.setdefault(producer_id, []).append(
                        (key.group, (key.topic, key.partition), decode_offset_value(value_bytes)))
        self._pending[partition] = found
        for producer_id, commit in decided.items():
            self.on_marker((OFFSETS_TOPIC, partition), producer_id, commit)
        if not self._pending[partition]:
            del self._pending[partition]

    def unloaded(self, partition: int) -> None:
        self._pending.pop(partition, None)
        self._decided.pop(partition, None)

    async def commit(self, group_id: str, producer_id: int, producer_epoch: int,
                     generation: int, member_id: str, instance_id: str | None,
                     partitions: list[CommitPartition]) -> list[int]:
        """One error code per partition; the offsets pending until the marker."""
        coordinator = self._storage.coordinator
        error = _check_commit(coordinator, group_id, generation, member_id, instance_id, False)
        if error is not None:
            return [int(error)] * len(partitions)
        now = coordinator.now_ms()
        limit = coordinator.config.offset_metadata_max_bytes
        results: list[int] = []
        accepted: list[PendingOffset] = []
        for p in partitions:
            metadata = p.metadata or ""
            if len(metadata.encode()) > limit:
                results.append(E.OFFSET_METADATA_TOO_LARGE)
                continue
            accepted.append((group_id, (p.topic, p.partition),
                             OffsetValue(p.offset, p.leader_epoch, metadata, now, NO_EXPIRY)))
            results.append(E.NONE)
        if not accepted:
            return results
        partition = coordinator.partition_of(group_id)
        code = await self._append(partition, producer_id, producer_epoch, accepted, now)
        # A stale epoch is the producer's to hear (it is fenced); the rest as OffsetCommit's.
        written = code if code == INVALID_PRODUCER_EPOCH else int(append_error(code, commit=True))
        if written != E.NONE:
            return [written if r == E.NONE else r for r in results]
        if coordinator.coordinator_error(group_id) is None:
            self._pending.setdefault(partition, {}).setdefault(producer_id, []).extend(accepted)
        return results

    async def _append(self, partition: int, producer_id: int, producer_epoch: int,
                      offsets: list[PendingOffset], now: int) -> int:
        """The producer's transactional batch of offset records, sequenced after its last
        batch on the partition: the sequence is read and the batch appended in one turn of
        the event loop (the replica manager appends before its first await)."""
        replicas = self._storage.replicas
        replica = replicas.partitions.get((OFFSETS_TOPIC, partition))
        sequence = 0 if replica is None else replica.log.next_sequence(producer_id,
                                                                        producer_epoch)
        records = [offset_record(OffsetKey(group, *tp), value) for group, tp, value in offsets]
        batch = build_batch([Record(value, key) for key, value in records],
                            base_timestamp=now, producer_id=producer_id,
                            producer_epoch=producer_epoch, base_sequence=sequence,
                            attributes=TRANSACTIONAL_BIT)
        results = await replicas.produce(-1, self._storage.config.offsets_commit_timeout_ms,
                                         [ProducePartition(OFFSETS_TOPIC, partition, batch)])
        return results[0].error

    def on_marker(self, tp: tuple[str, int], producer_id: int, commit: bool) -> None:
        """A marker of `producer_id` on `tp` is replicated: its offsets count or go."""
        topic, partition = tp
        if topic != OFFSETS_TOPIC:
            return
        coordinator = self._storage.coordinator
        if coordinator.partitions.get(partition) is PartitionStatus.LOADING:
            self._decided.setdefault(partition, {})[producer_id] = commit
            return
        offsets = self._pending.get(partition, {}).pop(producer_id, [])
        if not commit or not offsets:
            return
        for group_id, key, value in offsets:
            if coordinator.coordinator_error(group_id) is not None:
                continue
            group = coordinator.groups.get(group_id)
            if group is None:
                group = coordinator.groups[group_id] = Group(
                    group_id, state_timestamp=coordinator.now_ms())
            group.offsets[key] = value
