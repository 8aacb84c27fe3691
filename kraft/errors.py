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
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_BATCH_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    UNKNOWN_PRODUCER_ID = 59
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    INVALID_RECORD = 87
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INVALID_UPDATE_VERSION = 95
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127


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
    Errors.SECURITY_DISABLED: "Security features are disabled.",
    Errors.OPERATION_NOT_ATTEMPTED:
        "The broker did not attempt to execute this operation. This may happen for batched "
        "RPCs where some operations in the batch failed, causing the broker to respond "
        "without trying the rest.",
    Errors.OFFSET_OUT_OF_RANGE:
        "The requested offset is not within the range of offsets maintained by the server.",
    Errors.CORRUPT_MESSAGE:
        "This message has failed its CRC checksum, exceeds the valid size, has a null key for "
        "a compacted topic, or is otherwise corrupt.",
    Errors.LEADER_NOT_AVAILABLE:
        "There is no leader for this topic-partition as we are in the middle of a leadership "
        "election.",
    Errors.NOT_LEADER_OR_FOLLOWER: "For requests intended only for the leader, this error "
        "indicates that the broker is not the current leader. For requests intended for any "
        "replica, this error indicates that the broker is not a replica of the topic partition.",
    Errors.REQUEST_TIMED_OUT: "The request timed out.",
    Errors.MESSAGE_TOO_LARGE:
        "The request included a message larger than the max message size the server will "
        "accept.",
    Errors.RECORD_BATCH_TOO_LARGE:
        "The request included message batch larger than the configured segment size on the "
        "server.",
    Errors.NOT_ENOUGH_REPLICAS:
        "Messages are rejected since there are fewer in-sync replicas than required.",
    Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND:
        "Messages are written to the log, but to fewer in-sync replicas than required.",
    Errors.INVALID_REQUIRED_ACKS: "Produce request specified an invalid value for required acks.",
    Errors.INVALID_TIMESTAMP: "The timestamp of the message is out of acceptable range.",
    Errors.UNSUPPORTED_VERSION: "The version of API is not supported.",
    Errors.OUT_OF_ORDER_SEQUENCE_NUMBER: "The broker received an out of order sequence number.",
    Errors.INVALID_PRODUCER_EPOCH:
        "Producer attempted to produce with an old epoch.",
    Errors.UNKNOWN_LEADER_EPOCH: "The leader epoch in the request is newer than the epoch on "
        "the broker.",
    Errors.LISTENER_NOT_FOUND: "There is no listener on the leader broker that matches the "
        "listener on which metadata request was processed.",
    Errors.UNSUPPORTED_COMPRESSION_TYPE:
        "The requesting client does not support the compression type of given partition.",
    Errors.OFFSET_NOT_AVAILABLE: "The leader high watermark has not caught up from a recent "
        "leader election so the offsets cannot be guaranteed to be monotonically increasing.",
    Errors.INVALID_RECORD: "This record has failed the validation on broker and hence will be "
        "rejected.",
    Errors.INCONSISTENT_TOPIC_ID: "The log's topic ID did not match the topic ID in the request.",
    Errors.KAFKA_STORAGE_ERROR: "Disk error when trying to access log file on the disk.",
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
    Errors.UNSUPPORTED_SASL_MECHANISM:
        "The broker does not support the requested SASL mechanism.",
    Errors.RESOURCE_NOT_FOUND:
        "A request illegally referred to a resource that does not exist.",
    Errors.DUPLICATE_RESOURCE: "A request illegally referred to the same resource twice.",
    Errors.UNACCEPTABLE_CREDENTIAL:
        "Requested credential would not meet criteria for acceptability.",
    Errors.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
    Errors.BROKER_ID_NOT_REGISTERED: "The given broker ID was not registered.",
    Errors.DUPLICATE_BROKER_REGISTRATION: "This broker ID is already in use.",
    Errors.INCONSISTENT_CLUSTER_ID:
        "The clusterId in the request does not match that found on the server.",
    Errors.INELIGIBLE_REPLICA: "The new ISR contains at least one ineligible replica.",
    Errors.NEW_LEADER_ELECTED:
        "The AlterPartition request successfully updated the partition state but the leader "
        "has changed.",
    Errors.MISMATCHED_ENDPOINT_TYPE: "The request was sent to an endpoint of the wrong type.",
    Errors.UNSUPPORTED_ENDPOINT_TYPE: "This endpoint type is not supported yet.",
    Errors.INVALID_VOTER_KEY: "The voter key doesn't match the receiving replica's key.",
    Errors.DUPLICATE_VOTER: "The voter is already part of the set of voters.",
    Errors.VOTER_NOT_FOUND: "The voter is not part of the set of voters.",
})


def error_name(code: int) -> str:
    """Kafka's name for an error code, or `ERROR_<code>` for one outside the table."""
    try:
        return Errors(code).name
    except ValueError:
        return f"ERROR_{code}"
