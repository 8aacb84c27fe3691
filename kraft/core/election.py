"""Vote tallying and election backoff: pure arithmetic, no state beyond one round's votes."""

from __future__ import annotations

import random
from collections.abc import Iterable

from kraft.core.config import ELECTION_BACKOFF_BASE_MS


class EpochElection:
    """One round of (pre-)votes. The local voter's own vote is recorded as granted."""

    def __init__(self, voters: Iterable[int], local_id: int) -> None:
        self._voters = frozenset(voters)
        if local_id not in self._voters:
            raise ValueError(f"node {local_id} is not a voter and cannot stand for election")
        self._granted: set[int] = {local_id}
        self._rejected: set[int] = set()

    @property
    def majority(self) -> int:
        return len(self._voters) // 2 + 1

    def record(self, voter_id: int, granted: bool) -> None:
        """Record a voter's answer. A voter's first answer in the round is the one that counts."""
        if voter_id not in self._voters or voter_id in self._granted | self._rejected:
            return
        (self._granted if granted else self._rejected).add(voter_id)

    def unrecorded(self) -> frozenset[int]:
        return self._voters - self._granted - self._rejected

    def granting(self) -> frozenset[int]:
        return frozenset(self._granted)

    def is_won(self) -> bool:
        return len(self._granted) >= self.majority

    def is_lost(self) -> bool:
        return len(self._granted) + len(self.unrecorded()) < self.majority


def random_election_timeout(rng: random.Random, base_ms: int) -> int:
    """Kafka's randomized election timeout, uniform in [T, 2T)."""
    return base_ms + rng.randrange(base_ms)


def binary_exponential_backoff(rng: random.Random, retries: int, max_ms: int) -> int:
    """A candidate's wait after a lost vote: 100 ms × random in [0, 2^retries), capped."""
    if retries < 1:
        raise ValueError("retries start at 1")
    return min(ELECTION_BACKOFF_BASE_MS * rng.randrange(2 << min(20, retries - 1)), max_ms)


def strict_exponential_backoff(position: int, successors: int, max_ms: int) -> int:
    """How long the p-th preferred successor waits before standing (EndQuorumEpoch).

    The first successor stands at once; the others wait exponentially longer, and a node not on
    the list waits the maximum.
    """
    if position < 0 or position >= successors:
        return max_ms
    if position == 0:
        return 0
    return min(max_ms, (max_ms >> (successors - 1)) << (position - 1))
