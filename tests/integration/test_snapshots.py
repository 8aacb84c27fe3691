"""Snapshots in real processes: every controller snapshots its image, retention moves the log
start while a snapshot always covers it, a follower wiped clean rejoins through FetchSnapshot,
and the whole cluster restarts from snapshot + log tail."""

from __future__ import annotations

import shutil
from pathlib import Path

from harness.cluster import ProcessCluster, wait_for
from kraft.log.codec import scan_prefix
from kraft.log.segmented import list_segments
from kraft.log.snapshots import parse_snapshot_file_name, verify_snapshot_file
from metadata.rpc import admin_pb2 as pb
from metadata.topics import METADATA_PARTITION_DIR
from server.admin_client import AdminClient
from snapshots.image_records import image_to_records
from snapshots.source import build_image, open_source

WAIT_S = 20


def partition_dir(cluster: ProcessCluster, node_id: int) -> Path:
    return cluster.root / f"node-{node_id}" / METADATA_PARTITION_DIR


def snapshot_ids(cluster: ProcessCluster, node_id: int) -> list[tuple[int, int]]:
    found = []
    for path in partition_dir(cluster, node_id).glob("*.checkpoint"):
        snapshot_id = parse_snapshot_file_name(path.name)
        assert snapshot_id is not None
        found.append((snapshot_id.offset, snapshot_id.epoch))
    return sorted(found)


def first_segment_base(cluster: ProcessCluster, node_id: int) -> int:
    segments = list_segments(partition_dir(cluster, node_id))
    return segments[0][0] if segments else -1


def set_default_partitions(client: AdminClient, value: int) -> None:
    request = pb.IncrementalAlterConfigsRequest(resources=[pb.AlterConfigsResource(
        resource_type=pb.CONFIG_RESOURCE_TYPE_BROKER, resource_name="",
        configs=[pb.AlterableConfig(name="num.partitions", op=pb.ALTER_CONFIG_OP_SET,
                                    value=str(value))],
    )])
    [result] = client.call("IncrementalAlterConfigs", request).results
    assert result.error_code == 0, result.error_message


def default_partitions(cluster: ProcessCluster, node_id: int) -> str | None:
    """What this node's own image says (a standby answers reads from its image)."""
    client = AdminClient([cluster.nodes[node_id].endpoint])
    request = pb.DescribeConfigsRequest(resources=[pb.DescribeConfigsResource(
        resource_type=pb.CONFIG_RESOURCE_TYPE_BROKER, resource_name="")])
    try:
        [result] = client.call("DescribeConfigs", request).results
    except Exception:
        return None
    return {c.name: c.value for c in result.configs}.get("num.partitions")


def test_snapshots_bound_the_log_and_bring_a_wiped_follower_back(make_cluster) -> None:
    cluster = make_cluster(**{
        "internal.test.hooks.enable": "false",
        "metadata.log.max.record.bytes.between.snapshots": "400",
        "metadata.max.retention.bytes": "1",  # clean whenever a newer snapshot exists
        "metadata.log.segment.min.bytes": "1024",
        "metadata.log.segment.bytes": "1024",
    })
    cluster_id = cluster.format()
    cluster.start_all()
    leader = wait_for(cluster.leader, WAIT_S, "an active controller")
    client = AdminClient([node.endpoint for node in cluster.nodes.values()])
    for value in range(1, 151):
        set_default_partitions(client, value)

    # Every node snapshots on its own, and its log starts at one of its snapshots.
    def cleaned(node_id: int) -> bool:
        ids = snapshot_ids(cluster, node_id)
        base = first_segment_base(cluster, node_id)
        return bool(ids) and base > 0 and ids[0][0] >= base
    for node_id in cluster.nodes:
        wait_for(lambda n=node_id: cleaned(n), WAIT_S, f"node {node_id} to clean its log")
        for path in partition_dir(cluster, node_id).glob("*.checkpoint"):
            assert verify_snapshot_file(str(path)).records > 0

    # A follower loses its disk; formatted again, it rejoins through FetchSnapshot.
    follower = min(set(cluster.nodes) - {leader})
    cluster.kill(follower)
    shutil.rmtree(cluster.root / f"node-{follower}")
    cluster.format_node(follower, cluster_id)
    set_default_partitions(client, 151)
    cluster.start(follower)
    wait_for(lambda: default_partitions(cluster, follower) == "151", WAIT_S,
             "the wiped follower to converge")
    assert "installed snapshot" in cluster.logs(follower)
    assert snapshot_ids(cluster, follower), "the fetched snapshot is kept"
    leader_hw = cluster.status(leader).high_watermark
    wait_for(lambda: cluster.status(follower).high_watermark >= leader_hw, WAIT_S,
             "the follower's high watermark to reach the leader's")

    # Everyone restarts from snapshot + tail, and the quorum goes on.
    for node_id in cluster.nodes:
        cluster.kill(node_id)
    cluster.start_all()
    wait_for(cluster.leader, WAIT_S, "an active controller after the restart")
    set_default_partitions(client, 152)
    for node_id in cluster.nodes:
        wait_for(lambda n=node_id: default_partitions(cluster, n) == "152", WAIT_S,
                 f"node {node_id} to replay after restarting from its snapshot")


