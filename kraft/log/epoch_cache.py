"""The leader-epoch cache: where each epoch starts in the log (Kafka's LeaderEpochFileCache).

It answers end_offset_for_epoch, the question a follower's Fetch asks to find where its log
diverges from the leader's, without scanning batches. Both log implementations rebuild it from
batch headers on open, so it is never persisted on its own.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from kraft.log.base import OffsetAndEpoch


class EpochCache:
    """Ordered (epoch, start_offset) entries: strictly increasing epochs and start offsets."""

    __slots__ = ("_epochs", "_starts")

    def __init__(self) -> None:
        self._epochs: list[int] = []
        self._starts: list[int] = []

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that a batch of `epoch` starts at `start_offset` (called on every append).

        A repeat of the last epoch is a no-op; a lower epoch, or a new epoch that does not start
        after the last one, is a ValueError (the logs reject such appends before calling this).
        """
        if self._epochs:
            last = self._epochs[-1]
            if epoch == last:
                return
            if epoch < last:
                raise ValueError(f"epoch {epoch} is below the last epoch {last}")
            if start_offset <= self._starts[-1]:
                raise ValueError(
                    f"epoch {epoch} would start at {start_offset}, not after epoch {last} "
                    f"which starts at {self._starts[-1]}"
                )
        self._epochs.append(epoch)
        self._starts.append(start_offset)

    def truncate_from(self, offset: int) -> None:
        """Forget every epoch that starts at or above `offset` (the log was truncated there)."""
        index = bisect_left(self._starts, offset)
        del self._epochs[index:]
        del self._starts[index:]

    def truncate_before(self, offset: int) -> None:
        """Forget the epochs that end at or below `offset` (the log now starts there)."""
        index = bisect_right(self._starts, offset) - 1
        if index > 0:
            del self._epochs[:index]
            del self._starts[:index]

    def clear(self) -> None:
        """Forget everything (the log lost all its batches)."""
        self._epochs.clear()
        self._starts.clear()

    @property
    def last_epoch(self) -> int:
        """The newest epoch, 0 when empty."""
        return self._epochs[-1] if self._epochs else 0

    def entries(self) -> list[tuple[int, int]]:
        """(epoch, start_offset) pairs, oldest first."""
        return list(zip(self._epochs, self._starts, strict=True))

    def end_offset_for(
        self, epoch: int, log_end: int, log_start: int, start_epoch: int = 0
    ) -> OffsetAndEpoch:
        """The largest known epoch E' <= `epoch` and where E' ends: the start of the next epoch,
        or `log_end` for the newest. When `epoch` predates every entry: (log_start,
        start_epoch), the id of the snapshot the log starts from (epoch 0 without one)."""
        index = bisect_right(self._epochs, epoch) - 1
        if index < 0:
            return OffsetAndEpoch(offset=log_start, epoch=start_epoch)
        if index + 1 < len(self._starts):
            return OffsetAndEpoch(offset=self._starts[index + 1], epoch=self._epochs[index])
        return OffsetAndEpoch(offset=log_end, epoch=self._epochs[index])

    def __len__(self) -> int:
        return len(self._epochs)
