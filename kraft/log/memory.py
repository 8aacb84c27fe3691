"""MemoryLog: the simulator's DurableLog, with durability modelled exactly.

It keeps two images of the log: the current one (what the core sees) and the durable one (the
batches as of the last completed flush). A crash replaces the current image by the durable
one, so the simulator can check that the core never relies on unflushed data. Batches are kept
encoded, exactly as SegmentedLog stores them, so the codec is exercised on every path.

A crash can also be a power loss in the middle of a flush job: the bytes the job was writing
reach the "disk" torn, zeroed or garbled (the simulator decides how), past the durable image.
`reopen` then recovers them with the rule SegmentedLog applies to its files
(`kraft.log.recovery.damage_is_torn_tail`) against a modelled recovery point, so the simulator
exercises the real rule.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator, Sequence

from kraft.log._common import check_follower_batches, select_batches
from kraft.log.base import Batch, CorruptRecordError, FlushJob, LogAppendError, OffsetAndEpoch
from kraft.log.codec import decode_batches, encode_batch, scan_batches, scan_prefix
from kraft.log.epoch_cache import EpochCache
from kraft.log.recovery import damage_is_torn_tail

# (base_offset, epoch, encoded batch): one entry of the durable image.
_Entry = tuple[int, int, bytes]
# Stands for a file name in the errors of the in-memory "disk".
MEMORY_PATH = "<memory log>"


class MemoryFlushJob:
    """The batches appended since the durable image last matched the log."""

    __slots__ = ("actions", "cut_to", "done", "end_offset", "entries", "generation", "keep",
                 "start")

    def __init__(
        self, generation: int, keep: int, entries: list[_Entry], end_offset: int,
        start: tuple[int, int], cut_to: int | None = None,
        actions: list[Callable[[], None]] | None = None,
    ) -> None:
        self.start = start  # (start offset, start epoch) of the captured log
        self.generation = generation  # the log's crash count when the job began
        self.keep = keep  # durable batches still shared with the log when the job began
        self.entries = entries
        self.end_offset = end_offset
        self.cut_to = cut_to  # lowest offset the job's truncations cut to (None: no cut)
        self.actions = actions if actions is not None else []
        self.done = False

    def run(self) -> None:
        """Nothing to write in memory; completing the job is what makes it durable."""
        self.done = True


class MemoryLog:
    """An in-memory DurableLog. Lookups are bisects over batch base offsets.

    `recovery_point_every`: a flush raises the modelled recovery point only every that many
    completed jobs (SegmentedLog raises it lazily too; a lagging one must be safe)."""

    def __init__(self, recovery_point_every: int = 1) -> None:
        if recovery_point_every < 1:
            raise ValueError("recovery_point_every must be at least 1")
        self.recovery_point_every = recovery_point_every
        self._start_offset = 0
        self._start_epoch = 0
        self._reset_current([])
        self._durable: list[_Entry] = []
        # Where the durable image starts (advance_start and reset_to become durable by a job).
        self._durable_start = (0, 0)
        # Leading batches the durable image and the current log have in common.
        self._shared = 0
        self._generation = 0
        self._job: MemoryFlushJob | None = None
        # The shortest the log has been since the running job began (it can only make what it
        # captured durable up to there).
        self._job_min_len = 0
        self._cut_to: int | None = None  # lowest offset cut to since the last job began
        self._actions: list[Callable[[], None]] = []  # for the next job's complete_flush
        # The modelled recovery-point checkpoint (kraft/log/recovery.py): never past the
        # durable end, lowered before a job's cut reaches the disk, raised after its sync.
        self._recovery_point: int | None = 0
        self._unraised_flushes = 0
        self._disk_tail = b""  # what a power loss left past the durable image, for reopen
        self.torn_tails_cut = 0  # recoveries that cut damage (the simulator's counter)

    def _reset_current(self, entries: list[_Entry]) -> None:
        self._bases: list[int] = []
        self._epochs: list[int] = []
        self._positions: list[int] = []
        self._blobs: list[bytes] = []
        self._epoch_cache = EpochCache()
        self._end_offset = self._start_offset
        self._end_position = 0
        for base, epoch, blob in entries:
            self._bases.append(base)
            self._epochs.append(epoch)
            self._positions.append(self._end_position)
            self._blobs.append(blob)
            self._epoch_cache.assign(epoch, base)
            self._end_position += len(blob)
        if entries:
            self._end_offset = scan_batches(entries[-1][2])[0].next_offset

    # -- the core's view -------------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """First offset held by the log."""
        return self._start_offset

    @property
    def end_offset(self) -> int:
        """One past the last record, flushed or not."""
        return self._end_offset

    @property
    def start_epoch(self) -> int:
        """Epoch of the snapshot the log starts from (0 when it starts at offset 0)."""
        return self._start_epoch

    @property
    def size_in_bytes(self) -> int:
        """Bytes of the batches at or above the start offset."""
        first = bisect_right(self._bases, self._start_offset) - 1
        return self._end_position - (self._positions[first] if first >= 0 else 0)

    @property
    def flushed_offset(self) -> int:
        """End of the longest prefix shared by the durable image and the log."""
        shared = self._shared
        if shared == 0:
            return self._start_offset
        return self._bases[shared] if shared < len(self._bases) else self._end_offset

    @property
    def last_epoch(self) -> int:
        """Epoch of the last batch; the start epoch when the log holds none."""
        return self._epoch_cache.last_epoch if len(self._epoch_cache) else self._start_epoch

    def append_as_leader(
        self, records: Sequence[bytes], epoch: int, timestamp_ms: int, control: bool = False
    ) -> int:
        """Encode and append one batch at end_offset; return its base offset."""
        if not records:
            raise ValueError("cannot append an empty batch")
        if epoch < self.last_epoch:
            raise LogAppendError(f"epoch {epoch} is below the last epoch {self.last_epoch}")
        base = self._end_offset
        blob = encode_batch(base, epoch, records, timestamp_ms, control)
        self._push(base, epoch, blob, base + len(records))
        return base

    def append_as_follower(self, data: bytes) -> int:
        """Append the leader's encoded batches as-is; return the number of records."""
        headers = scan_batches(data)
        count = check_follower_batches(headers, self._end_offset, self.last_epoch)
        single = len(headers) == 1
        for h in headers:
            blob = bytes(data) if single else bytes(data[h.position : h.position + h.size])
            self._push(h.base_offset, h.epoch, blob, h.next_offset)
        return count

    def _push(self, base: int, epoch: int, blob: bytes, next_offset: int) -> None:
        self._bases.append(base)
        self._epochs.append(epoch)
        self._positions.append(self._end_position)
        self._blobs.append(blob)
        self._epoch_cache.assign(epoch, base)
        self._end_position += len(blob)
        self._end_offset = next_offset

    def truncate_to(self, offset: int) -> None:
        """Drop every record at or above `offset` (a batch boundary)."""
        if offset < self._start_offset:
            raise ValueError(f"cannot truncate to {offset}, below the log start")
        if offset >= self._end_offset:
            return
        index = bisect_left(self._bases, offset)
        if index == len(self._bases) or self._bases[index] != offset:
            raise ValueError(f"offset {offset} is inside a batch")
        self._end_position = self._positions[index]
        for column in (self._bases, self._epochs, self._positions, self._blobs):
            del column[index:]
        self._end_offset = offset
        self._epoch_cache.truncate_from(offset)
        self._note_cut(offset)
        self._shared = min(self._shared, index)
        self._job_min_len = min(self._job_min_len, index)

    def _note_cut(self, offset: int) -> None:
        self._cut_to = offset if self._cut_to is None else min(self._cut_to, offset)

    def end_offset_for_epoch(self, epoch: int) -> OffsetAndEpoch:
        """The largest epoch ≤ `epoch` in the log and where it ends."""
        return self._epoch_cache.end_offset_for(
            epoch, self._end_offset, self._start_offset, self._start_epoch
        )

    def advance_start(self, offset: int, epoch: int) -> None:
        """Stop reading below `offset` (the batches stay in memory; the simulator's logs are
        small). Durable with the next flush job."""
        if offset <= self._start_offset:
            if offset == self._start_offset:
                self._start_epoch = epoch
            return
        if offset > self.flushed_offset:
            raise ValueError(
                f"cannot start the log at {offset}, beyond what is flushed "
                f"({self.flushed_offset})"
            )
        if offset < self._end_offset:
            index = bisect_left(self._bases, offset)
            if index == len(self._bases) or self._bases[index] != offset:
                raise ValueError(f"offset {offset} is inside a batch")
        self._epoch_cache.truncate_before(offset)
        self._start_offset = offset
        self._start_epoch = epoch

    def reset_to(self, offset: int, epoch: int) -> None:
        """Drop every record and restart empty at `offset`; durable with the next flush job,
        but flushed at once (the snapshot that replaces the records is durable)."""
        self._start_offset = offset
        self._start_epoch = epoch
        self._reset_current([])
        self._note_cut(offset)
        self._shared = 0
        self._job_min_len = 0

    def read(self, offset: int, max_bytes: int, max_offset: int) -> bytes:
        """Encoded batches from the one containing `offset` (see ReplicatedLog.read)."""
        if offset < self._start_offset:
            raise ValueError(f"offset {offset} is below the log start {self._start_offset}")
        if offset >= self._end_offset or offset >= max_offset:
            return b""
        i, j = select_batches(
            self._bases, self._positions, 0, len(self._bases), self._end_offset,
            self._end_position, offset, max_offset, max_bytes, True,
        )
        return b"".join(self._blobs[i:j])

    def batches(self, start: int, end: int) -> Iterator[Batch]:
        """Decoded batches covering offsets [start, end)."""
        if start < self._start_offset:
            raise ValueError(f"offset {start} is below the log start {self._start_offset}")
        if start >= min(end, self._end_offset):
            return
        first = bisect_right(self._bases, start) - 1
        last = bisect_left(self._bases, end)
        for blob in self._blobs[first:last]:
            yield from decode_batches(blob)

    # -- group commit ---------------------------------------------------------------------

    def begin_flush(self) -> MemoryFlushJob | None:
        """Capture the log as it is now; None when the durable image already equals it."""
        if self._job is not None:
            raise RuntimeError("a flush job is already in flight")
        count = len(self._bases)
        start = (self._start_offset, self._start_epoch)
        if (
            self._shared == count == len(self._durable) and start == self._durable_start
            and not self._actions
        ):
            return None
        keep = self._shared
        entries = [
            (self._bases[i], self._epochs[i], self._blobs[i]) for i in range(keep, count)
        ]
        self._job = MemoryFlushJob(
            self._generation, keep, entries, self._end_offset, start, self._cut_to,
            self._actions,
        )
        self._cut_to = None
        self._actions = []
        self._job_min_len = count
        return self._job

    def complete_flush(self, job: FlushJob) -> None:
        """Make the captured log the durable image. A job from before a crash is ignored."""
        if not isinstance(job, MemoryFlushJob):
            raise TypeError(f"not a MemoryLog flush job: {job!r}")
        if job.generation != self._generation:
            return
        if job is not self._job:
            raise RuntimeError("complete_flush got a job this log did not begin")
        if not job.done:
            raise RuntimeError("complete_flush before the job ran")
        self._job = None
        self._lower_recovery_point(job)
        del self._durable[job.keep :]
        self._durable.extend(job.entries)
        self._durable_start = job.start
        self._shared = min(len(self._durable), self._job_min_len)
        self._unraised_flushes += 1
        if self._unraised_flushes >= self.recovery_point_every:
            self._unraised_flushes = 0
            self._recovery_point = self.durable_end_offset
        actions, job.actions = job.actions, []
        for action in actions:
            action()

    def _lower_recovery_point(self, job: MemoryFlushJob) -> None:
        """What a job does first: bring the checkpoint down to where it cuts the log."""
        if job.cut_to is not None and self._recovery_point is not None:
            self._recovery_point = min(self._recovery_point, job.cut_to)

    def after_flush(self, action: Callable[[], None]) -> None:
        """Run `action` from complete_flush of the next job (see SegmentedLog.after_flush);
        a crash forgets it."""
        self._actions.append(action)

    def flush(self) -> None:
        """begin + run + complete in the calling thread; a job begun earlier and abandoned is
        finished first."""
        if self._job is not None:
            self._job.run()
            self.complete_flush(self._job)
        job = self.begin_flush()
        if job is not None:
            job.run()
            self.complete_flush(job)

    def close(self) -> None:
        """Nothing to release; unflushed data stays until the next crash()."""

    # -- faults for the simulator -----------------------------------------------------------

    def crash(self, power_loss: Callable[[bytes], bytes] | None = None) -> None:
        """Lose everything not flushed: the log becomes the durable image, jobs and pending
        after_flush actions are dropped.

        With `power_loss`, the power went while the job in flight (if any) was writing: it had
        lowered the recovery point and made its truncation durable (SegmentedLog syncs a cut
        before writing over it), and `power_loss(bytes it wrote)` says what of its writes
        reached the disk (torn, zeroed, garbled; the simulator decides). Those bytes lie past
        the durable image until `reopen` recovers them. A job that moves the log start (a
        reset, retention) leaves no such bytes in this model."""
        job = self._job
        self._generation += 1
        self._job = None
        self._actions = []
        self._cut_to = None
        self._disk_tail = b""
        if power_loss is not None and job is not None:
            self._lower_recovery_point(job)
            if job.start == self._durable_start:
                del self._durable[job.keep :]
                self._disk_tail = power_loss(b"".join(blob for _, _, blob in job.entries))
        self._start_offset, self._start_epoch = self._durable_start
        self._reset_current(list(self._durable))
        self._shared = len(self._durable)

    def reopen(self) -> int:
        """Open the log after a crash as SegmentedLog opens its files: the batches a power loss
        left whole past the durable image are kept (recovery syncs them, so they are durable
        now), and damage after them is cut or refused by `damage_is_torn_tail` against the
        recovery point. Then, as SegmentedLog does, the recovery point becomes the end.
        Returns how many bytes were cut; CorruptRecordError when the rule refuses."""
        tail, self._disk_tail = self._disk_tail, b""
        cut = 0
        if tail:
            expected = self.durable_end_offset
            epoch = self._durable[-1][1] if self._durable else self._durable_start[1]
            base_position = sum(len(blob) for _, _, blob in self._durable)
            headers, stop, error = scan_prefix(tail, MEMORY_PATH, base_position)
            for header in headers:
                if header.base_offset != expected or header.epoch < epoch:
                    raise CorruptRecordError(
                        f"batch at offset {header.base_offset} epoch {header.epoch} does not "
                        f"continue offset {expected} epoch {epoch}", header.position, MEMORY_PATH,
                    )
                epoch = header.epoch
                expected = header.next_offset
            if error is not None:
                if not damage_is_torn_tail(
                    tail, stop, expected, self._read_recovery_point(), last_segment=True
                ):
                    raise error
                cut = len(tail) - stop
                self.torn_tails_cut += 1
            for header in headers:
                at = header.position - base_position
                self._durable.append((header.base_offset, header.epoch,
                                      tail[at : at + header.size]))
            self._reset_current(list(self._durable))
            self._shared = len(self._durable)
        self._recovery_point = self.durable_end_offset
        return cut

    def _read_recovery_point(self) -> int | None:
        """The modelled checkpoint as opening the log reads it (None: there is none)."""
        return self._recovery_point

    @property
    def recovery_point(self) -> int | None:
        """The modelled checkpoint's offset."""
        return self._recovery_point

    @property
    def in_flight_bytes(self) -> int:
        """Bytes the flush job in flight is writing (what a power loss now could tear)."""
        job = self._job
        return sum(len(blob) for _, _, blob in job.entries) if job is not None else 0

    def wipe(self) -> None:
        """Lose the disk: both images become empty."""
        self._generation += 1
        self._job = None
        self._actions = []
        self._cut_to = None
        self._disk_tail = b""
        self._recovery_point = 0
        self._durable = []
        self._durable_start = (0, 0)
        self._start_offset = self._start_epoch = 0
        self._reset_current([])
        self._shared = 0

    @property
    def durable_end_offset(self) -> int:
        """End offset of the durable image (what a crash now would leave)."""
        if not self._durable:
            return self._durable_start[0]
        return scan_batches(self._durable[-1][2])[0].next_offset
