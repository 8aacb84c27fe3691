"""A partition's leader-epoch cache with Kafka's rules (LeaderEpochFileCache, KIP-101/279),
stored in kraft.log's EpochCache and written to `leader-epoch-checkpoint`.

Durability. A change costs the caller's thread (the event loop) nothing: the owner is told
(`on_change`) and the log's next flush job, in a worker thread, writes the entries as they were
when the job began (a temporary file renamed over the old one) and fsyncs the file and the
directory, before it fsyncs any data of the log (broker/log/partition_state.py). Seeding 3,000
partitions paid a file creation and a rename per follower's first append on the loop before
(issue 28). So after a crash (kill -9 or a power loss) the file may lag the log: miss epochs,
or keep entries a truncation removed. That is safe because the file is not the truth, the
batches are: every batch carries its leader epoch, and PartitionLog rebuilds the cache from
the batch headers on open, then takes from the file only an epoch above the last batch's that
starts exactly at the log end — an epoch assigned with no record written (KAFKA-7415), the one
thing the batches cannot tell. Any other entry the batches lack is stale: had a record been
written in that epoch, a batch would carry it; an entry starting below the log end with
batches of a lower epoch after it was truncated away and those batches written since (a
follower cut back to its new leader's log); one past the end was cut with the data. A damaged
or missing file is an empty one. So a lagging file can lose only:
* an epoch assigned with no record written yet: a leader re-assigns its epoch when it becomes
  leader again after the restart, and a follower without it is simply one that never heard of
  that epoch (the leader's diverging-epoch answer still truncates it correctly);
* a truncation of such an entry: the stale entry then starts at the log end, and the next
  truncation to the log end (KAFKA-10706, see PartitionLog.truncate_to) or the next append in
  a higher epoch removes it.
Kafka made the same trade for truncations (KAFKA-15046, fixed up by KAFKA-16541: the file is
flushed asynchronously and log loading fixes stale entries); it still writes `assign`
synchronously because it does not rebuild the cache from every batch on open. We do.

Kafka's rules differ from the Raft log's in three ways: an epoch may be assigned with no
record written (a new leader's epoch at its log end, KAFKA-7415), so a later epoch may start
at the same offset and then replaces it; assigning replaces every entry with an epoch or a start
at or above the new one; and `end_offset_for` answers (-1, -1) for an epoch above the latest and
(epoch, first start) for one below the first.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable

from broker.log import checkpoints
from kraft.log.epoch_cache import EpochCache

UNDEFINED = -1


class LeaderEpochCache:
    """(epoch, start offset) entries, both strictly increasing. With `on_change` set the owner
    writes the file later (its flush job); without, each change writes it at once (no fsync)."""

    __slots__ = ("_cache", "_directory", "on_change")

    def __init__(self, directory: str, entries: list[tuple[int, int]] | None = None) -> None:
        self._directory = directory
        self.on_change: Callable[[], None] | None = None
        self._cache = EpochCache()
        for epoch, start in entries or ():
            self._cache.assign(epoch, start)

    def entries(self) -> list[tuple[int, int]]:
        return self._cache.entries()

    @property
    def latest_epoch(self) -> int:
        return self._cache.last_epoch if len(self._cache) else UNDEFINED

    def _save(self) -> None:
        if self.on_change is not None:
            self.on_change()
        else:
            checkpoints.write_leader_epochs(self._directory, self._cache.entries(),
                                            durable=False)

    def save(self) -> None:
        """Have the file written: now (without fsync), or by the owner's next flush job."""
        self._save()

    def assign(self, epoch: int, start_offset: int, save: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; True when the cache changed."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"epoch {epoch} at offset {start_offset}")
        entries = self._cache.entries()
        if entries:
            last_epoch, last_start = entries[-1]
            if epoch == last_epoch and start_offset >= last_start:
                return False
            # Every entry at or above the new epoch or offset is replaced (a suffix).
            for index, (old_epoch, old_start) in enumerate(entries):
                if old_epoch >= epoch or old_start >= start_offset:
                    self._cache.truncate_from(old_start)
                    del entries[index:]
                    break
        self._cache.assign(epoch, start_offset)
        if save:
            self._save()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: drop the epochs that start at or past it."""
        entries = self._cache.entries()
        if entries and entries[-1][1] >= end_offset:
            self._cache.truncate_from(end_offset)
            self._save()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: drop the epochs that end at or before it and
        move the start of the one containing it there (Kafka's truncateFromStart)."""
        entries = self._cache.entries()
        index = bisect_right([start for _, start in entries], start_offset) - 1
        if index < 0 or (index == 0 and entries[0][1] == start_offset):
            return
        kept = [(entries[index][0], start_offset), *entries[index + 1 :]]
        self._replace(kept)

    def clear(self) -> None:
        if len(self._cache):
            self._replace([])

    def _replace(self, entries: list[tuple[int, int]]) -> None:
        self._cache.clear()
        for epoch, start in entries:
            self._cache.assign(epoch, start)
        self._save()

    def end_offset_for(self, epoch: int, log_end: int) -> tuple[int, int]:
        """(the largest epoch ≤ `epoch`, where it ends: the next epoch's start, or `log_end`
        for the latest); (-1, -1) when `epoch` is undefined or above every entry;
        (`epoch`, the first start) when below every entry (Kafka's endOffsetFor)."""
        if epoch == UNDEFINED or not len(self._cache):
            return UNDEFINED, UNDEFINED
        if self._cache.last_epoch == epoch:
            # A follower's every fetch asks for the latest epoch: no copy of the entries.
            return epoch, log_end
        entries = self._cache.entries()
        index = bisect_right([e for e, _ in entries], epoch)
        if index == len(entries):
            return UNDEFINED, UNDEFINED
        higher_start = entries[index][1]
        if index == 0:
            return epoch, higher_start
        return entries[index - 1][0], higher_start
