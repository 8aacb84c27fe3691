"""Creating partition logs for the LogManager (broker/log/log_manager.py): where a new log goes
(the online log dir holding the fewest partitions), and many new logs created at once off the
event loop.

A big CreateTopics gives a broker thousands of new replicas in one metadata image. Creating a
log is a directory and two files (`partition.metadata`, a recovery point of 0; no fsync, see
broker/log/partition_state.py): a few hundred microseconds of system calls idle, but at a
loaded broker 3,000 of them held its event loop for 14 s of wall (3 s of CPU, issue 28).
`create` places the logs on the loop (cheap, and it keeps the per-dir counts right), opens
them in one worker-thread hop, and attaches them on the loop when the hop is back, as the
load at start does. The hop runs as a task of its own: a caller cancelled meanwhile (a newer
image) does not leave opened logs unattached, and `wait` lets the close wait for it.

A creation that fails takes its partition offline as a damaged log does (`Damaged` in the
loader's map: its requests get KAFKA_STORAGE_ERROR, and get_or_create refuses it until the
broker restarts), and an OSError fails the log dir, as get_or_create's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
from collections.abc import Callable, Mapping, Sequence

from broker.log.checkpoints import TopicPartition
from broker.log.config import LogConfig
from broker.log.log_loader import Damaged
from broker.log.partition_log import PartitionLog

logger = logging.getLogger(__name__)

# (topic, partition, topic id, config) of a log to get or create.
NewLog = tuple[str, int, str, LogConfig]
Created = PartitionLog | Exception
_Planned = tuple[TopicPartition, str, str, LogConfig]  # tp, log dir, topic id, config


class LogCreator:
    """The LogManager's placement of new logs and its creations off the loop."""

    def __init__(
        self,
        dirs: Sequence[str],
        counts: dict[str, int],
        offline_dirs: Mapping[str, str],
        damaged: dict[TopicPartition, Damaged],
        get: Callable[[TopicPartition], PartitionLog | None],
        get_or_create: Callable[[str, int, str, LogConfig], PartitionLog],
        attach: Callable[[TopicPartition, PartitionLog], None],
        fail_dir: Callable[[str, BaseException], None],
    ) -> None:
        self._dirs = dirs
        self._counts = counts  # partitions per log dir, a log being created counted
        self._offline_dirs = offline_dirs
        self._damaged = damaged
        self._get = get
        self._get_or_create = get_or_create
        self._attach = attach
        self._fail_dir = fail_dir
        self._creating: set[TopicPartition] = set()
        self._tasks: set[asyncio.Task[dict[TopicPartition, Created]]] = set()

    def place(self) -> str:
        """The online log dir holding the fewest partitions; OSError when none is online."""
        online = [d for d in self._dirs if d not in self._offline_dirs]
        if not online:
            raise OSError(errno.EIO, f"every log dir is offline: {sorted(self._offline_dirs)}")
        return min(online, key=lambda directory: self._counts.get(directory, 0))

    def creating(self, tp: TopicPartition) -> bool:
        return tp in self._creating

    async def create(self, specs: Sequence[NewLog]) -> dict[TopicPartition, Created]:
        """get_or_create of each of `specs`: a log that exists (or is damaged) answers at
        once, the new ones are created in one worker-thread hop. Each partition's log, or the
        error that keeps it offline. A partition already being created is an error (ValueError):
        the caller asks once."""
        results: dict[TopicPartition, Created] = {}
        planned: list[_Planned] = []
        for topic, partition, topic_id, config in specs:
            tp = (topic, partition)
            if tp in self._creating:
                results[tp] = ValueError(f"{topic}-{partition} is being created already")
                continue
            try:
                if tp in self._damaged or self._get(tp) is not None:
                    results[tp] = self._get_or_create(topic, partition, topic_id, config)
                    continue
                directory = self.place()
            except OSError as exc:
                results[tp] = exc
                continue
            self._counts[directory] = self._counts.get(directory, 0) + 1
            self._creating.add(tp)
            planned.append((tp, directory, topic_id, config))
        if planned:
            task = asyncio.ensure_future(self._create(planned))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
            results.update(await asyncio.shield(task))
        return results

    async def _create(self, planned: list[_Planned]) -> dict[TopicPartition, Created]:
        try:
            opened = await asyncio.to_thread(_open_all, planned)
        finally:
            for tp, directory, _, _ in planned:
                self._creating.discard(tp)
                self._counts[directory] -= 1  # _attach counts it again
        results: dict[TopicPartition, Created] = {}
        for (tp, directory, _, _), outcome in zip(planned, opened, strict=True):
            if isinstance(outcome, PartitionLog):
                self._attach(tp, outcome)
                results[tp] = outcome
                continue
            path = os.path.join(directory, f"{tp[0]}-{tp[1]}")
            logger.error("cannot create the log of %s-%d in %s: %s", *tp, directory, outcome)
            self._damaged[tp] = Damaged(tp, path, f"its creation failed: {outcome}")
            if isinstance(outcome, OSError):
                self._fail_dir(directory, outcome)
            results[tp] = outcome
        return results

    async def wait(self) -> None:
        """Until every creation under way is attached (the close waits for them)."""
        for task in list(self._tasks):
            with contextlib.suppress(Exception):
                await task


def _open_all(planned: list[_Planned]) -> list[Created]:
    """Create each planned log (blocking: a worker thread); the log or the error, in order."""
    outcomes: list[Created] = []
    for (topic, partition), directory, topic_id, config in planned:
        try:
            outcomes.append(PartitionLog.open(os.path.join(directory, f"{topic}-{partition}"),
                                              topic_id, config))
        except Exception as exc:  # the partition goes offline; the others are created
            outcomes.append(exc)
    return outcomes
