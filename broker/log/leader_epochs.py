"""A partition's leader-epoch cache with Kafka's rules (LeaderEpochFileCache, KIP-101/279),
stored in kraft.log's EpochCache and written to `leader-epoch-checkpoint` on every change.

Durability. Every change is written at once on the caller's thread (the event loop) as a
temporary file renamed over the old one, without fsync: a process crash (kill -9) keeps it, and
the LogManager's background round fsyncs it (and the directory) in a worker thread soon after,
always before the log's next data fsync. A power loss before that round may leave the previous
file (or, for a file never synced, a damaged or missing one). That is safe because the file is
not the truth, the batches are: every batch carries its leader epoch, and PartitionLog rebuilds
the cache from the batch headers on open, then takes from the file only epochs above the last
batch's that start at or below the log end. So a lost write can lose only:
* an epoch assigned with no record written yet (KAFKA-7415): a leader re-assigns its epoch
  when it becomes leader again after the restart, and a follower without it is simply one that
  never heard of that epoch (the leader's diverging-epoch answer still truncates it correctly);
* a truncation of such an entry: the stale entry then starts at or below the log end (entries
  past it are dropped on open), and the next truncation to the log end (KAFKA-10706, see
  PartitionLog.truncate_to) or the next append in a higher epoch removes it.
Kafka made the same trade: since KAFKA-15046 (fixed up by KAFKA-16541) it flushes the
checkpoint asynchronously after truncations, and relies on log loading to fix stale entries;
it still fsyncs `assign` synchronously because it does not rebuild the cache from every batch
on open. We do, so `assign` needs no fsync on the loop either.

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
    """(epoch, start offset) entries, both strictly increasing, written through to a file
    (without fsync; `on_save` is told after each write, so the owner can fsync it later)."""

    __slots__ = ("_cache", "_directory", "on_save")

    def __init__(self, directory: str, entries: list[tuple[int, int]] | None = None) -> None:
        self._directory = directory
        self.on_save: Callable[[], None] | None = None
        self._cache = EpochCache()
        for epoch, start in entries or ():
            self._cache.assign(epoch, start)

    def entries(self) -> list[tuple[int, int]]:
        return self._cache.entries()

    @property
    def latest_epoch(self) -> int:
        return self._cache.last_epoch if len(self._cache) else UNDEFINED

    def _save(self) -> None:
        checkpoints.write_leader_epochs(self._directory, self._cache.entries(), durable=False)
        if self.on_save is not None:
            self.on_save()

    def save(self) -> None:
        """Write the file now (without fsync)."""
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
        entries = self._cache.entries()
        if epoch == UNDEFINED or not entries:
            return UNDEFINED, UNDEFINED
        if entries[-1][0] == epoch:
            return epoch, log_end
        index = bisect_right([e for e, _ in entries], epoch)
        if index == len(entries):
            return UNDEFINED, UNDEFINED
        higher_start = entries[index][1]
        if index == 0:
            return epoch, higher_start
        return entries[index - 1][0], higher_start
