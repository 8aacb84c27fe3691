"""Kafka's API errors as the controller's rules return them, and the result of a rule."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Generic, TypeVar

from metadata.records import Record

T = TypeVar("T")

# Kafka's MAX_RECORDS_PER_USER_OP: a user operation that needs more records is refused.
MAX_RECORDS_PER_USER_OP = 10_000


class ApiErrors(IntEnum):
    """Kafka's error codes (Errors.java) for the errors the controller's rules return."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_TOPIC_EXCEPTION = 17
    CLUSTER_AUTHORIZATION_FAILED = 31
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OPERATION_NOT_ATTEMPTED = 55
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    STALE_BROKER_EPOCH = 77
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_UPDATE_VERSION = 95
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_CLUSTER_ID = 104
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108


# Kafka's default message for each error, used when a rule gives none.
DEFAULT_MESSAGES: dict[ApiErrors, str] = {
    ApiErrors.UNKNOWN_SERVER_ERROR:
        "The server experienced an unexpected error when processing the request.",
    ApiErrors.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ApiErrors.INVALID_TOPIC_EXCEPTION:
        "The request attempted to perform an operation on an invalid topic.",
    ApiErrors.TOPIC_ALREADY_EXISTS: "Topic with this name already exists.",
    ApiErrors.INVALID_PARTITIONS: "Number of partitions is below 1.",
    ApiErrors.INVALID_REPLICATION_FACTOR:
        "Replication factor is below 1 or larger than the number of available brokers.",
    ApiErrors.INVALID_REPLICA_ASSIGNMENT: "Replica assignment is invalid.",
    ApiErrors.INVALID_CONFIG: "Configuration is invalid.",
    ApiErrors.NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    ApiErrors.INVALID_REQUEST:
        "This most likely occurs because of a request being malformed by the client library "
        "or the message was sent to an incompatible broker. See the broker logs for more "
        "details.",
    ApiErrors.POLICY_VIOLATION: "Request parameters do not satisfy the configured policy.",
    ApiErrors.OPERATION_NOT_ATTEMPTED:
        "The broker did not attempt to execute this operation. This may happen for batched "
        "RPCs where some operations in the batch failed, causing the broker to respond "
        "without trying the rest.",
    ApiErrors.TOPIC_DELETION_DISABLED: "Topic deletion is disabled.",
    ApiErrors.FENCED_LEADER_EPOCH:
        "The leader epoch in the request is older than the epoch on the broker.",
    ApiErrors.STALE_BROKER_EPOCH: "Broker epoch has changed.",
    ApiErrors.PREFERRED_LEADER_NOT_AVAILABLE: "The preferred leader was not available.",
    ApiErrors.ELIGIBLE_LEADERS_NOT_AVAILABLE:
        "Eligible topic partition leaders are not available.",
    ApiErrors.ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
    ApiErrors.NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress.",
    ApiErrors.INVALID_UPDATE_VERSION: "The given update version was invalid.",
    ApiErrors.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    ApiErrors.BROKER_ID_NOT_REGISTERED: "The given broker ID was not registered.",
    ApiErrors.DUPLICATE_BROKER_REGISTRATION:
        "This broker ID is already in use.",
    ApiErrors.INCONSISTENT_CLUSTER_ID:
        "The clusterId in the request does not match that found on the server.",
    ApiErrors.INELIGIBLE_REPLICA: "The new ISR contains at least one ineligible replica.",
    ApiErrors.NEW_LEADER_ELECTED:
        "The AlterPartition request successfully updated the partition state but the leader "
        "has changed.",
}


class ControllerApiError(Exception):
    """A refusal with Kafka's error name and message. Raised when a whole request fails;
    also carried as a value in per-topic and per-partition results."""

    def __init__(self, error: ApiErrors, message: str | None = None) -> None:
        self.error = error
        self.message = message if message is not None else DEFAULT_MESSAGES.get(error, "")
        super().__init__(f"{error.name}: {self.message}")

    @property
    def error_name(self) -> str:
        return self.error.name

    @property
    def code(self) -> int:
        return int(self.error)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ControllerApiError)
            and (self.error, self.message) == (other.error, other.message)
        )

    def __hash__(self) -> int:
        return hash((self.error, self.message))

    def __repr__(self) -> str:
        return f"ControllerApiError({self.error.name}, {self.message!r})"


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    """What a rule produces: the records to append and the response to send once they commit.
    `atomic` (Kafka's atomicOf) asks for all records in one batch; otherwise the controller may
    split them across batches."""

    records: tuple[Record, ...]
    response: T
    atomic: bool = True


def check_user_op_size(records: list[Record]) -> None:
    """Kafka's BoundedList on user operations: refuse rather than write a huge batch."""
    if len(records) > MAX_RECORDS_PER_USER_OP:
        raise ControllerApiError(
            ApiErrors.POLICY_VIOLATION, "Unable to perform excessively large batch operation."
        )
