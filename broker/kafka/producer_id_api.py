"""InitProducerId (API 22, v0-4): a new producer id for idempotent producers (kafka-python's
default producer cannot start without it); with a transactional id, the transaction
coordinator's id and bumped epoch (broker/kafka/txn_api.py, broker/txn).

Authorization (Kafka): a transactional id needs WRITE on it
(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE on the
cluster or, since KIP-679, WRITE on any topic (CLUSTER_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from broker.api import DataPlane, ProducerIdAndEpoch
from broker.kafka.authorization import (
    ALLOW_ALL,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.txn_api import init_transactional_producer
from broker.kafka.versions import ApiKey
from broker.txn.storage import TxnStorage
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation, ResourceType

NO_PRODUCER_ID = -1


def refusal(auth: RequestAuthorization, transactional_id: str | None) -> int | None:
    """The error that refuses this InitProducerId, or None."""
    if transactional_id is not None:
        if auth.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id):
            return None
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    if auth.cluster(AclOperation.IDEMPOTENT_WRITE, log_if_denied=False) or \
            auth.any_topic_write():
        return None
    # Logged once here: Kafka logs neither probe, which leaves a refusal unexplained.
    auth.cluster(AclOperation.IDEMPOTENT_WRITE)
    return Errors.CLUSTER_AUTHORIZATION_FAILED


async def handle_init_producer_id(data_plane: DataPlane, version: int, request: Any,
                                  auth: RequestAuthorization = ALLOW_ALL,
                                  txns: TxnStorage | None = None) -> Reply:
    refused = refusal(auth, request.transactional_id)
    if refused is not None:
        result = ProducerIdAndEpoch(error=refused, producer_id=NO_PRODUCER_ID, producer_epoch=-1)
    elif request.transactional_id is not None:
        result = await init_transactional_producer(txns, version, request)
    else:
        result = await data_plane.init_producer_id(request.transactional_id)
    module = response_module(ApiKey.INIT_PRODUCER_ID, version)
    return Reply(build(
        module, "InitProducerIdResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(result.error), producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    ))
