"""Rule-based test: any sequence of appends, truncations, flush steps and crashes keeps each
log equal to a plain list model, with flushed_offset the end of the prefix it shares with the
durable image.

A crash is MemoryLog.crash() for the memory log. For SegmentedLog it is close() without a flush
and a reopen: nothing reaches the files outside a flush job, so the files then hold exactly what
the last job that ran wrote, which is what the model's durable image tracks.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from kraft.log import LogAppendError, MemoryLog, OffsetAndEpoch, SegmentedLog, encode_batch

_uids = itertools.count()


@dataclass(frozen=True)
class ModelBatch:
    uid: int  # identity: the same bytes re-appended after a truncation are a new batch
    base: int
    epoch: int
    records: tuple[bytes, ...]
    blob: bytes

    @property
    def next_offset(self) -> int:
        return self.base + len(self.records)


class LogMachine(RuleBasedStateMachine):
    """Shared rules; subclasses say how to make, crash and reopen the log."""

    def __init__(self) -> None:
        super().__init__()
        self.current: list[ModelBatch] = []
        self.durable: list[ModelBatch] = []
        self.job: Any = None
        self.job_image: list[ModelBatch] | None = None
        self.job_ran = False
        self.log: Any = None

    def make_log(self) -> Any:
        raise NotImplementedError

    @initialize()
    def start(self) -> None:
        self.log = self.make_log()

    # -- model helpers ---------------------------------------------------------------------

    @property
    def end(self) -> int:
        return self.current[-1].next_offset if self.current else 0

    @property
    def last_epoch(self) -> int:
        return self.current[-1].epoch if self.current else 0

    def flushed(self) -> int:
        shared = 0
        for ours, durable in zip(self.current, self.durable, strict=False):
            if ours.uid != durable.uid:
                break
            shared = ours.next_offset
        return shared

    # -- rules -----------------------------------------------------------------------------

    @rule(
        sizes=st.lists(st.integers(0, 40), min_size=1, max_size=3),
        bump=st.integers(0, 2),
        control=st.booleans(),
    )
    def append_as_leader(self, sizes: list[int], bump: int, control: bool) -> None:
        epoch = self.last_epoch + bump
        records = tuple(bytes([len(self.current) % 256]) * size for size in sizes)
        base = self.log.append_as_leader(records, epoch, 7, control)
        assert base == self.end
        blob = encode_batch(base, epoch, records, 7, control)
        self.current.append(ModelBatch(next(_uids), base, epoch, records, blob))

    @rule(counts=st.lists(st.integers(1, 3), min_size=1, max_size=3), bump=st.integers(0, 1))
    def append_as_follower(self, counts: list[int], bump: int) -> None:
        offset = self.end
        epoch = self.last_epoch + bump
        batches = []
        for count in counts:
            records = tuple(b"f%d" % (offset + i) for i in range(count))
            blob = encode_batch(offset, epoch, records, 3)
            batches.append(ModelBatch(next(_uids), offset, epoch, records, blob))
            offset += count
        assert self.log.append_as_follower(b"".join(b.blob for b in batches)) == sum(counts)
        self.current.extend(batches)

    @precondition(lambda self: self.last_epoch > 0)
    @rule()
    def stale_epoch_is_refused(self) -> None:
        try:
            self.log.append_as_leader([b"x"], self.last_epoch - 1, 0)
        except LogAppendError:
            return
        raise AssertionError("append with a lower epoch was accepted")

    @precondition(lambda self: bool(self.current))
    @rule(data=st.data())
    def truncate(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, len(self.current) - 1))
        self.log.truncate_to(self.current[index].base)
        del self.current[index:]

    @precondition(lambda self: any(len(b.records) > 1 for b in self.current))
    @rule(data=st.data())
    def truncate_inside_a_batch_is_refused(self, data: st.DataObject) -> None:
        batch = data.draw(st.sampled_from([b for b in self.current if len(b.records) > 1]))
        try:
            self.log.truncate_to(batch.base + 1)
        except ValueError:
            return
        raise AssertionError("truncation inside a batch was accepted")

    @precondition(lambda self: self.job is None)
    @rule()
    def begin_flush(self) -> None:
        self.job = self.log.begin_flush()
        if self.job is not None:
            self.job_image = list(self.current)
            self.job_ran = False

    @precondition(lambda self: self.job is not None and not self.job_ran)
    @rule()
    def run_job(self) -> None:
        self.job.run()
        self.job_ran = True

    @precondition(lambda self: self.job is not None and self.job_ran)
    @rule()
    def complete_job(self) -> None:
        self.log.complete_flush(self.job)
        assert self.job_image is not None
        self.durable = self.job_image
        self.job = self.job_image = None

    @precondition(lambda self: self.job is None)
    @rule()
    def flush(self) -> None:
        self.log.flush()
        self.durable = list(self.current)

    @rule()
    def crash(self) -> None:
        self.do_crash()
        self.current = list(self.durable)
        self.job = self.job_image = None

    def do_crash(self) -> None:
        raise NotImplementedError

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def matches_the_model(self) -> None:
        log = self.log
        if log is None:
            return
        assert log.start_offset == 0
        assert log.end_offset == self.end
        assert log.last_epoch == self.last_epoch
        assert log.flushed_offset == self.flushed()
        assert log.read(0, 1 << 30, self.end) == b"".join(b.blob for b in self.current)
        decoded = [(b.base_offset, b.epoch, b.records) for b in log.batches(0, self.end)]
        assert decoded == [(b.base, b.epoch, b.records) for b in self.current]
        for epoch in range(self.last_epoch + 2):
            assert log.end_offset_for_epoch(epoch) == self.expected_end_for(epoch)

    def expected_end_for(self, epoch: int) -> OffsetAndEpoch:
        older = [b for b in self.current if b.epoch <= epoch]
        if not older:
            return OffsetAndEpoch(offset=0, epoch=0)
        found = older[-1].epoch
        later = [b.base for b in self.current if b.epoch > found]
        return OffsetAndEpoch(offset=later[0] if later else self.end, epoch=found)


class MemoryLogMachine(LogMachine):
    def make_log(self) -> Any:
        return MemoryLog()

    def do_crash(self) -> None:
        self.log.crash()


class SegmentedLogMachine(LogMachine):
    def __init__(self) -> None:
        super().__init__()
        self.directory = tempfile.mkdtemp(prefix="kraft-log-")

    def make_log(self) -> Any:
        return SegmentedLog(self.directory, segment_bytes=160, cache_bytes=100)

    def do_crash(self) -> None:
        # A job that ran has written and synced its image even if nobody completed it.
        if self.job is not None and self.job_ran:
            assert self.job_image is not None
            self.durable = self.job_image
        self.log.close()
        self.log = self.make_log()

    @precondition(lambda self: self.job is None)
    @rule()
    def flush_and_reopen(self) -> None:
        self.log.flush()
        self.log.close()
        self.durable = list(self.current)
        self.log = self.make_log()

    def teardown(self) -> None:
        if self.log is not None:
            self.log.close()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.mark.parametrize("machine", [MemoryLogMachine, SegmentedLogMachine])
def test_log_matches_model(machine: type[LogMachine]) -> None:
    settings_ = settings(
        max_examples=80,
        stateful_step_count=40,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    machine.TestCase.settings = settings_
    machine.TestCase().runTest()
