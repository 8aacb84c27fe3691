"""TxnOffsetCommit (API 28, v0-3): a transactional producer's offsets for a group, written to
the group's `__consumer_offsets` partition inside its transaction and visible only once the
transaction commits (broker/group/txn_offsets.py). v3 carries the consumer's generation,
member id and instance id (KIP-447), checked as OffsetCommit checks them.

Authorization (Kafka): WRITE on the transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED on
every partition), READ on the group (GROUP_AUTHORIZATION_FAILED on every partition), READ on
each topic (TOPIC_AUTHORIZATION_FAILED on its partitions); partitions the metadata does not
know are UNKNOWN_TOPIC_OR_PARTITION."""

from __future__ import annotations

from typing import Any

from broker.group.errors import GroupError
from broker.group.offsets import CommitPartition
from broker.group.storage import GroupStorage
from broker.kafka.authorization import (
    ALLOW_ALL,
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation, ResourceType
from metadata.image import MetadataImage


def _refusals(auth: RequestAuthorization, image: MetadataImage, request: Any,
              asked: list[tuple[str, Any]]) -> list[int | None]:
    if not auth.allows(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
                       request.transactional_id):
        return [TRANSACTIONAL_ID_AUTHORIZATION_FAILED] * len(asked)
    if not auth.group(AclOperation.READ, request.group_id):
        return [Errors.GROUP_AUTHORIZATION_FAILED] * len(asked)
    readable = {topic: auth.topic(AclOperation.READ, topic)
                for topic in dict.fromkeys(topic for topic, _ in asked)}
    out: list[int | None] = []
    for topic, p in asked:
        topic_image = image.topic(topic)
        if not readable[topic]:
            out.append(Errors.TOPIC_AUTHORIZATION_FAILED)
        elif topic_image is None or topic_image.partition(p.partition_index) is None:
            out.append(Errors.UNKNOWN_TOPIC_OR_PARTITION)
        else:
            out.append(None)
    return out


async def handle_txn_offset_commit(groups: GroupStorage | None, image: MetadataImage,
                                   version: int, request: Any,
                                   auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    asked = [(str(t.name), p) for t in request.topics for p in t.partitions]
    results = _refusals(auth, image, request, asked)
    todo = [i for i, refusal in enumerate(results) if refusal is None]
    if todo and groups is None:
        for i in todo:
            results[i] = GroupError.COORDINATOR_NOT_AVAILABLE
    elif todo and groups is not None:
        partitions = [CommitPartition(
            asked[i][0], int(asked[i][1].partition_index), int(asked[i][1].committed_offset),
            int(getattr(asked[i][1], "committed_leader_epoch", -1)),
            asked[i][1].committed_metadata) for i in todo]
        codes = await groups.txn_offsets.commit(
            request.group_id, int(request.producer_id), int(request.producer_epoch),
            int(getattr(request, "generation_id", -1)), str(getattr(request, "member_id", "")),
            getattr(request, "group_instance_id", None), partitions)
        for i, code in zip(todo, codes, strict=True):
            results[i] = code
    module = response_module(ApiKey.TXN_OFFSET_COMMIT, version)
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), refusal in zip(asked, results, strict=True):
        by_topic.setdefault(topic, []).append(build(
            module, "TxnOffsetCommitResponsePartition", partition_index=p.partition_index,
            error_code=error_code(int(refusal or 0))))
    return Reply(build(
        module, "TxnOffsetCommitResponse", throttle_time=NO_THROTTLE,
        topics=tuple(build(module, "TxnOffsetCommitResponseTopic", name=topic,
                           partitions=tuple(parts)) for topic, parts in by_topic.items())))
