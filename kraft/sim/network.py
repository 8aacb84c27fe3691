"""The simulated network: per-message delay, loss, duplication (and so reordering), and
partitions between chosen nodes. It only decides fates; the cluster delivers."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class NetworkProfile:
    min_delay_ms: int = 1
    max_delay_ms: int = 5
    drop_rate: float = 0.0
    duplicate_rate: float = 0.0


@dataclass
class SimNetwork:
    rng: random.Random
    profile: NetworkProfile = field(default_factory=NetworkProfile)
    _cut: set[tuple[int, int]] = field(default_factory=set)

    def delays(self, source: int, destination: int) -> list[int]:
        """Delivery delays for one message: [] when lost, two entries when duplicated."""
        if not self.connected(source, destination):
            return []
        if self.rng.random() < self.profile.drop_rate:
            return []
        copies = 2 if self.rng.random() < self.profile.duplicate_rate else 1
        return [
            self.rng.randint(self.profile.min_delay_ms, self.profile.max_delay_ms)
            for _ in range(copies)
        ]

    def connected(self, a: int, b: int) -> bool:
        return (a, b) not in self._cut

    def partition(self, side_a: set[int], side_b: set[int]) -> None:
        """Cut every link between the two sides, both ways."""
        for a in side_a:
            for b in side_b:
                if a != b:
                    self._cut.add((a, b))
                    self._cut.add((b, a))

    def isolate(self, node: int, everyone: set[int]) -> None:
        self.partition({node}, everyone - {node})

    def heal(self) -> None:
        self._cut.clear()
