"""The transaction coordinator's rules (Kafka's TransactionCoordinator, transaction version
0): InitProducerId with a transactional id, AddPartitionsToTxn, AddOffsetsToTxn (a partition
like any other here), EndTxn, the abort of timed-out transactions and the expiry of idle
transactional ids. No I/O of its own: every state change is one record appended through
`TxnLog` (acks=all) and taken only once it is written; markers go out through `MarkerSink`,
which calls `markers_written` when every partition has its marker.

A transactional id lives on partition abs(String.hashCode(id)) % partitions of
`__transaction_state`; this broker coordinates it while it leads that partition and has
loaded it (COORDINATOR_LOAD_IN_PROGRESS while loading, NOT_COORDINATOR otherwise).

Unlike Kafka, a request that would be answered CONCURRENT_TRANSACTIONS only because the id's
previous transaction is completing (PrepareCommit/PrepareAbort, its markers or its Complete*
record in flight) is *held* until that completes and then served: AddPartitionsToTxn,
AddOffsetsToTxn, InitProducerId (also after it aborted an open transaction). Bounded: after
`held_request_max_ms` it is answered CONCURRENT_TRANSACTIONS as Kafka answers at once, beyond
`max_held_requests` held at a time too; a lost (or reloaded) coordinator partition answers
NOT_COORDINATOR (docs/transactions.md, "Held requests").
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from broker.group.errors import append_error
from broker.group.placement import partition_for
from broker.txn.config import TxnConfig
from broker.txn.errors import TxnError
from broker.txn.model import (
    COMPLETED,
    EPOCH_EXHAUSTED,
    MAX_EPOCH,
    NO_EPOCH,
    PREPARED,
    MarkerJob,
    TopicPartition,
    TxnMetadata,
    replay,
)
from broker.txn.records import NO_PRODUCER_ID, TxnLogValue, TxnState, encode_key, encode_value

log = logging.getLogger(__name__)
E = TxnError
COMPLETE_RETRY_S = 0.5  # a failed Complete* write is tried again after this
_ENDING = (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.COMPLETE_COMMIT,
           TxnState.COMPLETE_ABORT)


class TxnLog(Protocol):
    async def append(self, partition: int, key: bytes, value: bytes | None,
                     following: Sequence[bytes] = ()) -> int:
        """Append one record, and `following` values of the same key after it in the same
        batch (acks=all); the Kafka error code of the append."""
        ...


class MarkerSink(Protocol):
    def send(self, job: MarkerJob) -> None: ...

    def cancel(self, coordinator_partition: int) -> None: ...


class PartitionStatus(Enum):
    LOADING = "loading"
    ACTIVE = "active"


@dataclass(slots=True)
class _Partition:
    status: PartitionStatus
    epoch: int  # the leader epoch of the __transaction_state partition: the coordinator epoch


@dataclass(eq=False, slots=True)
class _Successor:
    """A held AddPartitionsToTxn/AddOffsetsToTxn of the producer whose transaction awaits
    its markers: its partitions' Ongoing record goes in one batch with the Complete* record."""

    producer_id: int
    epoch: int
    partitions: frozenset[TopicPartition]
    answer: asyncio.Future[TxnError | None]  # None: look at the request again
    taken: bool = False  # in a write now


