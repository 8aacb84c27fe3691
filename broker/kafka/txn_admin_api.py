"""The hanging-transaction APIs (docs/transactions.md#finding-and-aborting-hanging-transactions):
DescribeTransactions (65, v0) and ListTransactions (66, v0-1) from the transaction coordinator
(broker/txn/describe.py), DescribeProducers (61, v0) from a partition replica's producer state
(broker/txn/producers.py). DescribeTransactions' answer is written with
broker/kafka/legacy/describe_transactions_v0.py's schema: its start time is an int64 (-1 for
none), which kio's datetime cannot read back.

Authorization (Kafka's KafkaApis): DescribeTransactions DESCRIBE on each transactional id
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED for that id), and an open transaction's partitions only
of the topics the caller may DESCRIBE; ListTransactions lists only the ids the caller may
DESCRIBE (refusals not logged); DescribeProducers READ on each topic (TOPIC_AUTHORIZATION_FAILED
on its partitions), then UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata lacks."""

from __future__ import annotations

import datetime
from typing import Any

from broker.kafka.authorization import (
    ALLOW_ALL,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from broker.txn.describe import TxnDescription, TxnList, describe, list_transactions
from broker.txn.errors import TxnError
from broker.txn.producers import ActiveProducer, ProducerStates
from broker.txn.storage import TxnStorage
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation, ResourceType
from metadata.image import MetadataImage


def _describes_id(auth: RequestAuthorization, transactional_id: str, *,
                  log_if_denied: bool = True) -> bool:
    return auth.allows(AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, transactional_id,
                       log_if_denied=log_if_denied)


def handle_describe_transactions(txns: TxnStorage | None, version: int, request: Any,
                                 auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.DESCRIBE_TRANSACTIONS, version)
    states = []
    for txn_id in request.transactional_ids:
        if not _describes_id(auth, txn_id):
            found = TxnDescription(txn_id, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        elif txns is None:
            found = TxnDescription(txn_id, TxnError.COORDINATOR_NOT_AVAILABLE)
        else:
            found = describe(txns.coordinator, txn_id)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in found.partitions:
            by_topic.setdefault(topic, []).append(partition)
        visible = {topic: ids for topic, ids in by_topic.items()
                   if auth.topic(AclOperation.DESCRIBE, topic)}
        states.append(build(
            module, "TransactionState", error_code=error_code(found.error),
            transactional_id=txn_id, transaction_state=found.state,
            transaction_timeout=datetime.timedelta(milliseconds=found.timeout_ms),
            transaction_start_time_ms=found.start_ms, producer_id=found.producer_id,
            producer_epoch=found.producer_epoch,
            topics=tuple(build(module, "TopicData", topic=topic, partitions=tuple(ids))
                         for topic, ids in visible.items())))
    return Reply(build(module, "DescribeTransactionsResponse", throttle_time=NO_THROTTLE,
                       transaction_states=tuple(states)))


def handle_list_transactions(txns: TxnStorage | None, version: int, request: Any,
                             auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    """The ids this broker coordinates (a client asks every broker and merges the answers)."""
    module = response_module(ApiKey.LIST_TRANSACTIONS, version)
    if txns is None:
        listed = TxnList(TxnError.COORDINATOR_NOT_AVAILABLE)
    else:
        listed = list_transactions(txns.coordinator, request.state_filters,
                                   request.producer_id_filters,
                                   int(getattr(request, "duration_filter", -1)))
    return Reply(build(
        module, "ListTransactionsResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(listed.error), unknown_state_filters=listed.unknown_state_filters,
        transaction_states=tuple(
            build(module, "TransactionState", transactional_id=t.transactional_id,
                  producer_id=t.producer_id, transaction_state=t.state)
            for t in listed.listings
            if _describes_id(auth, t.transactional_id, log_if_denied=False))))


def handle_describe_producers(producers: ProducerStates | None, image: MetadataImage,
                              version: int, request: Any,
                              auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.DESCRIBE_PRODUCERS, version)
    topics = []
    for asked in request.topics:
        topic = image.topic(asked.name)
        refused: int | None = None
        if not auth.topic(AclOperation.READ, asked.name):
            refused = Errors.TOPIC_AUTHORIZATION_FAILED
        elif topic is None:
            refused = Errors.UNKNOWN_TOPIC_OR_PARTITION
        partitions = []
        for index in asked.partition_indexes:
            found: list[ActiveProducer] | int
            if refused is not None:
                found = refused
            elif topic is None or topic.partition(index) is None:
                found = Errors.UNKNOWN_TOPIC_OR_PARTITION
            elif producers is None:
                found = Errors.NOT_LEADER_OR_FOLLOWER
            else:
                found = producers.active_producers(asked.name, index)
            states = () if isinstance(found, int) else tuple(
                build(module, "ProducerState", producer_id=p.producer_id,
                      producer_epoch=p.producer_epoch, last_sequence=p.last_sequence,
                      last_timestamp=p.last_timestamp, coordinator_epoch=p.coordinator_epoch,
                      current_txn_start_offset=p.current_txn_start_offset)
                for p in found)
            partitions.append(build(
                module, "PartitionResponse", partition_index=index,
                error_code=error_code(found if isinstance(found, int) else 0),
                error_message=None, active_producers=states))
        topics.append(build(module, "TopicResponse", name=asked.name,
                            partitions=tuple(partitions)))
    return Reply(build(module, "DescribeProducersResponse", throttle_time=NO_THROTTLE,
                       topics=tuple(topics)))
