"""OffsetCommit (API 8, v0-9) and OffsetFetch (API 9, v0-9, batched groups from v8), spec §4.
Partitions of topics the metadata does not know are UNKNOWN_TOPIC_OR_PARTITION before the
coordinator sees the commit, as Kafka's broker pre-check does.

v0 of both were ZooKeeper's in Kafka (3.9 in KRaft mode answers them UNSUPPORTED_VERSION);
with no ZooKeeper here they use the coordinator like v1+: a v0 commit is a simple commit
(no generation, no member: accepted while the group has no members), so a v0 client and a
lag monitor on any version read the same offsets. v1's per-partition commit timestamp is
stored as the commit's time (-1: now), as Kafka 3.9 stored it.

OffsetFetch v7+ with `require_stable` answers UNSTABLE_OFFSET_COMMIT (offset -1) for a partition
whose offset a group's open transaction holds (TxnOffsetCommit, not yet decided), as Kafka.

Authorization (Kafka): OffsetCommit needs READ on the group (else GROUP_AUTHORIZATION_FAILED on
every partition, nothing written) and READ on each topic (TOPIC_AUTHORIZATION_FAILED on its
partitions); OffsetFetch needs DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED for it) and on
each topic: a named one is refused per partition, and a fetch of all leaves out the others."""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from broker.group.errors import GroupError
from broker.group.offsets import CommitPartition, FetchedOffset, commit_offsets, fetch_offsets
from broker.group.records import NO_EXPIRY
from broker.group.storage import GroupStorage
from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply, millis
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation
from metadata.image import MetadataImage

GROUP_ID_NOT_FOUND_VERSION = 9
UNSTABLE_OFFSET_COMMIT = 88  # Errors.java
BATCHED_FETCH_VERSION = 8


def _known(image: MetadataImage, topic: str, partition: int) -> bool:
    topic_image = image.topic(topic)
    return topic_image is not None and topic_image.partition(partition) is not None


def _commit_check(auth: RequestAuthorization, image: MetadataImage, group_id: str,
                  asked: list[tuple[str, Any]]) -> list[int | None]:
    """Each partition's refusal (None: to the coordinator)."""
    if not auth.group(AclOperation.READ, group_id):
        return [Errors.GROUP_AUTHORIZATION_FAILED] * len(asked)
    readable = {topic: auth.topic(AclOperation.READ, topic) for topic in
                dict.fromkeys(topic for topic, _ in asked)}
    return [Errors.TOPIC_AUTHORIZATION_FAILED if not readable[topic]
            else None if _known(image, topic, p.partition_index)
            else GroupError.UNKNOWN_TOPIC_OR_PARTITION
            for topic, p in asked]


