"""The Kafka-protocol client behind `kraft-admin transactions`: what kafka-transactions.sh asks
through Kafka's AdminClient (listTransactions, describeTransactions, describeProducers,
abortTransaction), asked with the broker's own KafkaClient on server/group_client.py's
connections, metadata and retries, so the tool works against any broker's Kafka listener.

ListTransactions goes to every broker (each lists the ids it coordinates); DescribeTransactions
to the id's coordinator (FindCoordinator key type 1, asked again on NOT_COORDINATOR /
COORDINATOR_LOAD_IN_PROGRESS / COORDINATOR_NOT_AVAILABLE); DescribeProducers to the partition's
leader or a named broker; an abort is Kafka's Admin.abortTransaction: WriteTxnMarkers v1 with
an ABORT marker to the partition's leader. Every failure is a GroupCommandError, one line."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from broker.kafka.client import KafkaClientError
from broker.kafka.codec import build, request_module
from broker.kafka.versions import ApiKey

# _Retry and _RETRIABLE: group_client's coordinator retries, which TxnAdmin's lookups share.
from server.group_client import _RETRIABLE, GroupAdmin, GroupCommandError, _Retry, error_text

TopicPartition = tuple[str, int]
MARKERS_VERSION = 1  # the one version Kafka 4.0 serves
TRANSACTIONAL_ID_NOT_FOUND = 105
_LEADER_MOVED = frozenset({3, 6})  # UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER


@dataclass(frozen=True)
class TxnListing:
    transactional_id: str
    coordinator: int
    producer_id: int
    state: str


@dataclass(frozen=True)
class TxnDescription:
    coordinator: int
    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ms: int  # -1: no transaction open
    partitions: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int  # -1: no marker written yet
    txn_start_offset: int  # -1: no open transaction


@dataclass(frozen=True)
class PartitionInfo:
    leader: int
    replicas: tuple[int, ...]


class TxnAdmin(GroupAdmin):
    # ---- metadata ---------------------------------------------------------------------------

    async def partitions(self, topics: Iterable[str] | None) -> dict[TopicPartition,
                                                                       PartitionInfo]:
        """Each partition of `topics` (None: every topic but the internal ones, as Kafka's
        listTopics) with its leader and replicas; an unknown topic is an error."""
        client = await self._any()
        module = self._module(client, ApiKey.METADATA, 12)
        asked = None if topics is None else tuple(
            build(module, "MetadataRequestTopic", topic_id=None, name=t) for t in topics)
        answer = await self._call(client, ApiKey.METADATA, 12, "MetadataRequest", topics=asked,
                                  allow_auto_topic_creation=False,
                                  include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False)
        self.cluster.brokers.update({int(b.node_id): (b.host, int(b.port))
                                     for b in answer.brokers})
        found: dict[TopicPartition, PartitionInfo] = {}
        for topic in answer.topics:
            code = int(topic.error_code)
            if code:
                raise GroupCommandError(f"topic {topic.name}: {error_text(code)}")
            if topics is None and topic.is_internal:
                continue
            for p in topic.partitions:
                tp = (str(topic.name), int(p.partition_index))
                self.cluster.leaders[tp] = int(p.leader_id)
                found[tp] = PartitionInfo(int(p.leader_id),
                                          tuple(int(r) for r in p.replica_nodes))
        return found

    async def _leader(self, tp: TopicPartition, refresh: bool = False) -> int:
        if refresh or tp not in self.cluster.leaders:
            await self.metadata([tp[0]])
        if tp[0] in self.cluster.missing:
            raise GroupCommandError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {tp[0]} does not exist")
        leader = self.cluster.leaders.get(tp, -1)
        if tp not in self.cluster.leaders:
            raise GroupCommandError(f"UNKNOWN_TOPIC_OR_PARTITION: {tp[0]}-{tp[1]} does not "
                                    "exist")
        if leader < 0:
            raise GroupCommandError(f"LEADER_NOT_AVAILABLE: {tp[0]}-{tp[1]} has no leader")
        return leader

    # ---- the coordinator's views ------------------------------------------------------------

    async def list_transactions(self, states: Sequence[str] = (),
                                producer_ids: Sequence[int] = (),
                                duration_ms: int = -1) -> list[TxnListing]:
        """Every broker's listing (Kafka's listTransactions().allByBrokerId())."""
        await self.metadata(())
        answers = await asyncio.gather(*(
            self._transactions_at(node, states, producer_ids, duration_ms)
            for node in sorted(self.cluster.brokers)))
        return [listing for answer in answers for listing in answer]

    async def _transactions_at(self, node: int, states: Sequence[str],
                               producer_ids: Sequence[int], duration_ms: int
                               ) -> list[TxnListing]:
        client = await self._node(node)
        fields: dict[str, Any] = {"state_filters": tuple(states),
                                  "producer_id_filters": tuple(producer_ids)}
        if duration_ms >= 0:
            if client.version(ApiKey.LIST_TRANSACTIONS, 1) < 1:
                raise GroupCommandError(f"broker {node} serves ListTransactions v0 only: no "
                                        "duration filter")
            fields["duration_filter"] = duration_ms
        answer = await self._call(client, ApiKey.LIST_TRANSACTIONS, 1,
                                  "ListTransactionsRequest", **fields)
        code = int(answer.error_code)
        if code:
            raise GroupCommandError(f"broker {node}: {error_text(code)}")
        return [TxnListing(t.transactional_id, node, int(t.producer_id), t.transaction_state)
                for t in answer.transaction_states]

    async def txn_coordinator(self, transactional_id: str) -> int:
        async def find() -> int:
            client = await self._any()
            answer = await self._call(client, ApiKey.FIND_COORDINATOR, 3,
                                      "FindCoordinatorRequest", key=transactional_id,
                                      key_type=1)
            code = int(answer.error_code)
            if code:
                raise _Retry(code, getattr(answer, "error_message", None) or "")
            self.cluster.brokers[int(answer.node_id)] = (answer.host, int(answer.port))
            return int(answer.node_id)
        node: int = await self._retrying(find)
        return node

    async def describe_transaction(self, transactional_id: str) -> TxnDescription | None:
        """The id's state at its coordinator; None when it does not know the id."""
        async def attempt() -> Any:
            node = await self.txn_coordinator(transactional_id)
            answer = await self._call(await self._node(node), ApiKey.DESCRIBE_TRANSACTIONS, 0,
                                      "DescribeTransactionsRequest",
                                      transactional_ids=(transactional_id,))
            (state,) = answer.transaction_states
            code = int(state.error_code)
            if code in _RETRIABLE:
                raise _Retry(code, "")
            return node, state
        node, state = await self._retrying(attempt)
        code = int(state.error_code)
        if code == TRANSACTIONAL_ID_NOT_FOUND:
            return None
        if code:
            raise GroupCommandError(error_text(code))
        return TxnDescription(
            node, transactional_id, int(state.producer_id), int(state.producer_epoch),
            state.transaction_state, int(state.transaction_timeout.total_seconds() * 1000),
            int(state.transaction_start_time_ms),
            tuple((t.topic, int(p)) for t in state.topics for p in t.partitions))

    # ---- the partitions' views --------------------------------------------------------------

    async def describe_producers(self, partitions: Sequence[TopicPartition],
                                 broker: int | None = None
                                 ) -> dict[TopicPartition, list[ProducerState]]:
        """Each partition's active producers, from its leader or from `broker`."""
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            node = broker if broker is not None else await self._leader(tp)
            by_node.setdefault(node, []).append(tp)
        found: dict[TopicPartition, list[ProducerState]] = {}
        for answer in await asyncio.gather(*(self._producers_at(node, tps)
                                             for node, tps in by_node.items())):
            found.update(answer)
        return found

    async def _producers_at(self, node: int, partitions: list[TopicPartition]
                            ) -> dict[TopicPartition, list[ProducerState]]:
        client = await self._node(node)
        module = self._module(client, ApiKey.DESCRIBE_PRODUCERS, 0)
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        topics = tuple(build(module, "TopicRequest", name=t, partition_indexes=tuple(p))
                       for t, p in by_topic.items())
        answer = await self._call(client, ApiKey.DESCRIBE_PRODUCERS, 0,
                                  "DescribeProducersRequest", topics=topics)
        found: dict[TopicPartition, list[ProducerState]] = {}
        for topic in answer.topics:
            for p in topic.partitions:
                code = int(p.error_code)
                if code:
                    raise GroupCommandError(error_text(code))
                found[(str(topic.name), int(p.partition_index))] = [
                    ProducerState(int(s.producer_id), int(s.producer_epoch),
                                  int(s.last_sequence), int(s.last_timestamp),
                                  int(s.coordinator_epoch), int(s.current_txn_start_offset))
                    for s in p.active_producers]
        return found

    async def abort(self, tp: TopicPartition, producer_id: int, producer_epoch: int,
                    coordinator_epoch: int) -> None:
        """An ABORT marker for the producer's transaction, written by the partition's leader
        (Kafka's abortTransaction); a moved leader is looked up again, once."""
        for attempt in range(2):
            leader = await self._leader(tp, refresh=attempt > 0)
            client = await self._node(leader)
            try:
                client.version(ApiKey.WRITE_TXN_MARKERS, MARKERS_VERSION)
            except KafkaClientError:
                raise GroupCommandError(f"UNSUPPORTED_VERSION: broker {leader} does not serve "
                                        "WriteTxnMarkers v1 (API 27)") from None
            module = request_module(ApiKey.WRITE_TXN_MARKERS, MARKERS_VERSION)
            marker = build(module, "WritableTxnMarker", producer_id=producer_id,
                           producer_epoch=producer_epoch, transaction_result=False,
                           coordinator_epoch=coordinator_epoch, topics=(build(
                               module, "WritableTxnMarkerTopic", name=tp[0],
                               partition_indexes=(tp[1],)),))
            answer = await self._call(client, ApiKey.WRITE_TXN_MARKERS, MARKERS_VERSION,
                                      "WriteTxnMarkersRequest", markers=(marker,))
            codes = [int(p.error_code) for m in answer.markers for t in m.topics
                     for p in t.partitions]
            code = next((c for c in codes if c), 0 if codes else 6)
            if code == 0:
                return
            if code not in _LEADER_MOVED:
                break
        raise GroupCommandError(error_text(code))
