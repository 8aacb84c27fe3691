"""The read path of ReplicaManager (broker/replica/manager.py): Fetch for consumers and
followers (long polls in `Waiters`, a follower's fetch offset moving the ISR and the HW,
divergence, read_committed's aborted transactions), ListOffsets (current and v0) and
OffsetForLeaderEpoch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import replace

from broker.api import (
    EARLIEST_LOCAL_TIMESTAMP,
    EARLIEST_TIMESTAMP,
    LATEST_TIERED_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    NO_EPOCH,
    READ_COMMITTED,
    DivergingEpoch,
    EpochEndPartition,
    EpochEndResult,
    FetchParams,
    FetchPartition,
    FetchPartitionResult,
    LegacyOffsetsPartition,
    LegacyOffsetsResult,
    ListOffsetsPartition,
    ListOffsetsResult,
)
from broker.log.partition_log import OffsetOutOfRange
from broker.replica.legacy_offsets import legacy_offsets
from broker.replica.manager_state import ReplicaManagerState, _hw_key, _leo_key, log
from broker.replica.partition import Partition
from broker.replica.txn_markers import records_end
from kraft.errors import Errors


class ReplicaReads(ReplicaManagerState):
    """Fetch, ListOffsets and OffsetForLeaderEpoch."""

    async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
        if params.from_follower and params.replica_id in self.fetchers.blocked:
            # An injected network partition: the follower's fetch is lost on the way, so it
            # counts for nothing and its answer comes late and empty.
            await asyncio.sleep(max(0, params.max_wait_ms) / 1000)
            return [FetchPartitionResult(Errors.REQUEST_TIMED_OUT)] * len(params.partitions)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, params.max_wait_ms) / 1000
        now = self.now_ms()
        if params.from_follower:
            for request in params.partitions:
                self._record_follower_fetch(params, request, now)
        while True:
            results, size, done = self._read_all(params)
            remaining = deadline - loop.time()
            if done or size >= params.min_bytes or remaining <= 0:
                return results
            key = _leo_key if params.from_follower else _hw_key
            woken = await self.waiters.wait_any(
                [key((r.topic, r.partition)) for r in params.partitions], remaining)
            if not woken:
                return self._read_all(params)[0]

    def _record_follower_fetch(self, params: FetchParams, request: FetchPartition,
                               now: int) -> None:
        """The follower's fetch offset is its LEO: track it, maybe add it to the ISR and move
        the HW. Skipped when the request is fenced or diverges (then it holds nothing we
        could count on)."""
        partition = self.partitions.get((request.topic, request.partition))
        if partition is None or self._fetch_error(params, request, partition) is not None:
            return
        if self._diverging(request, partition) is not None:
            return
        if request.fetch_offset < partition.log.start_offset \
                or request.fetch_offset > partition.log.end_offset:
            return
        partition.update_follower(params.replica_id, request.fetch_offset,
                                  request.log_start_offset, partition.log.end_offset, now,
                                  params.replica_epoch)
        if (change := partition.isr_to_expand(params.replica_id, self.eligible)) is not None:
            self.isr.submit(partition, change)
        self._after_leader_progress(partition, now)

    def _read_all(self, params: FetchParams) -> tuple[list[FetchPartitionResult], int, bool]:
        """(results, bytes read, answer at once: an error or divergence)."""
        limit = min(params.max_bytes, self.config.fetch_max_bytes)
        results = []
        total = 0
        urgent = False
        for request in params.partitions:
            result = self._read(params, request, limit - total, first=total == 0)
            # A leader still confirming its predecessor's HW waits like a long poll.
            if result.error not in (Errors.NONE, Errors.OFFSET_NOT_AVAILABLE) \
                    or result.diverging_epoch is not None:
                urgent = True
            total += len(result.records)
            results.append(result)
        return results, total, urgent

    def _fetch_error(self, params: FetchParams, request: FetchPartition,
                     partition: Partition | None) -> FetchPartitionResult | None:
        if partition is None:
            return FetchPartitionResult(self._missing_error(request.topic, request.partition))
        if self.logs.is_offline(partition.log):
            return FetchPartitionResult(Errors.KAFKA_STORAGE_ERROR)
        if request.topic_id is not None and request.topic_id != partition.log.topic_id:
            return FetchPartitionResult(Errors.INCONSISTENT_TOPIC_ID)
        fencing = self._check_epoch(request.current_leader_epoch, partition)
        if fencing is not None:
            return FetchPartitionResult(fencing, current_leader=self._leader_of(partition))
        if params.from_follower:
            if params.replica_id not in partition.replicas:
                code = (Errors.UNKNOWN_LEADER_EPOCH if request.current_leader_epoch != NO_EPOCH
                        else Errors.NOT_LEADER_OR_FOLLOWER)
                return FetchPartitionResult(code)
            registered = self.image.cluster.broker(params.replica_id)
            if params.replica_epoch >= 0 and registered is not None \
                    and params.replica_epoch < registered.epoch:
                # A stale incarnation (KIP-903); a newer one is served before our image knows
                # of its registration.
                return FetchPartitionResult(Errors.NOT_LEADER_OR_FOLLOWER)
        return None


    def _leader_of(self, partition: Partition) -> tuple[int, int] | None:
        return (partition.leader, partition.leader_epoch) if partition.leader >= 0 else None

    def _diverging(self, request: FetchPartition, partition: Partition,
                   epoch_end: tuple[int, int] | None = None) -> DivergingEpoch | None:
        """KIP-320: where the follower's log leaves ours, or None; `epoch_end` is the
        leader's end_offset_for_epoch(last fetched epoch) when the caller has it."""
        if request.last_fetched_epoch == NO_EPOCH:
            return None
        epoch, end = epoch_end or partition.log.end_offset_for_epoch(request.last_fetched_epoch)
        if epoch < 0 or end < 0:
            return None  # undefined: _read answers OFFSET_OUT_OF_RANGE
        if epoch < request.last_fetched_epoch or end < request.fetch_offset:
            return DivergingEpoch(epoch, end)
        return None

    def _read(self, params: FetchParams, request: FetchPartition, budget: int,
              first: bool) -> FetchPartitionResult:
        partition = self.partitions.get((request.topic, request.partition))
        error = self._fetch_error(params, request, partition)
        if error is not None:
            return error
        assert partition is not None
        log_ = partition.log
        hw = partition.high_watermark
        if not params.from_follower and request.fetch_offset >= hw \
                and hw < partition.leader_epoch_start_offset:
            # A new leader's HW is the one it learned as a follower, a fetch behind its
            # predecessor's: a consumer that read up to the old one would see the watermark
            # step back. Until the followers confirm the epoch's start (normally one round
            # trip), such a consumer waits, then gets the retriable error ListOffsets gives
            # (KIP-207). One still below this HW reads up to it (Kafka serves it to all).
            return FetchPartitionResult(Errors.OFFSET_NOT_AVAILABLE)
        # Offsets taken once, before the read, so an answer never mixes two moments (KAFKA-9807).
        lso = log_.last_stable_offset(hw)
        base = FetchPartitionResult(high_watermark=hw, last_stable_offset=lso,
                                    log_start_offset=log_.start_offset)
        if params.from_follower and request.last_fetched_epoch != NO_EPOCH:
            epoch_end = log_.end_offset_for_epoch(request.last_fetched_epoch)
            if epoch_end[0] < 0 or epoch_end[1] < 0:
                return replace(base, error=Errors.OFFSET_OUT_OF_RANGE)
            diverging = self._diverging(request, partition, epoch_end)
            if diverging is not None:
                return replace(base, diverging_epoch=diverging)
        committed = params.isolation_level == READ_COMMITTED and not params.from_follower
        max_offset = log_.end_offset if params.from_follower else lso if committed else hw
        if max_offset <= request.fetch_offset <= log_.end_offset:
            return base  # nothing new yet: not an error
        max_bytes = max(0, min(request.partition_max_bytes, budget))
        if max_bytes == 0 and not first:
            return base
        try:
            records = log_.read(request.fetch_offset, max_bytes, max_offset, min_one_batch=first)
        except OffsetOutOfRange:
            return replace(base, error=Errors.OFFSET_OUT_OF_RANGE)
        except OSError as exc:
            log.error("cannot read %s-%d: %s", request.topic, request.partition, exc)
            self.logs.fail_dir(log_.directory, exc)
            return FetchPartitionResult(Errors.KAFKA_STORAGE_ERROR)
        if committed and records:
            # Those the returned batches overlap (Kafka's upper bound: the end of the read);
            # the batches' end is only read when some aborted transaction is that near.
            aborted = log_.aborted_transactions(request.fetch_offset, max_offset)
            end = records_end(records) if aborted else max_offset
            aborted = [txn for txn in aborted if txn.first_offset < end]
            if aborted:
                return replace(base, records=records, aborted_transactions=tuple(
                    (txn.producer_id, txn.first_offset) for txn in aborted))
        return replace(base, records=records)

    # -- ListOffsets, OffsetForLeaderEpoch ------------------------------------------------

    def list_offsets(
        self, replica_id: int, isolation_level: int, partitions: Sequence[ListOffsetsPartition]
    ) -> list[ListOffsetsResult]:
        return [self._list_offset(replica_id, request, isolation_level)
                for request in partitions]

    def _list_offset(self, replica_id: int, request: ListOffsetsPartition,
                     isolation_level: int = 0) -> ListOffsetsResult:
        partition = self.partitions.get((request.topic, request.partition))
        if partition is None:
            return ListOffsetsResult(self._missing_error(request.topic, request.partition))
        fencing = self._check_epoch(request.current_leader_epoch, partition)
        if fencing is not None:
            return ListOffsetsResult(fencing)
        log_ = partition.log
        epoch = partition.leader_epoch
        timestamp = request.timestamp
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return ListOffsetsResult(offset=log_.start_offset, leader_epoch=epoch)
        # Kafka's Partition.fetchOffsetForTimestamp: what the caller may read ends at the LSO
        # (read_committed), the HW (read_uncommitted) or, for a replica, the log end.
        if replica_id >= 0:
            fetchable = log_.end_offset
        elif isolation_level == READ_COMMITTED:
            fetchable = log_.last_stable_offset(partition.high_watermark)
        else:
            fetchable = partition.high_watermark
        lagging = replica_id < 0 and partition.high_watermark < partition.leader_epoch_start_offset
        if timestamp in (LATEST_TIMESTAMP, LATEST_TIERED_TIMESTAMP):
            if lagging:
                return ListOffsetsResult(Errors.OFFSET_NOT_AVAILABLE)
            return ListOffsetsResult(offset=fetchable, leader_epoch=epoch)
        # By timestamp and MAX_TIMESTAMP, as Kafka's ReplicaManager.fetchOffset: the record is
        # looked up in the whole log, and one at or past `fetchable` is no answer (offset and
        # timestamp -1: an open transaction's records are not named to read_committed).
        if timestamp == MAX_TIMESTAMP:
            found = log_.max_timestamp_offset()
        elif timestamp >= 0:
            found = log_.offset_for_timestamp(timestamp)
        else:
            return ListOffsetsResult(Errors.INVALID_REQUEST)
        if found is None or found[0] >= fetchable:
            return ListOffsetsResult(Errors.OFFSET_NOT_AVAILABLE if lagging else Errors.NONE)
        offset, found_timestamp = found
        return ListOffsetsResult(timestamp=found_timestamp, offset=offset, leader_epoch=epoch)

    def legacy_offsets(
        self, replica_id: int, partitions: Sequence[LegacyOffsetsPartition]
    ) -> list[LegacyOffsetsResult]:
        results = []
        for request in partitions:
            partition = self.partitions.get((request.topic, request.partition))
            results.append(
                LegacyOffsetsResult(self._missing_error(request.topic, request.partition))
                if partition is None
                else legacy_offsets(partition, replica_id, request, self.now_ms()))
        return results

    def end_offsets_for_epochs(
        self, replica_id: int, partitions: Sequence[EpochEndPartition]
    ) -> list[EpochEndResult]:
        out = []
        for request in partitions:
            partition = self.partitions.get((request.topic, request.partition))
            if partition is None:
                out.append(EpochEndResult(self._missing_error(request.topic, request.partition)))
                continue
            fencing = self._check_epoch(request.current_leader_epoch, partition)
            if fencing is not None:
                out.append(EpochEndResult(fencing))
                continue
            epoch, end = partition.log.end_offset_for_epoch(request.leader_epoch)
            out.append(EpochEndResult(leader_epoch=epoch, end_offset=end))
        return out
