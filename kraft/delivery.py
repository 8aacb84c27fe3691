"""Delivering the log to registered listeners (Kafka's KafkaRaftClient.ListenerContext).

Each listener has its own position. After every core step the node polls each one: first a
snapshot when the listener must start over from one, then the committed batches it has not
seen (whole batches, at most `MAX_DELIVERY_BYTES` at a time so a long catch-up yields to the
event loop between deliveries), then a leader change.
"""

from __future__ import annotations

from kraft.client import RaftClientListener, SnapshotReader
from kraft.core.leader import LeaderState
from kraft.core.raft import LeaderAndEpoch, RaftCore
from kraft.log.base import Batch, ReplicatedLog, SnapshotStore

MAX_DELIVERY_BYTES = 8 * 1024 * 1024


def announcement(core: RaftCore) -> tuple[LeaderAndEpoch, int]:
    """The leader and epoch to tell listeners, and the epoch's start offset when this node
    leads and is not resigning or shutting down (-1 otherwise): what `poll` takes."""
    state = core.state
    status = core.status()
    leader = LeaderAndEpoch(status.leader_id, status.epoch)
    if isinstance(state, LeaderState) and not state.resign_requested and not core.shutting_down:
        return leader, state.epoch_start_offset
    return leader, -1


class ListenerContext:
    def __init__(self, listener: RaftClientListener) -> None:
        self.listener = listener
        self.next_offset: int | None = None  # None until the first poll
        self._announced: tuple[int, int, int] | None = None  # (leader, epoch, epoch start)

    def poll(
        self, log: ReplicatedLog, snapshots: SnapshotStore, high_watermark: int,
        leader: LeaderAndEpoch, epoch_start_offset: int,
    ) -> bool:
        """Deliver what is due. `epoch_start_offset` is >= 0 only while this node leads and
        is not resigning. True when committed batches remain beyond this delivery."""
        self._maybe_load_snapshot(log, snapshots)
        more = self._deliver_commits(log, high_watermark)
        self._maybe_announce_leader(leader, epoch_start_offset)
        return more

    def _maybe_load_snapshot(self, log: ReplicatedLog, snapshots: SnapshotStore) -> None:
        latest = snapshots.latest_id()
        first = self.next_offset is None
        if latest is not None and (first or (self.next_offset or 0) < log.start_offset):
            self.next_offset = latest.offset
            self.listener.handle_load_snapshot(SnapshotReader.of(snapshots, latest))
        elif first:
            self.next_offset = log.start_offset

    def _deliver_commits(self, log: ReplicatedLog, high_watermark: int) -> bool:
        start = self.next_offset
        assert start is not None
        if high_watermark <= start:
            return False
        batches: list[Batch] = []
        size = 0
        more = False
        for batch in log.batches(start, high_watermark):
            if batch.next_offset <= start:
                continue
            if batch.base_offset < start or batch.next_offset > high_watermark:
                break  # never part of a batch: the high watermark moves batch by batch
            if batches and size + batch.size_in_bytes > MAX_DELIVERY_BYTES:
                more = True
                break
            batches.append(batch)
            size += batch.size_in_bytes
        if not batches:
            return False
        self.next_offset = batches[-1].next_offset
        self.listener.handle_commit(batches)
        return more

    def _maybe_announce_leader(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        if epoch_start_offset >= 0 and (self.next_offset or 0) <= epoch_start_offset:
            return  # our own leadership waits until the listener has the epoch's first batch
        announcement = (leader.leader_id, leader.epoch, epoch_start_offset)
        if announcement != self._announced:
            self._announced = announcement
            self.listener.handle_leader_change(leader, epoch_start_offset)