@dataclass(frozen=True, slots=True)
class InitResult:
    error: TxnError
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_EPOCH


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, txn_log: TxnLog,
                 allocate_producer_id: Callable[[], Awaitable[int]],
                 now_ms: Callable[[], int]) -> None:
        self.config = config
        self.log = txn_log
        self.markers: MarkerSink | None = None
        self._allocate = allocate_producer_id
        self._now = now_ms
        self.partitions: dict[int, _Partition] = {}
        self.txns: dict[str, TxnMetadata] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._changed: dict[str, asyncio.Event] = {}  # set when the id's state moves
        self._successors: dict[str, list[_Successor]] = {}
        # The epoch a fencing abort in flight moves the id to: as Kafka's
        # prepareFenceProducerEpoch, the producer's requests at an older one are fenced at once.
        self._fencing: dict[str, int] = {}
        self.held = 0  # requests held now

    def now_ms(self) -> int:
        """The coordinator's clock (the admin views' durations are measured on it)."""
        return self._now()

    # ---- where an id lives ---------------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.config.state_log_num_partitions)

    def coordinator_error(self, transactional_id: str) -> TxnError | None:
        """NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, or None: this broker serves it."""
        partition = self.partitions.get(self.partition_of(transactional_id))
        if partition is None:
            return E.NOT_COORDINATOR
        if partition.status is PartitionStatus.LOADING:
            return E.COORDINATOR_LOAD_IN_PROGRESS
        return None

    def begin_loading(self, partition: int, epoch: int) -> None:
        self._drop(partition)
        self.partitions[partition] = _Partition(PartitionStatus.LOADING, epoch)

    def finish_loading(self, partition: int, epoch: int,
                       records: Iterable[tuple[bytes, bytes | None]]) -> int:
        """Take the replayed partition; prepared transactions get their markers again (the
        previous coordinator may have died before sending them). Records loaded."""
        current = self.partitions.get(partition)
        if current is None or current.status is not PartitionStatus.LOADING \
                or current.epoch != epoch:
            return 0
        txns, _ = replay(records, f"__transaction_state-{partition}")
        # An id another partition owns (a changed partition count) is not this one's to serve.
        owned = [meta for txn_id, meta in txns.items() if self.partition_of(txn_id) == partition]
        for meta in owned:
            self.txns[meta.transactional_id] = meta
        current.status = PartitionStatus.ACTIVE
        for meta in owned:
            if meta.state in PREPARED:
                self._send_markers(meta)
        return len(owned)

    def unload(self, partition: int) -> None:
        self._drop(partition)
        self.partitions.pop(partition, None)

    def _drop(self, partition: int) -> None:
        for txn_id in [t for t in self.txns if self.partition_of(t) == partition]:
            del self.txns[txn_id]
            self._notify(txn_id)  # its held requests answer NOT_COORDINATOR
        if self.markers is not None:
            self.markers.cancel(partition)

    # ---- InitProducerId ------------------------------------------------------------------

    async def init_producer_id(self, transactional_id: str, timeout_ms: int,
                               expected_id: int = NO_PRODUCER_ID,
                               expected_epoch: int = NO_EPOCH) -> InitResult:
        """A producer id and a bumped epoch for `transactional_id`, fencing its earlier
        producers; an open transaction is aborted first (CONCURRENT_TRANSACTIONS meanwhile).
        `expected_*` (InitProducerId v3+, KIP-360): the producer's current id and epoch."""
        error = self.coordinator_error(transactional_id)
        if error is not None:
            return InitResult(error)
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return InitResult(E.INVALID_TRANSACTION_TIMEOUT)
        deadline = self._hold_deadline()
        while True:
            meta = self.txns.get(transactional_id)
            if meta is None:
                producer_id = await self._new_producer_id()
                if producer_id is None:
                    return InitResult(E.COORDINATOR_NOT_AVAILABLE)
                error = self.coordinator_error(transactional_id)  # it may have moved meanwhile
                if error is not None:
                    return InitResult(error)
                meta = self.txns.setdefault(transactional_id, TxnMetadata(
                    transactional_id, producer_id, NO_EPOCH, timeout_ms,
                    last_update_ms=self._now()))
            if meta.pending is not None and not self._completing(meta):
                return InitResult(E.CONCURRENT_TRANSACTIONS)
            if expected_id != NO_PRODUCER_ID and not (
                    meta.producer_epoch == NO_EPOCH or expected_id == meta.producer_id
                    or (expected_id == meta.previous_producer_id
                        and expected_epoch >= EPOCH_EXHAUSTED)):
                return InitResult(E.PRODUCER_FENCED)
            if self._completing(meta):
                held = await self._hold(meta, deadline)
                if held is not None:
                    return InitResult(held)
                continue  # looked at again, as Kafka's client would retry
            if meta.state is TxnState.ONGOING:
                # Fence the producer of the open transaction and abort it; then held.
                if await self._end(meta, commit=False,
                                   epoch=min(meta.producer_epoch + 1, MAX_EPOCH)) is not E.NONE:
                    return InitResult(E.CONCURRENT_TRANSACTIONS)
                continue
            return await self._bump(meta, timeout_ms, expected_id, expected_epoch)

    async def _bump(self, meta: TxnMetadata, timeout_ms: int, expected_id: int,
                    expected_epoch: int) -> InitResult:
        given = expected_id != NO_PRODUCER_ID
        producer_id = meta.producer_id
        if meta.producer_epoch >= EPOCH_EXHAUSTED and (
                not given or expected_epoch == meta.producer_epoch):
            new_id = await self._new_producer_id()  # epochs used up: a new id at epoch 0
            if new_id is None:
                return InitResult(E.COORDINATOR_NOT_AVAILABLE)
            if meta.pending is not None or self.txns.get(meta.transactional_id) is not meta:
                return InitResult(E.CONCURRENT_TRANSACTIONS)
            producer_id, epoch = new_id, 0
        elif not given or meta.producer_epoch == NO_EPOCH \
                or expected_epoch == meta.producer_epoch:
            epoch = meta.producer_epoch + 1
        elif expected_epoch == meta.last_producer_epoch:
            epoch = meta.producer_epoch  # a retry of a bump whose answer was lost
        else:
            return InitResult(E.PRODUCER_FENCED)
        value = meta.value(TxnState.EMPTY, self._now(), producer_id=producer_id, epoch=epoch,
                           partitions=(), start_ms=-1, timeout_ms=timeout_ms)
        error = await self._write(meta, value, TxnState.EMPTY)
        if error is not E.NONE:
            return InitResult(error)
        return InitResult(E.NONE, meta.producer_id, meta.producer_epoch)

    async def _new_producer_id(self) -> int | None:
        try:
            return await self._allocate()
        except (ConnectionError, OSError, RuntimeError) as exc:
            log.warning("cannot allocate a producer id for a transactional id: %s", exc)
            return None

    # ---- AddPartitionsToTxn, AddOffsetsToTxn ---------------------------------------------

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int,
                        completing_ok: bool = False) -> TxnMetadata | TxnError:
        error = self.coordinator_error(transactional_id)
        if error is not None:
            return error
        meta = self.txns.get(transactional_id)
        if meta is None or meta.producer_id != producer_id:
            return E.INVALID_PRODUCER_ID_MAPPING
        if meta.producer_epoch != epoch or epoch < self._fencing.get(transactional_id, epoch):
            return E.PRODUCER_FENCED
        if meta.pending is not None and not (completing_ok and self._completing(meta)):
            return E.CONCURRENT_TRANSACTIONS
        return meta

    async def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                             partitions: Sequence[TopicPartition]) -> TxnError:
        """AddPartitionsToTxn and AddOffsetsToTxn; held while the previous transaction
        completes."""
        deadline = self._hold_deadline()
        while True:
            meta = self._check_producer(transactional_id, producer_id, epoch,
                                        completing_ok=True)
            if isinstance(meta, TxnError):
                return meta
            if not self._completing(meta):
                break
            if meta.state in PREPARED and meta.pending is None:
                held = await self._follow(meta, partitions, deadline)
            else:
                held = await self._hold(meta, deadline)
            if held is not None:
                return held
        if meta.state is TxnState.DEAD:
            return E.CONCURRENT_TRANSACTIONS
        ongoing = meta.state is TxnState.ONGOING
        if ongoing and meta.partitions.issuperset(partitions):
            return E.NONE
        now = self._now()
        value = meta.value(TxnState.ONGOING, now, partitions=meta.partitions | set(partitions),
                           start_ms=meta.start_ms if ongoing else now)
        return await self._write(meta, value, TxnState.ONGOING)

    # ---- EndTxn --------------------------------------------------------------------------

    async def end_txn(self, transactional_id: str, producer_id: int, epoch: int,
                      commit: bool) -> TxnError:
        """PrepareCommit/PrepareAbort written, then answered; the markers follow."""
        meta = self._check_producer(transactional_id, producer_id, epoch)
        if isinstance(meta, TxnError):
            return meta
        if meta.state is TxnState.ONGOING:
            return await self._end(meta, commit)
        done = TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT
        prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        if meta.state is done:
            return E.NONE  # a retry of an EndTxn that completed
        if meta.state is prepared:
            return E.CONCURRENT_TRANSACTIONS
        # As Kafka (4.x logs it at WARN): librdkafka takes the answer as fatal, and an EndTxn
        # whose AddPartitionsToTxn never landed (the transaction is still the previous one)
        # is told apart here only.
        log.warning("transactional id %s: EndTxn(%s) of producer %d epoch %d found %s (last "
                    "update %d ms ago): INVALID_TXN_STATE", transactional_id,
                    "commit" if commit else "abort", producer_id, epoch, meta.state.name,
                    self._now() - meta.last_update_ms)
        return E.INVALID_TXN_STATE

    async def _end(self, meta: TxnMetadata, commit: bool, epoch: int | None = None) -> TxnError:
        state = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
        txn_id = meta.transactional_id
        if epoch is not None:
            self._fencing[txn_id] = epoch
        try:
            error = await self._write(meta, meta.value(state, self._now(), epoch=epoch), state)
        finally:
            if epoch is not None:
                self._fencing.pop(txn_id, None)
        if error is E.NONE:
            self._send_markers(meta)
        else:
            log.info("transactional id %s: cannot write %s: %s", meta.transactional_id,
                     state.name, error.name)
        return error

    def _send_markers(self, meta: TxnMetadata) -> None:
        partition = self.partition_of(meta.transactional_id)
        job = MarkerJob(meta.transactional_id, partition, self.partitions[partition].epoch,
                        meta.producer_id, meta.producer_epoch,
                        meta.state is TxnState.PREPARE_COMMIT, frozenset(meta.partitions))
        if not job.partitions:
            self.markers_written(job)
        elif self.markers is not None:
            self.markers.send(job)

    def marker_written(self, job: MarkerJob, tp: TopicPartition) -> None:
        """One partition of `job` has its marker: no longer pending (Kafka's removePartition;
        DescribeTransactions shows those left). Memory only: a new coordinator resends all."""
        meta = self.txns.get(job.transactional_id)
        partition = self.partitions.get(job.coordinator_partition)
        if meta is not None and meta.state in PREPARED and partition is not None \
                and partition.epoch == job.coordinator_epoch \
                and meta.producer_id == job.producer_id \
                and meta.producer_epoch == job.producer_epoch:
            meta.partitions.discard(tp)

    def markers_written(self, job: MarkerJob) -> None:
        """Every partition of `job` has its marker: CompleteCommit/CompleteAbort next."""
        self._background(self._complete(job))

    async def _complete(self, job: MarkerJob) -> None:
        while True:
            meta = self.txns.get(job.transactional_id)
            partition = self.partitions.get(job.coordinator_partition)
            prepared = TxnState.PREPARE_COMMIT if job.commit else TxnState.PREPARE_ABORT
            if meta is None or partition is None or partition.epoch != job.coordinator_epoch \
                    or meta.state is not prepared or meta.producer_id != job.producer_id \
                    or meta.producer_epoch != job.producer_epoch:
                return  # moved on or no longer ours: the new coordinator resends
            if meta.pending is None:
                state = TxnState.COMPLETE_COMMIT if job.commit else TxnState.COMPLETE_ABORT
                now = self._now()
                value = meta.value(state, now, partitions=())
                # The producer's next transaction, held meanwhile, starts in the same batch:
                # one replicated append, not two in a row.
                successors = self._take_successors(meta)
                following = () if not successors else (meta.value(
                    TxnState.ONGOING, now, start_ms=now,
                    partitions=frozenset().union(*(s.partitions for s in successors))),)
                error = E.NOT_COORDINATOR
                try:
                    error = await self._write(meta, value, state, following)
                finally:  # cancelled too (closing): a taken request waits for this answer
                    for successor in successors:
                        if not successor.answer.done():
                            successor.answer.set_result(E.NONE if error is E.NONE else None)
                if error is E.NONE or error is E.NOT_COORDINATOR:
                    return
                log.warning("transactional id %s: cannot write %s (%s); trying again",
                            job.transactional_id, state.name, error.name)
            await asyncio.sleep(COMPLETE_RETRY_S)

    # ---- held requests -------------------------------------------------------------------

    @staticmethod
    def _completing(meta: TxnMetadata) -> bool:
        """The id's previous transaction is ending: prepared (markers going out), or its
        Prepare*/Complete* record in flight."""
        return meta.state in PREPARED or meta.pending in _ENDING

    def _hold_deadline(self) -> float:
        return asyncio.get_running_loop().time() + self.config.held_request_max_ms / 1000

    async def _hold(self, meta: TxnMetadata, deadline: float) -> TxnError | None:
        """Wait until `meta`'s state moves: None to look at the request again;
        CONCURRENT_TRANSACTIONS past `deadline` or with `max_held_requests` held already (the
        client retries, as with Kafka); NOT_COORDINATOR once the partition is lost or
        reloaded meanwhile."""
        txn_id = meta.transactional_id
        partition = self.partitions.get(self.partition_of(txn_id))
        if partition is None:
            return E.NOT_COORDINATOR
        left = deadline - asyncio.get_running_loop().time()
        if left <= 0 or self.held >= self.config.max_held_requests:
            return E.CONCURRENT_TRANSACTIONS
        epoch = partition.epoch
        changed = self._changed.setdefault(txn_id, asyncio.Event())
        self.held += 1
        try:
            await asyncio.wait_for(changed.wait(), left)
        except TimeoutError:
            return E.CONCURRENT_TRANSACTIONS
        finally:
            self.held -= 1
        now = self.partitions.get(self.partition_of(txn_id))
        if now is None or now.epoch != epoch or now.status is not PartitionStatus.ACTIVE:
            return E.NOT_COORDINATOR
        return None

    async def _follow(self, meta: TxnMetadata, partitions: Sequence[TopicPartition],
                      deadline: float) -> TxnError | None:
        """Held as the next transaction of `meta`'s producer, whose transaction awaits its
        markers: NONE once its partitions are written with the Complete* record; otherwise as
        `_hold`."""
        txn_id = meta.transactional_id
        partition = self.partitions.get(self.partition_of(txn_id))
        if partition is None:
            return E.NOT_COORDINATOR
        loop = asyncio.get_running_loop()
        left = deadline - loop.time()
        if left <= 0 or self.held >= self.config.max_held_requests:
            return E.CONCURRENT_TRANSACTIONS
        epoch = partition.epoch
        successor = _Successor(meta.producer_id, meta.producer_epoch, frozenset(partitions),
                               loop.create_future())
        self._successors.setdefault(txn_id, []).append(successor)
        self.held += 1
        try:
            await asyncio.wait_for(asyncio.shield(successor.answer), left)
        except TimeoutError:
            if not successor.taken:
                return E.CONCURRENT_TRANSACTIONS
            await successor.answer  # in a write already (bounded by its timeout): its outcome
        finally:
            self.held -= 1
            waiting = self._successors.get(txn_id, [])
            if successor in waiting:
                waiting.remove(successor)
            if not waiting:
                self._successors.pop(txn_id, None)
        answer = successor.answer.result()
        if answer is None:
            now = self.partitions.get(self.partition_of(txn_id))
            if now is None or now.epoch != epoch or now.status is not PartitionStatus.ACTIVE:
                return E.NOT_COORDINATOR
        return answer

    def _take_successors(self, meta: TxnMetadata) -> list[_Successor]:
        """The held requests to write with `meta`'s Complete* record: those of its producer
        (another id or epoch looks again, to be fenced)."""
        taken = []
        for successor in self._successors.pop(meta.transactional_id, []):
            if (successor.producer_id, successor.epoch) == (meta.producer_id,
                                                             meta.producer_epoch):
                successor.taken = True
                taken.append(successor)
            elif not successor.answer.done():
                successor.answer.set_result(None)
        return taken

    def _notify(self, txn_id: str) -> None:
        changed = self._changed.pop(txn_id, None)
        if changed is not None:
            changed.set()
        for successor in self._successors.get(txn_id, []):  # not taken: look again
            if not successor.answer.done():
                successor.answer.set_result(None)

    # ---- timers --------------------------------------------------------------------------

    async def abort_timed_out(self) -> int:
        """Fence and abort every transaction open longer than its timeout (Kafka's
        abortTimedOutTransactions); how many were aborted."""
        now = self._now()
        expired = [meta for meta in self.txns.values()
                   if meta.state is TxnState.ONGOING and meta.pending is None
                   and meta.start_ms + meta.timeout_ms < now
                   and self.coordinator_error(meta.transactional_id) is None]
        aborted = 0
        for meta in expired:
            if meta.pending is not None or meta.state is not TxnState.ONGOING:
                continue
            log.info("transactional id %s: aborting its transaction, open for %d ms (timeout "
                     "%d ms), fencing producer %d epoch %d", meta.transactional_id,
                     now - meta.start_ms, meta.timeout_ms, meta.producer_id,
                     meta.producer_epoch)
            epoch = min(meta.producer_epoch + 1, MAX_EPOCH)
            if await self._end(meta, commit=False, epoch=epoch) is E.NONE:
                aborted += 1
        return aborted

    async def expire_ids(self) -> int:
        """Remove the transactional ids idle (no transaction open) for longer than
        transactional.id.expiration.ms: a tombstone each. How many went."""
        limit = self._now() - self.config.id_expiration_ms
        idle = [meta for meta in self.txns.values()
                if meta.state in COMPLETED and meta.pending is None
                and meta.last_update_ms <= limit
                and self.coordinator_error(meta.transactional_id) is None]
        removed = 0
        for meta in idle:
            if meta.pending is None and meta.state in COMPLETED and \
                    await self._write(meta, None, TxnState.DEAD) is E.NONE:
                removed += 1
        if removed:
            log.info("removed %d expired transactional id(s)", removed)
        return removed

    # ---- writes --------------------------------------------------------------------------

    async def _write(self, meta: TxnMetadata, value: TxnLogValue | None,
                     pending: TxnState, following: Sequence[TxnLogValue] = ()) -> TxnError:
        """Append the id's next record (and `following` ones, in the same batch) and take them
        once written (None: a tombstone); the requests held on the id look again, whatever
        the outcome."""
        try:
            return await self._write_once(meta, value, pending, following)
        finally:
            self._notify(meta.transactional_id)

    async def _write_once(self, meta: TxnMetadata, value: TxnLogValue | None,
                          pending: TxnState, following: Sequence[TxnLogValue]) -> TxnError:
        txn_id = meta.transactional_id
        partition = self.partition_of(txn_id)
        before = self.partitions.get(partition)
        if before is None or before.status is not PartitionStatus.ACTIVE:
            return E.NOT_COORDINATOR
        epoch = before.epoch
        meta.pending = pending
        try:
            code = await self.log.append(
                partition, encode_key(txn_id), None if value is None else encode_value(value),
                [encode_value(v) for v in following])
        finally:
            meta.pending = None
        error = E(int(append_error(code, commit=False)))
        after = self.partitions.get(partition)
        if error is E.NONE and (after is None or after.epoch != epoch
                                or self.txns.get(txn_id) is not meta):
            error = E.NOT_COORDINATOR  # unloaded (or reloaded) while writing
        if error is not E.NONE:
            return error
        if value is None:
            del self.txns[txn_id]
        else:
            for written in (value, *following):
                meta.apply(written)
        return E.NONE

    def _background(self, work: Coroutine[None, None, None]) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
