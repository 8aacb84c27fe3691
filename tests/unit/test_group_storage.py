"""The coordinator on a real partition log (broker/group/storage.py): commits and group records
are acks=all appends to `__consumer_offsets` through the ReplicaManager, in Kafka's formats; the
partition's leader loads its groups (COORDINATOR_LOAD_IN_PROGRESS until then), a leadership loss
unloads them (NOT_COORDINATOR), and a new leadership or a restarted broker replays them from
the log."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

from broker.group.config import GroupConfig
from broker.group.coordinator import PartitionStatus
from broker.group.offsets import CommitPartition, commit_offsets, fetch_offsets
from broker.group.placement import OFFSETS_TOPIC
from broker.group.records import OffsetKey, decode_key, decode_offset_value
from broker.group.storage import GroupStorage
from broker.records import decode_records, parse_header
from tests.unit.replica_harness import Cluster, settle

OFFSETS_ID = "Xd9vV1mnR0qEdvXh2gk0_w"
CONFIG = GroupConfig(offsets_topic_num_partitions=1, offsets_topic_replication_factor=1)


def run(tmp_path: Path, body: Callable[[Cluster, GroupStorage], Awaitable[None]]) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path, brokers=(1,))
        cluster.create_topic(replicas=(1,), topic=OFFSETS_TOPIC, topic_id=OFFSETS_ID)
        cluster.create_topic(replicas=(1,), partitions=2)
        storage = GroupStorage(cluster.nodes[1].manager, CONFIG, now_ms=cluster.clock)
        cluster.start()
        try:
            await body(cluster, storage)
        finally:
            await storage.close()
            await cluster.close()
    asyncio.run(main())


async def loaded(storage: GroupStorage) -> None:
    for _ in range(100):
        if storage.coordinator.partitions.get(0) is PartitionStatus.ACTIVE:
            return
        await asyncio.sleep(0)
    raise AssertionError(f"not loaded: {storage.coordinator.partitions}")


def test_commits_are_kafka_records_in_the_log_and_survive_a_restart(tmp_path: Path) -> None:
    async def body(cluster: Cluster, storage: GroupStorage) -> None:
        await loaded(storage)
        errors = await commit_offsets(storage.coordinator, "g", -1, "", None,
                                      [CommitPartition("t", 1, 42, 3, "hello")])
        assert errors == [0]
        log = cluster.nodes[1].log(0, OFFSETS_TOPIC)
        data = log.read(0, 1 << 20, log.end_offset)
        (record,) = decode_records(data[:parse_header(data).size])
        assert decode_key(record.key) == OffsetKey("g", "t", 1)
        assert record.value is not None
        assert decode_offset_value(record.value).offset == 42

        await storage.close()
        await cluster.stop(1)
        node = cluster.add_node(1)  # a restart, the coordinator attached before activation
        again = GroupStorage(node.manager, CONFIG, now_ms=cluster.clock)
        node.manager.on_metadata_update(None, cluster.metadata.image, None)  # type: ignore[arg-type]
        node.manager.activate()
        try:
            assert again.coordinator.partitions.get(0) is not None
            await loaded(again)
            _, (offset,) = fetch_offsets(again.coordinator, "g", [("t", 1)])
            assert (offset.offset, offset.leader_epoch, offset.metadata) == (42, 3, "hello")
        finally:
            await again.close()
    run(tmp_path, body)


def test_losing_and_regaining_leadership_unloads_and_replays(tmp_path: Path) -> None:
    async def body(cluster: Cluster, storage: GroupStorage) -> None:
        await loaded(storage)
        await commit_offsets(storage.coordinator, "g", -1, "", None,
                             [CommitPartition("t", 0, 7)])
        cluster.change(topic_id=OFFSETS_ID, leader=-1)
        await settle()
        assert fetch_offsets(storage.coordinator, "g", [("t", 0)])[0] == 16  # NOT_COORDINATOR
        cluster.change(topic_id=OFFSETS_ID, leader=1)
        assert storage.coordinator.coordinator_error("g") == 14  # loading
        await loaded(storage)
        assert fetch_offsets(storage.coordinator, "g", [("t", 0)])[1][0].offset == 7
    run(tmp_path, body)


def test_a_failed_append_is_not_visible(tmp_path: Path) -> None:
    async def body(cluster: Cluster, storage: GroupStorage) -> None:
        await loaded(storage)
        cluster.change(topic_id=OFFSETS_ID, leader=-1)  # the replica manager stops leading
        storage.coordinator.begin_loading(0)  # as if the coordinator had not heard yet
        storage.coordinator.finish_loading(0, [])
        errors = await commit_offsets(storage.coordinator, "g", -1, "", None,
                                      [CommitPartition("t", 0, 9)])
        assert errors == [16]  # NOT_LEADER_OR_FOLLOWER on the append -> NOT_COORDINATOR
        assert "g" not in storage.coordinator.groups
    run(tmp_path, body)
