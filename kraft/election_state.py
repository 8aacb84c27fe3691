"""The persisted election state: what a voter must remember across a crash."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ElectionState:
    """(epoch, leader?, voted-for?) as in Kafka's quorum-state file. -1 means none.

    A node never both knows a leader and has no epoch: epoch 0 with no leader and no vote is the
    primordial state of a fresh node.
    """

    epoch: int
    leader_id: int = -1
    voted_id: int = -1

    def __post_init__(self) -> None:
        if self.epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {self.epoch}")
        if self.leader_id < -1 or self.voted_id < -1:
            raise ValueError("leader_id and voted_id must be >= -1")

    @property
    def has_leader(self) -> bool:
        return self.leader_id >= 0

    @property
    def has_voted(self) -> bool:
        return self.voted_id >= 0


PRIMORDIAL = ElectionState(epoch=0)
