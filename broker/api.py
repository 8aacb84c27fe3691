"""The contract between the Kafka protocol front (broker/kafka) and the data plane
(broker/replica): plain, typed requests and results with Kafka's field meanings, so the front
only translates wire messages and the replica manager never sees one.

Error fields hold Kafka error codes (kraft.errors.Errors). Topic ids are the metadata image's
ids (the string form of a UUID); the front converts them to and from the wire's 16 bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from kraft.errors import Errors

# ListOffsets timestamps with a special meaning (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4
LATEST_TIERED_TIMESTAMP = -5

CONSUMER_REPLICA_ID = -1  # a Fetch or ListOffsets from a client, not a follower
DEBUGGING_REPLICA_ID = -2  # ListOffsets v0 from a tool: any replica answers, unclamped
NO_EPOCH = -1  # a leader epoch the request did not give: skip the fencing check

READ_UNCOMMITTED = 0
READ_COMMITTED = 1


@dataclass(frozen=True, slots=True)
class ProducePartition:
    topic: str
    partition: int
    records: bytes  # one magic-2 record batch as the client sent it (Produce v3+)


@dataclass(frozen=True, slots=True)
class ProducePartitionResult:
    error: int = Errors.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class FetchPartition:
    topic: str
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = NO_EPOCH
    last_fetched_epoch: int = NO_EPOCH  # followers (Fetch v12+): drives the divergence check
    log_start_offset: int = -1  # followers: their own log start offset
    topic_id: str | None = None  # Fetch v13+: the id the client named the topic by


@dataclass(frozen=True, slots=True)
class FetchParams:
    partitions: Sequence[FetchPartition]
    max_wait_ms: int = 500
    min_bytes: int = 1
    max_bytes: int = 52428800
    isolation_level: int = READ_UNCOMMITTED
    replica_id: int = CONSUMER_REPLICA_ID  # a broker id when a follower fetches
    replica_epoch: int = -1  # the follower's broker epoch (Fetch v15+ ReplicaState, KIP-903)

    @property
    def from_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True, slots=True)
class DivergingEpoch:
    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class FetchPartitionResult:
    error: int = Errors.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    diverging_epoch: DivergingEpoch | None = None
    # The leader this broker knows of when answering NOT_LEADER_OR_FOLLOWER or
    # FENCED_LEADER_EPOCH (Fetch v12+ tagged current_leader): (leader id, leader epoch).
    current_leader: tuple[int, int] | None = None
    # read_committed: (producer id, first offset) of each aborted transaction the records
    # overlap (broker/log/txn_index.py), by first offset.
    aborted_transactions: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    topic: str
    partition: int
    timestamp: int
    current_leader_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class ListOffsetsResult:
    error: int = Errors.NONE
    timestamp: int = -1
    offset: int = -1
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class LegacyOffsetsPartition:
    """ListOffsets v0: up to `max_num_offsets` offsets at or before `timestamp`."""

    topic: str
    partition: int
    timestamp: int
    max_num_offsets: int


@dataclass(frozen=True, slots=True)
class LegacyOffsetsResult:
    error: int = Errors.NONE
    offsets: tuple[int, ...] = ()  # newest first


@dataclass(frozen=True, slots=True)
class EpochEndPartition:
    topic: str
    partition: int
    leader_epoch: int
    current_leader_epoch: int = NO_EPOCH


@dataclass(frozen=True, slots=True)
class EpochEndResult:
    error: int = Errors.NONE
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    error: int = Errors.NONE
    producer_id: int = -1
    producer_epoch: int = -1
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class DeleteRecordsPartition:
    topic: str
    partition: int
    offset: int  # the new log start offset; -1: the high watermark


@dataclass(frozen=True, slots=True)
class DeleteRecordsResult:
    error: int = Errors.NONE
    low_watermark: int = -1  # the smallest log start offset among the live replicas


@dataclass(frozen=True, slots=True)
class Request:
    """Who asks: the front passes it along for logs, quotas and authorization."""

    client_id: str | None = None
    listener: str = ""
    peer: str = ""
    api_version: int = 0
    principal: str = "User:ANONYMOUS"  # the client certificate's (kraft.security.principal)
    # Mute the connection's reading for this many ms from now: a quota's throttle known
    # before the answer (a Produce's bytes), so pipelined requests do not slip past it.
    mute: Callable[[int], None] = lambda throttle_ms: None
    extra: dict[str, object] = field(default_factory=dict)


class DataPlane(Protocol):
    """What the Kafka front needs from the broker's replica manager."""

    async def produce(
        self, acks: int, timeout_ms: int, partitions: Sequence[ProducePartition]
    ) -> list[ProducePartitionResult]:
        """Results in the order of `partitions`. acks=-1 returns once each partition's
        high watermark passes its batch, or its error, or the timeout (REQUEST_TIMED_OUT)."""
        ...

    async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
        """Results in the order of `params.partitions`; waits up to max_wait_ms for min_bytes."""
        ...

    def list_offsets(
        self, replica_id: int, isolation_level: int, partitions: Sequence[ListOffsetsPartition]
    ) -> list[ListOffsetsResult]: ...

    def legacy_offsets(
        self, replica_id: int, partitions: Sequence[LegacyOffsetsPartition]
    ) -> list[LegacyOffsetsResult]:
        """ListOffsets v0 (Kafka's legacyFetchOffsetsForTimestamp): segment base offsets
        and the log end, by the segments' last-modified times."""
        ...

    def end_offsets_for_epochs(
        self, replica_id: int, partitions: Sequence[EpochEndPartition]
    ) -> list[EpochEndResult]:
        """OffsetForLeaderEpoch: the end offset of each requested leader epoch."""
        ...

    async def init_producer_id(self, transactional_id: str | None) -> ProducerIdAndEpoch:
        """A new cluster-unique producer id with epoch 0 (idempotent producers)."""
        ...

    async def delete_records(
        self, timeout_ms: int, partitions: Sequence[DeleteRecordsPartition]
    ) -> list[DeleteRecordsResult]:
        """DeleteRecords on the partitions this broker leads: results in the order of
        `partitions`, each once every live replica's log start reached the offset, or its
        error, or the timeout (REQUEST_TIMED_OUT)."""
        ...