async def handle_offset_commit(groups: GroupStorage | None, image: MetadataImage,
                               version: int, request: Any,
                               auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    asked = [(t.name, p) for t in request.topics for p in t.partitions]
    results = _commit_check(auth, image, request.group_id, asked)
    valid = [CommitPartition(topic, p.partition_index, p.committed_offset,
                             getattr(p, "committed_leader_epoch", -1), p.committed_metadata,
                             getattr(p, "commit_timestamp", -1))
             for (topic, p), known in zip(asked, results, strict=True) if known is None]
    if valid:
        expire = NO_EXPIRY
        retention = getattr(request, "retention_time", None)
        if retention is not None and millis(retention) != -1:
            expire = int(time.time() * 1000) + millis(retention)  # v2-4 RetentionTimeMs
        if groups is None:
            written: Iterable[int] = [GroupError.COORDINATOR_NOT_AVAILABLE] * len(valid)
        else:
            written = await commit_offsets(
                groups.coordinator, request.group_id,
                getattr(request, "generation_id_or_member_epoch", -1),  # v0: none
                getattr(request, "member_id", ""), getattr(request, "group_instance_id", None),
                valid,
                expire_timestamp=expire,
                group_id_not_found=version >= GROUP_ID_NOT_FOUND_VERSION)
        answers = iter(written)
        results = [r if r is not None else next(answers) for r in results]
    module = response_module(ApiKey.OFFSET_COMMIT, version)
    by_topic: dict[str, list[Any]] = {}
    for (topic, p), result in zip(asked, results, strict=True):
        by_topic.setdefault(topic, []).append(build(
            module, "OffsetCommitResponsePartition", partition_index=p.partition_index,
            error_code=error_code(result if result is not None else GroupError.NONE)))
    return Reply(build(module, "OffsetCommitResponse", throttle_time=NO_THROTTLE, topics=tuple(
        build(module, "OffsetCommitResponseTopic", name=name, partitions=tuple(parts))
        for name, parts in by_topic.items())))


def _fetch(groups: GroupStorage | None, group_id: str | None, topics: Any,
           auth: RequestAuthorization, member: tuple[str | None, int] = (None, -1),
           require_stable: bool = False) -> tuple[int, list[FetchedOffset]]:
    error, offsets = _fetch_committed(groups, group_id, topics, auth, member)
    if require_stable and groups is not None and group_id and offsets:
        # KIP-447: an offset of an open transaction is not answered until it is decided
        # (broker/group/txn_offsets.py); the consumer asks again.
        pending = groups.txn_offsets.pending_partitions(group_id)
        offsets = [replace(o, offset=-1, leader_epoch=-1, metadata="",
                           error=UNSTABLE_OFFSET_COMMIT)
                   if (o.topic, o.partition) in pending and o.error == 0 else o
                   for o in offsets]
    return error, offsets


def _fetch_committed(groups: GroupStorage | None, group_id: str | None, topics: Any,
                     auth: RequestAuthorization, member: tuple[str | None, int]
                     ) -> tuple[int, list[FetchedOffset]]:
    if not auth.group(AclOperation.DESCRIBE, group_id or ""):
        return Errors.GROUP_AUTHORIZATION_FAILED, []
    if groups is None:
        return GroupError.COORDINATOR_NOT_AVAILABLE, []
    if topics is None:  # every committed offset, of the topics the caller may see
        error, offsets = fetch_offsets(groups.coordinator, group_id, None, member)
        seen = {topic: auth.topic(AclOperation.DESCRIBE, topic, log_if_denied=False)
                for topic in dict.fromkeys(o.topic for o in offsets)}
        return error, [o for o in offsets if seen[o.topic]]
    describable = {t.name: auth.topic(AclOperation.DESCRIBE, t.name) for t in topics}
    partitions = [(t.name, index) for t in topics for index in t.partition_indexes
                  if describable[t.name]]
    refused = [FetchedOffset(t.name, index, error=Errors.TOPIC_AUTHORIZATION_FAILED)
               for t in topics for index in t.partition_indexes if not describable[t.name]]
    error, offsets = fetch_offsets(groups.coordinator, group_id, partitions, member)
    return error, (offsets + refused if error == GroupError.NONE else [])


def _topics(module: Any, topic_class: str, partition_class: str,
            offsets: list[FetchedOffset]) -> tuple[Any, ...]:
    by_topic: dict[str, list[Any]] = {}
    for o in offsets:
        by_topic.setdefault(o.topic, []).append(build(
            module, partition_class, partition_index=o.partition, committed_offset=o.offset,
            committed_leader_epoch=o.leader_epoch, metadata=o.metadata,
            error_code=error_code(o.error)))
    return tuple(build(module, topic_class, name=name, partitions=tuple(parts))
                 for name, parts in by_topic.items())


def handle_offset_fetch(groups: GroupStorage | None, version: int, request: Any,
                        auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    module = response_module(ApiKey.OFFSET_FETCH, version)
    if version >= BATCHED_FETCH_VERSION:
        answers = []
        for group in request.groups:
            member = (getattr(group, "member_id", None), getattr(group, "member_epoch", -1))
            error, offsets = _fetch(groups, group.group_id, group.topics, auth, member,
                                    bool(getattr(request, "require_stable", False)))
            answers.append(build(
                module, "OffsetFetchResponseGroup", group_id=group.group_id,
                error_code=error_code(error),
                topics=_topics(module, "OffsetFetchResponseTopics",
                               "OffsetFetchResponsePartitions", offsets)))
        return Reply(build(module, "OffsetFetchResponse", throttle_time=NO_THROTTLE,
                           groups=tuple(answers)))
    error, offsets = _fetch(groups, request.group_id, request.topics, auth,
                            require_stable=bool(getattr(request, "require_stable", False)))
    if version < 2 and error != GroupError.NONE:
        # v1 has no group-level error: every partition asked carries it.
        offsets = [FetchedOffset(t.name, index, error=error)
                   for t in request.topics or () for index in t.partition_indexes]
    return Reply(build(
        module, "OffsetFetchResponse", throttle_time=NO_THROTTLE, error_code=error_code(error),
        topics=_topics(module, "OffsetFetchResponseTopic", "OffsetFetchResponsePartition",
                       offsets)))
