"""Storage and clock faults the simulator injects into its nodes.

* `FaultyQuorumStateStore`: a quorum-state store whose writes fail (EIO) once or until healed,
  as a disk that fills or breaks under the node would.
* `NodeClock`: a node's own timer clock, running `rate` times as fast as the simulation's
  (timers of real machines drift; the protocol may not assume they agree).
"""

from __future__ import annotations

import errno
import math
from dataclasses import dataclass

from kraft.election_state import ElectionState
from kraft.log.quorum_state import MemoryQuorumStateStore

FAIL_ALWAYS = -1


class FaultyQuorumStateStore(MemoryQuorumStateStore):
    def __init__(self) -> None:
        super().__init__()
        self.failing_writes = 0  # how many of the next writes fail; FAIL_ALWAYS: every one
        self.failed_writes = 0

    def fail_next(self, count: int = 1) -> None:
        self.failing_writes = count

    def fail_always(self) -> None:
        self.failing_writes = FAIL_ALWAYS

    def heal(self) -> None:
        self.failing_writes = 0

    def write(self, state: ElectionState) -> None:
        if self.failing_writes:
            if self.failing_writes > 0:
                self.failing_writes -= 1
            self.failed_writes += 1
            raise OSError(errno.EIO, "Input/output error (simulated)", "quorum-state")
        super().write(state)


@dataclass(frozen=True)
class NodeClock:
    rate: float = 1.0

    def local(self, global_ms: int) -> int:
        """The node's timer clock at simulation time `global_ms` (monotonic in it)."""
        return int(global_ms * self.rate)

    def global_delay(self, local_deadline: float, global_now: int) -> int:
        """How long after `global_now` the node's clock reaches `local_deadline`."""
        at = math.ceil(local_deadline / self.rate)
        while self.local(at) < local_deadline:  # float rounding
            at += 1
        return max(0, at - global_now)
