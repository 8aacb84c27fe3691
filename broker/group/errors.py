"""The Kafka error codes of the group protocol (Errors.java), beside those in kraft.errors."""

from __future__ import annotations

from enum import IntEnum


class GroupError(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    REQUEST_TIMED_OUT = 7
    OFFSET_METADATA_TOO_LARGE = 12
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    MEMBER_ID_REQUIRED = 79
    GROUP_MAX_SIZE_REACHED = 81
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    FENCED_INSTANCE_ID = 82
    # KIP-848's consumer protocol
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    INVALID_REGULAR_EXPRESSION = 128


# Append errors as the coordinator reports them (Kafka's GroupMetadataManager, spec §2.3).
# UNKNOWN_TOPIC_OR_PARTITION, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT
_TO_COORDINATOR_NOT_AVAILABLE = frozenset({3, 19, 20, 7})
_TO_NOT_COORDINATOR = frozenset({6, 56})  # NOT_LEADER_OR_FOLLOWER, KAFKA_STORAGE_ERROR
_TOO_LARGE = frozenset({10, 18, 4})  # MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE, INVALID_FETCH_SIZE


def append_error(code: int, *, commit: bool) -> GroupError:
    """What a failed `__consumer_offsets` append means to the client."""
    if code == 0:
        return GroupError.NONE
    if code in _TO_COORDINATOR_NOT_AVAILABLE:
        return GroupError.COORDINATOR_NOT_AVAILABLE
    if code in _TO_NOT_COORDINATOR:
        return GroupError.NOT_COORDINATOR
    if code in _TOO_LARGE:
        return GroupError.INVALID_COMMIT_OFFSET_SIZE if commit else GroupError.UNKNOWN_SERVER_ERROR
    return GroupError.UNKNOWN_SERVER_ERROR
