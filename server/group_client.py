"""The Kafka-protocol client behind `kraft-admin groups`: what kafka-consumer-groups.sh asks
through Kafka's AdminClient, asked with the broker's own KafkaClient (broker/kafka/client.py)
so the tool works against any broker's Kafka listener, and against Kafka's too.

A group is described as Kafka's AdminClient does: ConsumerGroupDescribe (KIP-848) first, and
DescribeGroups when the group is not a consumer-protocol one (GROUP_ID_NOT_FOUND) or the broker
predates the API. Metadata from the bootstrap servers; a group's requests go to its coordinator
(FindCoordinator,
asked again on NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE
until a deadline); log end offsets (ListOffsets latest: the high watermark, Kafka's
READ_UNCOMMITTED) from each partition's leader, one request per leader, concurrently.
Every failure is a GroupCommandError, one line for the user."""

from __future__ import annotations

import asyncio
import ssl
import struct
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import ListOffsetsPartition
from broker.kafka.client import KafkaClient, KafkaClientError
from broker.kafka.codec import build, request_module
from broker.kafka.sasl.client import SaslClient
from broker.kafka.versions import ApiKey
from kraft.errors import Errors

TopicPartition = tuple[str, int]
RETRY_FOR_S = 15.0
EARLIEST, LATEST = -2, -1  # ListOffsets' special timestamps
# COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR: look it up again
_RETRIABLE = frozenset({14, 15, 16})
# ConsumerGroupDescribe's answers that send the AdminClient to DescribeGroups: a classic (or no)
# group, a broker without the API.
_NOT_A_CONSUMER_GROUP = frozenset({69, 35})  # GROUP_ID_NOT_FOUND, UNSUPPORTED_VERSION


class GroupCommandError(Exception):
    """A one-line failure for the user."""


def error_text(code: int) -> str:
    """Kafka's error name: NON_EMPTY_GROUP, GROUP_SUBSCRIBED_TO_TOPIC, ..."""
    try:
        return Errors(code).name
    except ValueError:
        pass
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"ERROR_{code}"


@dataclass(frozen=True)
class Member:
    member_id: str
    instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]
    # A consumer-protocol member's epoch and the partitions the coordinator's target gives it.
    member_epoch: int | None = None
    target_assignment: tuple[TopicPartition, ...] | None = None


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str  # a classic group's protocol; a consumer group's assignor
    members: tuple[Member, ...]
    coordinator: tuple[int, str, int]  # node id, host, port
    group_type: str = "classic"  # "consumer": described by ConsumerGroupDescribe
    group_epoch: int | None = None
    assignment_epoch: int | None = None  # the target assignment's epoch


@dataclass(frozen=True)
class ListedGroup:
    group_id: str
    state: str
    protocol_type: str
    group_type: str  # "classic", "consumer" (ListGroups v5); "" from an older broker


@dataclass
class Cluster:
    brokers: dict[int, tuple[str, int]] = field(default_factory=dict)
    leaders: dict[TopicPartition, int] = field(default_factory=dict)
    topics: dict[str, list[int]] = field(default_factory=dict)  # name -> partitions
    missing: set[str] = field(default_factory=set)  # asked for, not known


def decode_assignment(data: bytes) -> tuple[TopicPartition, ...]:
    """A ConsumerProtocol assignment (int16 version, [topic, [int32 partition]], user data);
    () for an empty or foreign one."""
    try:
        count = struct.unpack_from(">i", data, 2)[0]
        pos, out = 6, []
        for _ in range(max(count, 0)):
            size = struct.unpack_from(">h", data, pos)[0]
            topic = data[pos + 2:pos + 2 + size].decode()
            pos += 2 + size
            partitions = struct.unpack_from(">i", data, pos)[0]
            pos += 4
            for _ in range(max(partitions, 0)):
                out.append((topic, struct.unpack_from(">i", data, pos)[0]))
                pos += 4
        return tuple(out)
    except (struct.error, UnicodeDecodeError):
        return ()


