"""Kafka's error names, part of the protocol, and the core's own exceptions."""

from __future__ import annotations

from enum import IntEnum


class Errors(IntEnum):
    """Error codes as Kafka numbers them (Errors.java), limited to those KRaft uses."""

    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    RECORD_BATCH_TOO_LARGE = 18
    KAFKA_STORAGE_ERROR = 56
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    INCONSISTENT_CLUSTER_ID = 104
    INVALID_VOTER_KEY = 125


class RaftError(Exception):
    """An expected refusal of a local command, carrying Kafka's error name."""

    def __init__(self, error: Errors, message: str) -> None:
        self.error = error
        super().__init__(f"{error.name}: {message}")


class NotLeaderError(RaftError):
    def __init__(self, message: str) -> None:
        super().__init__(Errors.NOT_LEADER_OR_FOLLOWER, message)


class RaftInvariantError(Exception):
    """A broken safety invariant: the node must stop loudly rather than continue."""
