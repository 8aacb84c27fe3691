"""Kafka's broker states (BrokerState.java), the ones a KRaft broker moves through."""

from __future__ import annotations

from enum import Enum


class BrokerState(Enum):
    NOT_RUNNING = 0
    STARTING = 1  # registering and catching up with the metadata log
    RECOVERY = 2  # caught up; waiting for the controller to unfence it
    RUNNING = 3  # unfenced: serving clients
    PENDING_CONTROLLED_SHUTDOWN = 6  # asked to shut down; its leaderships are being moved
    SHUTTING_DOWN = 7

    @property
    def label(self) -> str:
        return self.name.lower()
