"""The Raft library's public API: what a state machine above it (the metadata layer) may use.

Kafka's `RaftClient` and `RaftClient.Listener`, etcd's `Ready` in spirit. A state machine never
reads the log, the core or the quorum state itself: it registers one `RaftClientListener`, and
the client hands it, in log order and on the event loop,

* `handle_load_snapshot(reader)` when it must start over from a snapshot: at start-up when the
  node has one, and whenever the log it has not read yet was replaced by a snapshot (installed
  from the leader with FetchSnapshot, or cleaned away);
* `handle_commit(batches)` with every committed batch it has not seen, whole batches only,
  control batches included (they carry no records for the state machine but move its offset);
* `handle_leader_change(leader, epoch_start_offset)` when the leader or the epoch changes. When
  this node became the leader the call comes only after the listener was handed every batch up
  to and including the epoch's first (LeaderChange) batch, so the state it built holds every
  committed record of earlier epochs; `epoch_start_offset` is that batch's offset (-1 when this
  node is not the leader).

It writes through `append` (atomic, answered once committed) and `create_snapshot`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kraft.core.errors import Errors, NotLeaderError, RaftError
from kraft.core.output import LeaderAndEpoch
from kraft.log.base import Batch, OffsetAndEpoch, SnapshotInfo, SnapshotStore
from kraft.log.codec import decode_batches

__all__ = [
    "Batch",
    "Errors",
    "LeaderAndEpoch",
    "NotLeaderError",
    "OffsetAndEpoch",
    "RaftClient",
    "RaftClientListener",
    "RaftError",
    "SnapshotInfo",
    "SnapshotReader",
]


@dataclass(frozen=True)
class SnapshotReader:
    """One snapshot's state-machine records. `read` returns the snapshot's bytes (blocking
    file I/O: call `records` off the event loop for a big snapshot)."""

    snapshot_id: OffsetAndEpoch
    last_contained_timestamp_ms: int
    read: Callable[[], bytes]

    @classmethod
    def of(cls, snapshots: SnapshotStore, snapshot_id: OffsetAndEpoch) -> SnapshotReader:
        """The reader of a frozen snapshot in `snapshots` (reads nothing yet)."""
        return cls(snapshot_id, snapshots.last_contained_timestamp(snapshot_id),
                   functools.partial(snapshots.read_all, snapshot_id))

    def records(self) -> Iterator[bytes]:
        """The data records, in order; control records (header, footer) are skipped."""
        for batch in decode_batches(self.read()):
            if not batch.control:
                yield from batch.records


class RaftClientListener(Protocol):
    def handle_commit(self, batches: Sequence[Batch]) -> None: ...

    def handle_load_snapshot(self, reader: SnapshotReader) -> None: ...

    def handle_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None: ...


class ControllerEndpoints(Mapping[int, str]):
    """The controllers' endpoints as a node's Raft replica knows them right now: the latest
    voter set's, plus the leader's when discovery taught it and the set does not list it yet
    (an observer that has not read the voters). The Admin services hand these out
    (NOT_CONTROLLER hints, DescribeCluster): a live view, since a dynamic quorum's voters
    change with add-controller and remove-controller."""

    def __init__(self, client: RaftClient) -> None:
        self._client = client

    def _all(self) -> dict[int, str]:
        endpoints = self._client.voter_endpoints()
        leader = self._client.leader_and_epoch().leader_id
        if leader >= 0 and leader not in endpoints:
            endpoint = self._client.leader_endpoint()
            if endpoint:
                endpoints[leader] = endpoint
        return endpoints

    def __getitem__(self, key: int) -> str:
        return self._all()[key]

    def __iter__(self) -> Iterator[int]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())


class RaftClient(Protocol):
    """A Raft node as its state machine sees it (implemented by `kraft.node.RaftNode`)."""

    @property
    def node_id(self) -> int | None: ...

    def register(self, listener: RaftClientListener) -> None:
        """Before `start`: the listener receives every committed batch from the beginning."""

    async def append(self, records: list[bytes]) -> int:
        """Append atomically and answer once committed: the last record's offset. Raises
        NotLeaderError when this node is not (or stops being) the leader, RaftError otherwise
        (RECORD_BATCH_TOO_LARGE, KAFKA_STORAGE_ERROR)."""

    def submit(self, records: list[bytes]) -> Awaitable[int]:
        """`append`, with the records queued before this returns: they reach the log after
        everything submitted before them and before any control batch the Raft layer
        appends later (see `control_records_appended`)."""

    def control_records_appended(self) -> int:
        """How many records this node has appended as leader in control batches of its own
        (KIP-853 voter changes) since it started. A state machine that predicts the offsets
        of its appends skips that many more offsets when the count grows: such a batch lands
        after every record submitted before it grew."""

    def leader_and_epoch(self) -> LeaderAndEpoch: ...

    def high_watermark(self) -> int: ...

    def log_end_offset(self) -> int: ...

    def leader_endpoint(self) -> str:
        """host:port of the leader's controller listener, '' when unknown."""

    def voter_endpoints(self) -> dict[int, str]:
        """host:port of each voter of the latest voter set this node knows (KIP-853: from
        the log or a snapshot; the static controller.quorum.voters otherwise)."""

    def resign(self, epoch: int) -> None:
        """Step down as the leader of `epoch` (ignored for any other epoch)."""

    def latest_snapshot_id(self) -> OffsetAndEpoch | None: ...

    def create_snapshot(
        self, snapshot_id: OffsetAndEpoch, last_contained_timestamp_ms: int,
        records: Callable[[], Iterable[bytes]],
    ) -> Awaitable[SnapshotInfo | None]:
        """Write a snapshot ending at `snapshot_id` (exclusive end offset, epoch of the record
        before it) from `records()` — both run in a worker thread — then clean the log as
        retention allows. None, and nothing written, when the snapshot exists already or the
        offset is past what is committed and durable here."""