class GroupAdmin:
    """One tool run's connections (by address), closed by `close()`."""

    def __init__(self, bootstrap: Sequence[str], ssl_context: ssl.SSLContext | None = None,
                 retry_for_s: float = RETRY_FOR_S,
                 sasl: Callable[[], SaslClient] | None = None) -> None:
        self.bootstrap = list(bootstrap)
        self.ssl_context = ssl_context
        self.sasl = sasl  # a SASL login on every connection (KafkaClient's)
        self.retry_for_s = retry_for_s
        self._clients: dict[tuple[str, int], KafkaClient] = {}
        self.cluster = Cluster()

    async def close(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)

    async def _client(self, host: str, port: int) -> KafkaClient:
        client = self._clients.get((host, port))
        if client is not None and client.connected:
            return client
        client = KafkaClient(host, port, self.ssl_context, client_id="kraft-admin-groups",
                             request_timeout_s=self.retry_for_s, sasl=self.sasl)
        await client.connect()
        self._clients[(host, port)] = client
        return client

    async def _any(self) -> KafkaClient:
        errors = []
        for server in self.bootstrap:
            host, _, port = server.rpartition(":")
            try:
                return await self._client(host.strip("[]"), int(port))
            except KafkaClientError as exc:
                if exc.authentication:  # the next broker would refuse the same login
                    raise GroupCommandError(str(exc)) from None
                errors.append(str(exc))
        raise GroupCommandError(f"no bootstrap server answered: {'; '.join(errors)}")

    async def _node(self, node_id: int) -> KafkaClient:
        if node_id not in self.cluster.brokers:
            await self.metadata(None)
        host, port = self.cluster.brokers.get(node_id, ("", 0))
        if not host:
            raise GroupCommandError(f"broker {node_id} is not in the metadata")
        try:
            return await self._client(host, port)
        except KafkaClientError as exc:
            raise GroupCommandError(str(exc)) from exc

    async def _call(self, client: KafkaClient, api: ApiKey, newest: int, name: str,
                    **fields: Any) -> Any:
        try:
            version = client.version(api, newest)
            return await client.request(build(request_module(api, version), name, **fields))
        except KafkaClientError as exc:
            raise GroupCommandError(str(exc)) from exc

    def _module(self, client: KafkaClient, api: ApiKey, newest: int) -> Any:
        return request_module(api, client.version(api, newest))

    # ---- metadata ---------------------------------------------------------------------------

    async def metadata(self, topics: Iterable[str] | None) -> Cluster:
        """Brokers, and the partitions and leaders of `topics` (None: every topic)."""
        client = await self._any()
        module = self._module(client, ApiKey.METADATA, 12)
        asked = None if topics is None else tuple(
            build(module, "MetadataRequestTopic", topic_id=None, name=t) for t in topics)
        answer = await self._call(client, ApiKey.METADATA, 12, "MetadataRequest", topics=asked,
                                  allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
        cluster = self.cluster
        cluster.brokers.update({int(b.node_id): (b.host, int(b.port)) for b in answer.brokers})
        for topic in answer.topics:
            if int(topic.error_code) != 0 or topic.name is None:
                if topic.name is not None:
                    cluster.missing.add(topic.name)
                continue
            cluster.topics[topic.name] = sorted(int(p.partition_index) for p in topic.partitions)
            for p in topic.partitions:
                cluster.leaders[(topic.name, int(p.partition_index))] = int(p.leader_id)
        return cluster

    # ---- the coordinator --------------------------------------------------------------------

    async def coordinator(self, group_id: str) -> tuple[int, str, int]:
        async def find() -> tuple[int, str, int]:
            client = await self._any()
            answer = await self._call(client, ApiKey.FIND_COORDINATOR, 3,
                                      "FindCoordinatorRequest", key=group_id, key_type=0)
            code = int(answer.error_code)
            if code:
                raise _Retry(code, getattr(answer, "error_message", None) or "")
            self.cluster.brokers[int(answer.node_id)] = (answer.host, int(answer.port))
            return int(answer.node_id), answer.host, int(answer.port)
        return await self._retrying(find)

    async def _retrying(self, attempt: Any) -> Any:
        deadline = time.monotonic() + self.retry_for_s
        delay = 0.05
        while True:
            try:
                return await attempt()
            except _Retry as exc:
                if exc.code not in _RETRIABLE or time.monotonic() + delay > deadline:
                    message = f": {exc.message}" if exc.message else ""
                    raise GroupCommandError(f"{error_text(exc.code)}{message}") from None
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _at_coordinator(self, group_id: str, api: ApiKey, newest: int, name: str,
                              error_of: Any, /, **fields: Any) -> Any:
        """A request to the group's coordinator, sent again (after a new lookup) while the
        answer's `error_of(answer)` is a coordinator error."""
        async def attempt() -> Any:
            _, host, port = await self.coordinator(group_id)
            try:
                client = await self._client(host, port)
            except KafkaClientError as exc:
                raise GroupCommandError(str(exc)) from exc
            answer = await self._call(client, api, newest, name, **fields)
            code = int(error_of(answer))
            if code in _RETRIABLE:
                raise _Retry(code, "")
            return answer
        return await self._retrying(attempt)

    # ---- the group APIs ---------------------------------------------------------------------

    async def list_groups(self) -> list[ListedGroup]:
        """Every group on every broker (each broker lists the groups it coordinates, as Kafka's
        AdminClient asks them all)."""
        cluster = await self.metadata(())
        answers = await asyncio.gather(*(self._list_at(node) for node in sorted(cluster.brokers)))
        groups = {g.group_id: g for answer in answers for g in answer}
        return [groups[name] for name in sorted(groups)]

    async def _list_at(self, node_id: int) -> list[ListedGroup]:
        client = await self._node(node_id)
        answer = await self._call(client, ApiKey.LIST_GROUPS, 5, "ListGroupsRequest",
                                  states_filter=(), types_filter=())
        if int(answer.error_code):
            raise GroupCommandError(f"broker {node_id}: {error_text(int(answer.error_code))}")
        return [ListedGroup(g.group_id, getattr(g, "group_state", ""), g.protocol_type,
                            getattr(g, "group_type", "")) for g in answer.groups]

    async def describe(self, group_id: str) -> GroupDescription:
        consumer_group = await self._describe_consumer_group(group_id)
        if consumer_group is not None:
            return consumer_group
        answer = await self._at_coordinator(
            group_id, ApiKey.DESCRIBE_GROUPS, 5, "DescribeGroupsRequest",
            lambda a: a.groups[0].error_code, groups=(group_id,),
            include_authorized_operations=False)
        (group,) = answer.groups
        if int(group.error_code):
            raise GroupCommandError(f"{group_id}: {error_text(int(group.error_code))}")
        consumer = group.protocol_type == "consumer"
        members = tuple(
            Member(m.member_id, getattr(m, "group_instance_id", None), m.client_id,
                   m.client_host, decode_assignment(m.member_assignment) if consumer else ())
            for m in group.members)
        return GroupDescription(group_id, group.group_state, group.protocol_type,
                                group.protocol_data, members, await self.coordinator(group_id))

    async def _describe_consumer_group(self, group_id: str) -> GroupDescription | None:
        """The group as ConsumerGroupDescribe (API 69) gives it; None when it is not a
        consumer-protocol group or the coordinator does not serve the API."""
        node_id, _, _ = await self.coordinator(group_id)
        try:
            (await self._node(node_id)).version(ApiKey.CONSUMER_GROUP_DESCRIBE, 1)
        except KafkaClientError:
            return None  # a broker before KIP-848
        answer = await self._at_coordinator(
            group_id, ApiKey.CONSUMER_GROUP_DESCRIBE, 1, "ConsumerGroupDescribeRequest",
            lambda a: a.groups[0].error_code, group_ids=(group_id,),
            include_authorized_operations=False)
        (group,) = answer.groups
        code = int(group.error_code)
        if code in _NOT_A_CONSUMER_GROUP:
            return None
        if code:
            raise GroupCommandError(f"{group_id}: {error_text(code)}")
        members = tuple(
            Member(m.member_id, m.instance_id, m.client_id, m.client_host,
                   _topic_partitions(m.assignment), int(m.member_epoch),
                   _topic_partitions(m.target_assignment)) for m in group.members)
        return GroupDescription(group_id, group.group_state, "consumer", group.assignor_name,
                                members, await self.coordinator(group_id), "consumer",
                                int(group.group_epoch), int(group.assignment_epoch))

    async def committed(self, group_id: str) -> dict[TopicPartition, int]:
        answer = await self._at_coordinator(
            group_id, ApiKey.OFFSET_FETCH, 7, "OffsetFetchRequest", lambda a: a.error_code,
            group_id=group_id, topics=None, require_stable=False)
        if int(answer.error_code):
            raise GroupCommandError(f"{group_id}: {error_text(int(answer.error_code))}")
        return {(t.name, int(p.partition_index)): int(p.committed_offset)
                for t in answer.topics for p in t.partitions
                if int(p.error_code) == 0 and int(p.committed_offset) >= 0}

    async def list_offsets(self, partitions: Iterable[TopicPartition],
                           timestamp: int) -> dict[TopicPartition, int]:
        """Each partition's offset for `timestamp` (LATEST: the high watermark; EARLIEST: the
        log start; else the first offset at or after it, -1 if none) from its leader."""
        wanted = sorted(set(partitions))
        unknown = [tp for tp in wanted if tp not in self.cluster.leaders]
        if unknown:
            await self.metadata(sorted({t for t, _ in unknown}))
        by_leader: dict[int, list[TopicPartition]] = {}
        for tp in wanted:
            leader = self.cluster.leaders.get(tp, -1)
            if leader >= 0:
                by_leader.setdefault(leader, []).append(tp)

        async def ask(leader: int, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
            client = await self._node(leader)
            try:
                results = await client.list_offsets(
                    -1, [ListOffsetsPartition(t, p, timestamp) for t, p in tps])
            except KafkaClientError as exc:
                raise GroupCommandError(str(exc)) from exc
            return {tp: r.offset for tp, r in zip(tps, results, strict=True) if r.error == 0}

        found: dict[TopicPartition, int] = {}
        for answer in await asyncio.gather(*(ask(n, tps) for n, tps in by_leader.items())):
            found.update(answer)
        return found

    async def commit(self, group_id: str,
                     offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        """A simple commit (generation -1, no member: an admin's), one error per partition."""
        node_id, _, _ = await self.coordinator(group_id)
        client = await self._node(node_id)
        module = self._module(client, ApiKey.OFFSET_COMMIT, 8)
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            by_topic.setdefault(topic, []).append(build(
                module, "OffsetCommitRequestPartition", partition_index=partition,
                committed_offset=offset, committed_leader_epoch=-1, committed_metadata="",
                commit_timestamp=-1))
        answer = await self._at_coordinator(
            group_id, ApiKey.OFFSET_COMMIT, 8, "OffsetCommitRequest",
            lambda a: next((p.error_code for t in a.topics for p in t.partitions
                            if int(p.error_code) in _RETRIABLE), 0),
            group_id=group_id, generation_id_or_member_epoch=-1, member_id="",
            group_instance_id=None, retention_time_ms=-1, topics=tuple(
                build(module, "OffsetCommitRequestTopic", name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()))
        return {(t.name, int(p.partition_index)): int(p.error_code)
                for t in answer.topics for p in t.partitions}

    async def delete_group(self, group_id: str) -> int:
        answer = await self._at_coordinator(
            group_id, ApiKey.DELETE_GROUPS, 2, "DeleteGroupsRequest",
            lambda a: a.results[0].error_code, groups_names=(group_id,))
        return int(answer.results[0].error_code)

    async def delete_offsets(self, group_id: str, partitions: Sequence[TopicPartition]
                             ) -> tuple[int, dict[TopicPartition, int]]:
        node_id, _, _ = await self.coordinator(group_id)
        module = self._module(await self._node(node_id), ApiKey.OFFSET_DELETE, 0)
        by_topic: dict[str, list[Any]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(
                build(module, "OffsetDeleteRequestPartition", partition_index=partition))
        answer = await self._at_coordinator(
            group_id, ApiKey.OFFSET_DELETE, 0, "OffsetDeleteRequest", lambda a: a.error_code,
            group_id=group_id, topics=tuple(
                build(module, "OffsetDeleteRequestTopic", name=name, partitions=tuple(parts))
                for name, parts in by_topic.items()))
        return int(answer.error_code), {(t.name, int(p.partition_index)): int(p.error_code)
                                        for t in answer.topics for p in t.partitions}


def _topic_partitions(assignment: Any) -> tuple[TopicPartition, ...]:
    """ConsumerGroupDescribe's Assignment as (topic, partition) pairs, in order."""
    return tuple(sorted((tp.topic_name, int(p)) for tp in assignment.topic_partitions
                        for p in tp.partitions))


class _Retry(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(code)
        self.code = code
        self.message = message
