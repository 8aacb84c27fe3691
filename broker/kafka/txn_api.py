"""The transaction coordinator's APIs (docs/transactions.md), on the coordinator in broker/txn:
InitProducerId (API 22) with a transactional id, AddPartitionsToTxn (24, v0-3: the client
path), AddOffsetsToTxn (25, v0-3) and EndTxn (26, v0-3). Clients of the older versions
(InitProducerId < 4, the others < 2) get INVALID_PRODUCER_EPOCH for PRODUCER_FENCED.

Authorization (Kafka): WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
for all four; AddPartitionsToTxn WRITE on each topic (TOPIC_AUTHORIZATION_FAILED for its
partitions; UNKNOWN_TOPIC_OR_PARTITION for a partition the metadata lacks; either fails the
whole set: OPERATION_NOT_ATTEMPTED on the others); AddOffsetsToTxn READ on the group
(GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

import datetime
from typing import Any

from broker.api import ProducerIdAndEpoch
from broker.group.placement import OFFSETS_TOPIC, partition_for
from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from broker.txn.errors import TxnError, for_client
from broker.txn.storage import TxnStorage
from metadata.authorizer.model import AclOperation, ResourceType
from metadata.image import MetadataImage

E = TxnError
FENCED_VERSION = {ApiKey.INIT_PRODUCER_ID: 4, ApiKey.ADD_PARTITIONS_TO_TXN: 2,
                  ApiKey.ADD_OFFSETS_TO_TXN: 2, ApiKey.END_TXN: 2}
DEFAULT_OFFSETS_PARTITIONS = 50


def _writes_id(auth: RequestAuthorization, transactional_id: str) -> bool:
    return auth.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id)


def _answer(api: ApiKey, version: int, error: TxnError) -> int:
    return int(for_client(error, version < FENCED_VERSION[api]))


async def init_transactional_producer(txns: TxnStorage | None, version: int,
                                      request: Any) -> ProducerIdAndEpoch:
    """InitProducerId with a transactional id (its WRITE already checked)."""
    if not request.transactional_id:
        return ProducerIdAndEpoch(E.INVALID_REQUEST,
                                  error_message="the transactional id must not be empty")
    if txns is None:
        return ProducerIdAndEpoch(E.COORDINATOR_NOT_AVAILABLE)
    timeout_ms = request.transaction_timeout // datetime.timedelta(milliseconds=1)
    result = await txns.coordinator.init_producer_id(
        request.transactional_id, timeout_ms, int(getattr(request, "producer_id", -1)),
        int(getattr(request, "producer_epoch", -1)))
    return ProducerIdAndEpoch(_answer(ApiKey.INIT_PRODUCER_ID, version, result.error),
                              producer_id=result.producer_id,
                              producer_epoch=result.producer_epoch)


async def handle_add_partitions_to_txn(txns: TxnStorage | None, image: MetadataImage,
                                       version: int, request: Any,
                                       auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    txn_id = request.v3_and_below_transactional_id
    asked = [(str(t.name), int(p)) for t in request.v3_and_below_topics for p in t.partitions]
    refusals: dict[tuple[str, int], int] = {}
    if not _writes_id(auth, txn_id):
        error: int = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        writable = {topic: auth.topic(AclOperation.WRITE, topic)
                    for topic in dict.fromkeys(topic for topic, _ in asked)}
        for topic, partition in asked:
            described = image.topic(topic)
            if not writable[topic]:
                refusals[(topic, partition)] = E.TOPIC_AUTHORIZATION_FAILED
            elif described is None or described.partition(partition) is None:
                refusals[(topic, partition)] = E.UNKNOWN_TOPIC_OR_PARTITION
        if refusals:
            error = E.OPERATION_NOT_ATTEMPTED
        elif not txn_id:
            error = E.INVALID_REQUEST
        elif txns is None:
            error = E.COORDINATOR_NOT_AVAILABLE
        else:
            error = _answer(ApiKey.ADD_PARTITIONS_TO_TXN, version, await txns.coordinator
                            .add_partitions(txn_id, int(request.v3_and_below_producer_id),
                                            int(request.v3_and_below_producer_epoch), asked))
    module = response_module(ApiKey.ADD_PARTITIONS_TO_TXN, version)
    by_topic: dict[str, list[Any]] = {}
    for tp in dict.fromkeys(asked):
        by_topic.setdefault(tp[0], []).append(build(
            module, "AddPartitionsToTxnPartitionResult", partition_index=tp[1],
            partition_error_code=error_code(refusals.get(tp, error))))
    return Reply(build(
        module, "AddPartitionsToTxnResponse", throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            build(module, "AddPartitionsToTxnTopicResult", name=topic,
                  results_by_partition=tuple(results))
            for topic, results in by_topic.items())))


async def handle_add_offsets_to_txn(txns: TxnStorage | None, offsets_partitions: int,
                                    version: int, request: Any,
                                    auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    """The group's `__consumer_offsets` partition joins the transaction (its TxnOffsetCommit
    then goes to the group coordinator)."""
    txn_id = request.transactional_id
    if not _writes_id(auth, txn_id):
        error: int = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not auth.group(AclOperation.READ, request.group_id):
        error = E.GROUP_AUTHORIZATION_FAILED
    elif not txn_id:
        error = E.INVALID_REQUEST
    elif txns is None:
        error = E.COORDINATOR_NOT_AVAILABLE
    else:
        offsets = (OFFSETS_TOPIC, partition_for(request.group_id, offsets_partitions))
        error = _answer(ApiKey.ADD_OFFSETS_TO_TXN, version, await txns.coordinator
                        .add_partitions(txn_id, int(request.producer_id),
                                        int(request.producer_epoch), [offsets]))
    module = response_module(ApiKey.ADD_OFFSETS_TO_TXN, version)
    return Reply(build(module, "AddOffsetsToTxnResponse", throttle_time=NO_THROTTLE,
                       error_code=error_code(error)))


async def handle_end_txn(txns: TxnStorage | None, version: int, request: Any,
                         auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    txn_id = request.transactional_id
    if not _writes_id(auth, txn_id):
        error: int = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not txn_id:
        error = E.INVALID_REQUEST
    elif txns is None:
        error = E.COORDINATOR_NOT_AVAILABLE
    else:
        error = _answer(ApiKey.END_TXN, version, await txns.coordinator.end_txn(
            txn_id, int(request.producer_id), int(request.producer_epoch),
            bool(request.committed)))
    module = response_module(ApiKey.END_TXN, version)
    return Reply(build(module, "EndTxnResponse", throttle_time=NO_THROTTLE,
                       error_code=error_code(error)))
