"""FindCoordinator (API 10, v0-4): the broker leading the group's `__consumer_offsets`
partition (spec §2.1), or for key type 1 the transactional id's `__transaction_state`
partition (docs/transactions.md). No topic yet: ask the controller to create it and answer
COORDINATOR_NOT_AVAILABLE, as Kafka does; the client asks again. Share groups' key type 2 is
INVALID_REQUEST.

Authorization (Kafka): DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or, for key type 1,
on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), per key from v4."""

from __future__ import annotations

from typing import Any

from broker.group.errors import GroupError
from broker.group.placement import OFFSETS_TOPIC, partition_for
from broker.group.storage import GroupStorage
from broker.kafka.authorization import (
    ALLOW_ALL,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.metadata_api import live_endpoint
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from broker.txn.storage import TXN_TOPIC, TxnStorage
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation, ResourceType
from metadata.image import MetadataImage

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1
_NOT_FOUND = (-1, "", -1)


def find(groups: GroupStorage | None, image: MetadataImage, listener: str, key: str,
         key_type: int, auth: RequestAuthorization = ALLOW_ALL,
         txns: TxnStorage | None = None) -> tuple[int, str | None, tuple[int, str, int]]:
    """(error, message, (node id, host, port)) for one key."""
    if key_type == GROUP_KEY_TYPE and not auth.group(AclOperation.DESCRIBE, key):
        return Errors.GROUP_AUTHORIZATION_FAILED, None, _NOT_FOUND
    if key_type == TRANSACTION_KEY_TYPE and not auth.allows(
            AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, key):
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None, _NOT_FOUND
    if key_type == TRANSACTION_KEY_TYPE:
        if not key:
            return GroupError.INVALID_REQUEST, "the transactional id is empty", _NOT_FOUND
        storage: GroupStorage | TxnStorage | None = txns
        topic_name = TXN_TOPIC
    elif key_type == GROUP_KEY_TYPE:
        storage, topic_name = groups, OFFSETS_TOPIC
    else:
        return (GroupError.INVALID_REQUEST,
                f"key type {key_type} is not supported: this broker coordinates consumer "
                "groups (key type 0) and transactions (1)", _NOT_FOUND)
    if storage is None:
        return GroupError.COORDINATOR_NOT_AVAILABLE, None, _NOT_FOUND
    topic = image.topic(topic_name)
    if topic is None:
        storage.ensure_topic()
        return (GroupError.COORDINATOR_NOT_AVAILABLE,
                f"{topic_name} is being created", _NOT_FOUND)
    registration = topic.partition(partition_for(key, len(topic.partitions)))
    endpoint = None if registration is None else \
        live_endpoint(image, registration.leader, listener)
    if registration is None or endpoint is None:
        return GroupError.COORDINATOR_NOT_AVAILABLE, None, _NOT_FOUND
    return GroupError.NONE, None, (registration.leader, endpoint.host, endpoint.port)


def handle_find_coordinator(groups: GroupStorage | None, image: MetadataImage, listener: str,
                            version: int, request: Any,
                            auth: RequestAuthorization = ALLOW_ALL,
                            txns: TxnStorage | None = None) -> Reply:
    module = response_module(ApiKey.FIND_COORDINATOR, version)
    key_type = getattr(request, "key_type", GROUP_KEY_TYPE)
    if version >= 4:
        coordinators = []
        for key in request.coordinator_keys:
            error, message, (node, host, port) = find(groups, image, listener, key, key_type,
                                                      auth, txns)
            coordinators.append(build(
                module, "Coordinator", key=key, node_id=node, host=host, port=port,
                error_code=error_code(error), error_message=message))
        return Reply(build(module, "FindCoordinatorResponse", throttle_time=NO_THROTTLE,
                           coordinators=tuple(coordinators)))
    error, message, (node, host, port) = find(groups, image, listener, request.key, key_type,
                                              auth, txns)
    return Reply(build(
        module, "FindCoordinatorResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(error), error_message=message, node_id=node, host=host,
        port=port))