def test_a_broker_below_the_log_start_loads_the_snapshot_and_converges(make_cluster) -> None:
    cluster = make_cluster(**{
        "internal.test.hooks.enable": "false",
        "metadata.log.max.record.bytes.between.snapshots": "400",
        "metadata.max.retention.bytes": "1",
        "metadata.log.segment.min.bytes": "1024",
        "metadata.log.segment.bytes": "1024",
    })
    cluster.add_brokers([4])
    cluster.format()
    cluster.start_all()
    controllers = [node.endpoint for i, node in cluster.nodes.items() if i <= 3]
    client = AdminClient(controllers)

    def broker_unfenced() -> bool:
        try:
            brokers = client.call("ListBrokers", pb.ListBrokersRequest()).brokers
        except Exception:
            return False
        return any(b.broker_id == 4 and not b.fenced for b in brokers)

    wait_for(broker_unfenced, WAIT_S, "broker 4 to register and be unfenced")
    created = client.call("CreateTopics", pb.CreateTopicsRequest(topics=[pb.CreatableTopic(
        name="orders", num_partitions=3, replication_factor=1)]))
    assert [t.error_code for t in created.topics] == [0]
    set_default_partitions(client, 1)
    wait_for(lambda: default_partitions(cluster, 4) == "1", WAIT_S, "the broker's cache")
    cluster.kill(4)
    for value in range(2, 151):
        set_default_partitions(client, value)
    leader = wait_for(lambda: cluster.leader(among={1, 2, 3}), WAIT_S, "the leader")
    broker_end = cluster_dir_end(cluster, 4)
    wait_for(lambda: first_segment_base(cluster, leader) > broker_end, WAIT_S,
             "the leader's log start to pass the stopped broker's log end")

    cluster.start(4)
    wait_for(lambda: default_partitions(cluster, 4) == "150", WAIT_S,
             "the broker to converge through the leader's snapshot")
    assert "installed snapshot" in cluster.logs(4)

    # Record for record, the broker's image equals the leader's at a common offset.
    for node_id in list(cluster.nodes):
        cluster.kill(node_id)
    offset = min(cluster_dir_end(cluster, n) for n in (leader, 4))
    images = {}
    for node_id in (leader, 4):
        source = open_source(str(partition_dir(cluster, node_id)))
        images[node_id] = image_to_records(build_image(source, offset, lambda _m: None).image)
    assert images[4] == images[leader]
    assert len(images[4]) == 1 + 1 + 1 + 3 + 1  # version, broker, topic, partitions, config


def cluster_dir_end(cluster: ProcessCluster, node_id: int) -> int:
    """The log end offset on disk (from the last segment's batches)."""
    segments = list_segments(partition_dir(cluster, node_id))
    if not segments:
        return 0
    data = Path(segments[-1][1]).read_bytes()
    headers = scan_prefix(data)[0]
    return headers[-1].next_offset if headers else segments[-1][0]
