"""Kafka's error codes (Errors.java): the one table of codes, names and default messages that
every layer uses — the Raft core and its RPCs, the controller's rules, the services and the
CLIs. It holds the errors this project returns or reads; a code outside it is shown by
`error_name` as `ERROR_<code>`."""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType


class Errors(IntEnum):
    """Error codes as Kafka numbers them."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_BATCH_TOO_LARGE = 18
    CLUSTER_AUTHORIZATION_FAILED = 31
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_UPDATE_VERSION = 95
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_CLUSTER_ID = 104
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    INVALID_VOTER_KEY = 125


# Kafka's default message for each error, used when a refusal gives none.
DEFAULT_MESSAGES: Mapping[Errors, str] = MappingProxyType({
    Errors.UNKNOWN_SERVER_ERROR:
        "The server experienced an unexpected error when processing the request.",
    Errors.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    Errors.INVALID_TOPIC_EXCEPTION:
        "The request attempted to perform an operation on an invalid topic.",
    Errors.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    Errors.INVALID_PARTITIONS: "Number of partitions is below 1.",
    Errors.INVALID_REPLICATION_FACTOR:
        "Replication factor is below 1 or larger than the number of available brokers.",
    Errors.INVALID_REPLICA_ASSIGNMENT: "Replica assignment is invalid.",
    Errors.INVALID_CONFIG: "Configuration is invalid.",
    Errors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    Errors.INVALID_REQUEST:
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details.",
    Errors.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
    Errors.OPERATION_NOT_ATTEMPTED:
        "The broker did not attempt to execute this operation. This may happen for batched "
        "RPCs where some operations in the batch failed, causing the broker to respond "
        "without trying the rest.",
    Errors.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    Errors.FENCED_LEADER_EPOCH:
        "The leader epoch in the request is older than the epoch on the broker.",
    Errors.STALE_BROKER_EPOCH: "Broker epoch has changed.",
    Errors.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE:
        "Eligible topic partition leaders are not available.",
    Errors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    Errors.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    Errors.INVALID_UPDATE_VERSION: "The given update version was invalid.",
    Errors.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    Errors.BROKER_ID_NOT_REGISTERED: "The given broker ID was not registered.",
    Errors.DUPLICATE_BROKER_REGISTRATION: "This broker ID is already in use.",
    Errors.INCONSISTENT_CLUSTER_ID:
        "The clusterId in the request does not match that found on the server.",
    Errors.INELIGIBLE_REPLICA: "The new ISR contains at least one ineligible replica.",
    Errors.NEW_LEADER_ELECTED:
        "The AlterPartition request successfully updated the partition state but the leader "
        "has changed.",
})


def error_name(code: int) -> str:
    """Kafka's name for an error code, or `ERROR_<code>` for one outside the table."""
    try:
        return Errors(code).name
    except ValueError:
        return f"ERROR_{code}"
