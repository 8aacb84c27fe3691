"""The core's clock and its one loop timer.

`monotonic_ms` is the time the driver hands the core. `CoreTimer` keeps one loop timer at the
core's earliest deadline and polls the core when it fires; a timer that fires far too late
(the process stood still) first lets what arrived meanwhile reach the core.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from kraft.node.transport import STALL_GRACE_S, STALL_S

log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class CoreTimer:
    def __init__(self, poll: Callable[[], None], stopped: Callable[[], bool]) -> None:
        """`poll` polls the core (through the node's guard); `stopped` says the node stopped."""
        self._poll = poll
        self._stopped = stopped
        self._timer: asyncio.TimerHandle | None = None
        self._after_stall = False  # the timer fired far too late: a grace turn runs first
        self._scheduled_deadline = float("inf")

    def after_step(self, deadline: float) -> None:
        """After a core step: `deadline` is the core's next one (`next_deadline()`)."""
        if deadline < self._scheduled_deadline and not self._after_stall:
            self._schedule(deadline)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def _schedule(self, deadline: float) -> None:
        """One loop timer at the core's earliest deadline. A later deadline keeps the timer:
        it fires early, polls for nothing and reschedules, which is cheaper than moving it on
        every Fetch answer. (A TimerHandle, not a task awaiting an event with wait_for: that
        cost a task and a timeout per step, 8 % of a leader's Python time at one writer.)"""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._scheduled_deadline = deadline
        if deadline != float("inf"):
            # The loop's clock is time.monotonic(), the core's monotonic_ms() truncates it: a
            # microsecond past the deadline, the core sees it due.
            self._timer = asyncio.get_running_loop().call_at(
                deadline / 1000 + 1e-6, self._on_timer)

    def _on_timer(self) -> None:
        late_ms = monotonic_ms() - self._scheduled_deadline
        self._timer = None
        self._scheduled_deadline = float("inf")
        if self._stopped():
            return
        if late_ms > STALL_S * 1000:
            # The process stood still (SIGSTOP, a VM pause, a starved CPU). What arrived
            # meanwhile is still in gRPC's queues, a few loop turns from the core: read it
            # before judging anyone's silence, or a stalled follower takes its own stall for a
            # hung leader, and a stalled leader for lost voters.
            log.info("the event loop stood still for %d ms; reading what arrived first",
                     late_ms)
            self._after_stall = True
            self._timer = asyncio.get_running_loop().call_later(
                STALL_GRACE_S, self._poll_after_stall)
            return
        self._poll()

    def _poll_after_stall(self) -> None:
        self._timer = None
        self._after_stall = False
        if not self._stopped():
            self._poll()
