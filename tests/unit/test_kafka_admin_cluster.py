"""DescribeCluster, ElectLeaders and Alter/ListPartitionReassignments on the Kafka front
(broker/kafka/admin_cluster_api.py), and auto topic creation through Metadata (broker/kafka/
admin_auto_create.py), against a live controller's admin operations."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

import pytest

from broker.kafka import admin_auto_create
from broker.kafka.codec import build
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.replication import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    ElectionType,
    alter_partition,
    fence_broker,
    unfence_broker,
)
from tests.unit.test_admin_service import broker_record, until
from tests.unit.test_kafka_admin_topics import TIMEOUT, AdminFront, creatable, run


async def topic(front: AdminFront, name: str, assignments: dict[int, tuple[int, ...]]) -> None:
    m = front.module(ApiKey.CREATE_TOPICS, 7)
    response = await front.call(ApiKey.CREATE_TOPICS, 7, timeout=TIMEOUT, validate_only=False,
                                topics=(creatable(m, name, -1, -1, assignments=assignments),))
    assert response.topics[0].error_code == Errors.NONE


# ---- DescribeCluster ----

@pytest.mark.parametrize("version", [0, 1])
def test_describe_cluster_lists_live_brokers_on_the_listener(tmp_path: Path,
                                                             version: int) -> None:
    async def scenario(front: AdminFront) -> None:
        await front.write(lambda _image: broker_record(4, fenced=True))
        fields = {"endpoint_type": 1} if version >= 1 else {}
        response = await front.call(ApiKey.DESCRIBE_CLUSTER, version,
                                    include_cluster_authorized_operations=False, **fields)
        assert (response.error_code, response.cluster_id) == (Errors.NONE, front.ops.cluster_id)
        assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [
            (1, "localhost", 9091), (2, "localhost", 9092), (3, "localhost", 9093)]
        assert response.controller_id == 1  # a live broker: clients cannot reach controllers
        assert response.cluster_authorized_operations == -(2**31)

    run(tmp_path, scenario)


def test_describe_cluster_refuses_controller_and_unknown_endpoint_types(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        answers = [await front.call(ApiKey.DESCRIBE_CLUSTER, 1, endpoint_type=t,
                                    include_cluster_authorized_operations=False) for t in (2, 3)]
        assert [(a.error_code, a.brokers) for a in answers] == [
            (Errors.MISMATCHED_ENDPOINT_TYPE, ()), (Errors.UNSUPPORTED_ENDPOINT_TYPE, ())]
        assert answers[0].error_message == "The request was sent to an endpoint of the wrong type."

    run(tmp_path, scenario)


# ---- ElectLeaders ----

def elect(front: AdminFront, version: int, election: int,
          partitions: dict[str, tuple[int, ...]] | None) -> Any:
    m = front.module(ApiKey.ELECT_LEADERS, version)
    named = None if partitions is None else tuple(
        build(m, "TopicPartitions", topic=t, partitions=p) for t, p in partitions.items())
    fields = {"election_type": election} if version >= 1 else {}
    return front.call(ApiKey.ELECT_LEADERS, version, topic_partitions=named, timeout=TIMEOUT,
                      **fields)


@pytest.mark.parametrize("version", [0, 2])
def test_elect_leaders_answers_per_partition(tmp_path: Path, version: int) -> None:
    async def scenario(front: AdminFront) -> None:
        await topic(front, "e", {0: (1, 2)})
        response = await elect(front, version, ElectionType.PREFERRED,
                               {"e": (0, 7), "missing": (0,)})
        got = {(r.topic, p.partition_id): p.error_code
               for r in response.replica_election_results for p in r.partition_result}
        assert got == {("e", 0): Errors.ELECTION_NOT_NEEDED,
                       ("e", 7): Errors.UNKNOWN_TOPIC_OR_PARTITION,
                       ("missing", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
        if version >= 1:
            assert response.error_code == Errors.NONE
        everything = await elect(front, version, ElectionType.PREFERRED, None)
        assert everything.replica_election_results == ()  # nothing needed an election

    run(tmp_path, scenario)


async def report_isr(front: AdminFront, name: str, isr: tuple[int, ...]) -> None:
    """What the partition leader's AlterPartition would do: set partition 0's ISR."""
    topic_ = front.image.topic(name)
    assert topic_ is not None
    p = topic_.partitions[0]
    request = AlterPartitionRequest(p.leader, front.image.cluster.brokers[p.leader].epoch, (
        AlterPartitionTopic(topic_.topic_id, (AlterPartitionData(
            0, p.leader_epoch, tuple(BrokerState(b) for b in isr), p.partition_epoch),)),))
    await front.write(lambda image: alter_partition(image, request))


def leader(front: AdminFront, name: str) -> int:
    topic_ = front.image.topic(name)
    assert topic_ is not None
    return topic_.partitions[0].leader


def test_elect_leaders_moves_leadership_back_and_elects_uncleanly(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        await topic(front, "back", {0: (1, 2)})
        await front.write(lambda image: fence_broker(image, 1))  # 2 takes over
        await front.write(lambda image: unfence_broker(image, 1))
        await report_isr(front, "back", (2, 1))
        assert leader(front, "back") == 2
        response = await elect(front, 2, ElectionType.PREFERRED, {"back": (0,)})
        assert [(p.partition_id, p.error_code) for r in response.replica_election_results
                for p in r.partition_result] == [(0, Errors.NONE)]
        assert leader(front, "back") == 1

        await topic(front, "lost", {0: (3, 4)})
        await report_isr(front, "lost", (3,))
        await front.write(lambda image: fence_broker(image, 3))  # no live ISR member left
        assert leader(front, "lost") == -1
        preferred = await elect(front, 2, ElectionType.PREFERRED, {"lost": (0,)})
        assert preferred.replica_election_results[0].partition_result[0].error_code == \
            Errors.PREFERRED_LEADER_NOT_AVAILABLE
        unclean = await elect(front, 2, ElectionType.UNCLEAN, {"lost": (0,)})
        assert unclean.replica_election_results[0].partition_result[0].error_code == Errors.NONE
        assert leader(front, "lost") == 4  # an out-of-sync replica: records may be lost

    run(tmp_path, scenario)


def test_elect_leaders_unknown_election_type_is_a_top_level_error(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        response = await elect(front, 2, 5, {"e": (0,)})
        assert response.error_code == Errors.INVALID_REQUEST
        # Every named partition carries it too, as Kafka's getErrorResponse at every version.
        [result] = response.replica_election_results
        assert (result.topic, [(p.partition_id, p.error_code) for p in result.partition_result]) \
            == ("e", [(0, Errors.INVALID_REQUEST)])

    run(tmp_path, scenario)


# ---- reassignments ----

def reassign(front: AdminFront, targets: dict[tuple[str, int], tuple[int, ...] | None]) -> Any:
    m = front.module(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0)
    by_topic: dict[str, list[Any]] = {}
    for (name, index), replicas in targets.items():
        by_topic.setdefault(name, []).append(build(m, "ReassignablePartition",
                                                   partition_index=index, replicas=replicas))
    return front.call(ApiKey.ALTER_PARTITION_REASSIGNMENTS, 0, timeout=TIMEOUT, topics=tuple(
        build(m, "ReassignableTopic", name=n, partitions=tuple(p)) for n, p in by_topic.items()))


def listed(front: AdminFront, topics: dict[str, tuple[int, ...]] | None) -> Any:
    m = front.module(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0)
    asked = None if topics is None else tuple(
        build(m, "ListPartitionReassignmentsTopics", name=n, partition_indexes=p)
        for n, p in topics.items())
    return front.call(ApiKey.LIST_PARTITION_REASSIGNMENTS, 0, timeout=TIMEOUT, topics=asked)


def test_reassignments_start_list_and_cancel(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        await topic(front, "r", {0: (1, 2), 1: (2, 3)})
        response = await reassign(front, {("r", 0): (3, 4), ("r", 1): None,
                                          ("missing", 0): (1,)})
        got = {(t.name, p.partition_index): p.error_code
               for t in response.responses for p in t.partitions}
        assert response.error_code == Errors.NONE
        assert got == {("r", 0): Errors.NONE, ("r", 1): Errors.NO_REASSIGNMENT_IN_PROGRESS,
                       ("missing", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION}
        # No replica catches up here (no data plane), so the move stays in progress.
        ongoing = (await listed(front, None)).topics
        assert [(t.name, [(p.partition_index, p.replicas, p.adding_replicas,
                           p.removing_replicas) for p in t.partitions]) for t in ongoing] == [
            ("r", [(0, (3, 4, 1, 2), (3, 4), (1, 2))])]
        assert (await listed(front, {"r": (1,)})).topics == ()
        assert (await listed(front, {})).topics == ()
        cancelled = await reassign(front, {("r", 0): None})
        assert cancelled.responses[0].partitions[0].error_code == Errors.NONE
        assert (await listed(front, None)).topics == ()

    run(tmp_path, scenario)


def test_a_refused_reassignment_request_is_a_top_level_error(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        response = await reassign(front, {("r", -1): (1,)})
        assert response.error_code == Errors.INVALID_REQUEST
        assert [p.error_code for t in response.responses for p in t.partitions] == [
            Errors.INVALID_REQUEST]

    run(tmp_path, scenario)


# ---- auto topic creation through Metadata ----

def metadata(front: AdminFront, version: int, topics: list[str] | None,
             allow: bool = True) -> Any:
    m = front.module(ApiKey.METADATA, version)
    asked = None if topics is None else tuple(
        build(m, "MetadataRequestTopic", name=t, topic_id=None) for t in topics)
    return front.call(ApiKey.METADATA, version, topics=asked, allow_auto_topic_creation=allow,
                      include_cluster_authorized_operations=False,
                      include_topic_authorized_operations=False)


async def settled(front: AdminFront) -> None:
    await until(lambda: not front.creator.in_flight)


@pytest.mark.parametrize("version", [3, 12])
def test_a_missing_topic_is_created_with_the_cluster_defaults(tmp_path: Path,
                                                              version: int) -> None:
    async def scenario(front: AdminFront) -> None:
        (first,) = (await metadata(front, version, ["fresh"])).topics
        assert first.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION  # a KRaft broker's answer
        await settled(front)
        created = front.image.topic("fresh")
        assert created is not None and len(created.partitions) == 1  # num.partitions
        assert len(created.partitions[0].replicas) == 1  # default.replication.factor
        (then,) = (await metadata(front, version, ["fresh"])).topics
        assert then.error_code == Errors.NONE and len(then.partitions) == 1

    run(tmp_path, scenario, auto_create=True)


def leaders_of(front: AdminFront) -> Any:
    """A broker's `topics_led` over the controller's committed image (polled: a test's view)."""
    async def topics_led(names: Any, timeout_s: float) -> None:
        def led() -> bool:
            topics = [front.image.topic(name) for name in names]
            return all(t is not None and all(p.has_leader for p in t.partitions.values())
                       for t in topics)

        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(until(led), timeout_s)

    return topics_led


@pytest.mark.parametrize("version", [3, 12])
def test_the_request_that_starts_a_creation_is_answered_with_the_new_leaders(
        tmp_path: Path, version: int) -> None:
    """Held until the topic is led, the first answer already lets the client produce."""
    async def scenario(front: AdminFront) -> None:
        front.creator._topics_led = leaders_of(front)
        (first,) = (await metadata(front, version, ["fresh"])).topics
        assert first.error_code == Errors.NONE
        assert [p.leader_id for p in first.partitions] == [
            front.image.topic("fresh").partitions[0].leader]  # type: ignore[union-attr]
        assert first.partitions[0].leader_id >= 0

    run(tmp_path, scenario, auto_create=True)


def test_the_hold_for_a_creation_is_bounded(tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A creation that fails (or is slow) delays the answer by the hold at most, then the
    answer is Kafka's: the topic is unknown."""
    monkeypatch.setattr(admin_auto_create, "AUTO_CREATE_HOLD_S", 0.05)

    async def scenario(front: AdminFront) -> None:
        front.creator._topics_led = leaders_of(front)

        async def never(method: str, request: Any, *, from_peer: bool = False) -> Any:
            await asyncio.Event().wait()

        front.creator.admin = type("Stuck", (), {"call": staticmethod(never)})()
        loop = asyncio.get_running_loop()
        started = loop.time()
        (first,) = (await metadata(front, 12, ["stuck"])).topics
        assert first.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert 0.05 <= loop.time() - started < 5

    run(tmp_path, scenario, auto_create=True)


def test_auto_creation_needs_the_request_and_the_broker_to_allow_it(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        (refused,) = (await metadata(front, 12, ["not-allowed"], allow=False)).topics
        assert refused.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        (illegal,) = (await metadata(front, 12, ["bad name"])).topics
        assert illegal.error_code == Errors.INVALID_TOPIC_EXCEPTION
        (internal,) = (await metadata(front, 12, ["__transaction_state"])).topics
        assert internal.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        await metadata(front, 12, None)  # all topics: never creates
        await settled(front)
        assert front.image.topics.by_name == {}

    run(tmp_path, scenario, auto_create=True)


def test_auto_creation_off_creates_nothing(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        (topic_,) = (await metadata(front, 12, ["quiet"])).topics
        assert topic_.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
        assert not front.creator.in_flight
        await asyncio.sleep(0)
        assert front.image.topic("quiet") is None

    run(tmp_path, scenario, auto_create=False)


def test_a_topic_being_created_is_asked_for_once(tmp_path: Path) -> None:
    async def scenario(front: AdminFront) -> None:
        calls: list[str] = []
        real = front.ops.call

        async def counting(method: str, request: Any, *, from_peer: bool = False) -> Any:
            calls.append(method)
            return await real(method, request, from_peer=from_peer)

        front.creator.admin = type("Counting", (), {"call": staticmethod(counting)})()
        await asyncio.gather(*(metadata(front, 12, ["once"]) for _ in range(5)))
        await settled(front)
        assert calls == ["CreateTopics"] and front.image.topic("once") is not None

    run(tmp_path, scenario, auto_create=True)
