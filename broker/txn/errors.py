"""The Kafka error codes of the transaction APIs (Errors.java), beside those in kraft.errors."""

from __future__ import annotations

from enum import IntEnum


class TxnError(IntEnum):
    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    UNKNOWN_TOPIC_OR_PARTITION = 3
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    UNSUPPORTED_VERSION = 35
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    PRODUCER_FENCED = 90


def for_client(error: TxnError, fenced_as_epoch: bool) -> TxnError:
    """Clients of the older versions (InitProducerId < 4, AddPartitionsToTxn and
    AddOffsetsToTxn and EndTxn < 2) know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    if fenced_as_epoch and error is TxnError.PRODUCER_FENCED:
        return TxnError.INVALID_PRODUCER_EPOCH
    return error
