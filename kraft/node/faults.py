"""Fault injection for the chaos tool and tests, driven by files in one directory
(`internal.test.faults.dir`), so a harness can fault any node in any role without an RPC:

* `blocked`: comma-separated node ids; Raft traffic to and from them is dropped (a partition);
* `disk-full`: while it exists, the log's writes fail with ENOSPC;
* `fsync-delay-ms`: every group commit's fsync takes that much longer;
* `clock-offset-ms`: added to the wall clock the node stamps records with (a clock jump; the
  protocol's timers run on the monotonic clock and do not jump);
* `generation` (optional): a number the harness writes *after* the files above each time it
  changes them, so a confirmation can name the change it confirms.

The injector polls the directory every 50 ms and applies what changed, logging each change,
then **confirms** it: one JSON line appended to `applied` in the same directory,
`{"generation", "blocked", "diskFull", "fsyncDelayMs", "clockOffsetMs", "pid", "wallTime"}`,
written only after the new state is in effect. A harness counts a fault as applied when a
line names a generation in which the fault was active with exactly the state it wrote then
(a read that caught the files half-way through a change confirms a state that matches no
generation, and the next poll confirms the finished one). The file survives restarts: a
restarted node confirms the state it starts with.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from contextlib import suppress
from dataclasses import dataclass

from kraft.log.segmented import LogFaults
from kraft.node.raft_node import RaftNode

log = logging.getLogger(__name__)

POLL_S = 0.05
APPLIED_FILE = "applied"


@dataclass(frozen=True)
class FaultState:
    blocked: frozenset[int] = frozenset()
    disk_full: bool = False
    fsync_delay_ms: int = 0
    clock_offset_ms: int = 0
    generation: int = 0

    def confirmation(self) -> dict[str, object]:
        """What the `applied` line says about this state (the harness compares it)."""
        return {"generation": self.generation, "blocked": sorted(self.blocked),
                "diskFull": self.disk_full, "fsyncDelayMs": self.fsync_delay_ms,
                "clockOffsetMs": self.clock_offset_ms}


def read_faults(directory: str) -> FaultState:
    """The faults the directory describes now; unreadable or malformed files count as absent.
    `generation` is read first: the harness writes it last, so the other files are at least
    as new as the generation read."""

    def text(name: str) -> str | None:
        with suppress(OSError), open(os.path.join(directory, name), encoding="utf-8") as file:
            return file.read().strip()
        return None

    def integer(name: str) -> int:
        raw = text(name)
        try:
            return int(raw) if raw else 0
        except ValueError:
            return 0

    generation = integer("generation")
    blocked_text = text("blocked") or ""
    blocked = frozenset(int(p) for p in blocked_text.split(",") if p.strip().lstrip("-").isdigit())
    return FaultState(
        blocked=blocked,
        disk_full=os.path.exists(os.path.join(directory, "disk-full")),
        fsync_delay_ms=integer("fsync-delay-ms"),
        clock_offset_ms=integer("clock-offset-ms"),
        generation=generation,
    )


class FaultInjector:
    def __init__(self, directory: str, node: RaftNode, log_faults: LogFaults) -> None:
        self.directory = directory
        self.node = node
        self.log_faults = log_faults
        self.state = FaultState()
        self._base_clock_offset: int | None = None
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        os.makedirs(self.directory, exist_ok=True)
        self.apply(read_faults(self.directory), force=True)
        self._task = asyncio.create_task(self._watch(), name="kraft-faults")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(POLL_S)
            state = read_faults(self.directory)
            if state != self.state:
                self.apply(state)

    def apply(self, state: FaultState, force: bool = False) -> None:
        """Put `state` in effect, then confirm it (also when only the generation moved, so
        every change the harness makes is confirmed; `force`: at start-up)."""
        if not force and state == self.state:
            return
        if state != self.state:
            log.warning("injected faults: %s", state)
        self.node.transport.blocked = state.blocked
        self.log_faults.disk_full = state.disk_full
        self.log_faults.fsync_delay_s = state.fsync_delay_ms / 1000
        core = self.node.core
        if core is not None:
            if self._base_clock_offset is None:
                self._base_clock_offset = core.wall_clock_offset_ms
            core.wall_clock_offset_ms = self._base_clock_offset + state.clock_offset_ms
        self.state = state
        self._confirm(state)

    def _confirm(self, state: FaultState) -> None:
        line = json.dumps({**state.confirmation(), "pid": os.getpid(), "wallTime": time.time()})
        try:
            # One write(2) of one line in append mode: a reader sees whole lines, or a torn
            # last one (skipped) if the process died inside the call.
            fd = os.open(os.path.join(self.directory, APPLIED_FILE),
                         os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (line + "\n").encode())
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("cannot confirm injected faults in %s: %s", self.directory, exc)
