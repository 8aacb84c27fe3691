"""The metadata layer in real processes: three controllers, writes through `kraft-admin` at any
node, the state surviving a kill -9 of the active controller."""

from __future__ import annotations

import json

from harness.cluster import run_cli, wait_for
from tests.integration.brokers import TestBroker

ELECTION_WAIT_S = 15


def admin(cluster, node_id: int, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("server.admin_cli", "--bootstrap-server",
                   cluster.nodes[node_id].endpoint, *args)


def test_admin_writes_commit_and_survive_a_controller_failover(make_cluster) -> None:
    cluster = make_cluster(internal_test_hooks_enable="false")
    cluster_id = cluster.format()
    cluster.start_all()
    leader = wait_for(cluster.leader, ELECTION_WAIT_S, "an active controller")
    standby = min(set(cluster.nodes) - {leader})

    # A new cluster's log begins with its metadata.version.
    def finalized() -> dict | None:
        out = admin(cluster, standby, "features", "describe", "--json")
        if out.returncode != 0:
            return None
        features = {f["name"]: f for f in json.loads(out.stdout)["features"]}
        level = features["metadata.version"]["finalizedVersionLevel"]
        return features if level > 0 else None

    wait_for(finalized, ELECTION_WAIT_S, "metadata.version to be finalized")

    # A write sent to a standby is forwarded to the active controller and committed.
    out = admin(cluster, standby, "configs", "alter", "--entity-type", "brokers",
                "--entity-default", "--add-config", "num.partitions=6")
    assert out.returncode == 0, out.stderr
    # Bad input: one line with Kafka's error name, nothing written.
    out = admin(cluster, standby, "topics", "create", "--topic", "orders",
                "--replication-factor", "3")
    assert out.returncode == 1
    # No broker has registered yet; Kafka's placer says so first.
    assert out.stderr.strip().splitlines() == [
        "kraft-admin: INVALID_REPLICATION_FACTOR: Unable to replicate the partition 3 time(s): "
        "All brokers are currently fenced."
    ]

    cluster.kill(leader)
    survivors = set(cluster.nodes) - {leader}
    new = wait_for(lambda: cluster.leader(among=survivors), ELECTION_WAIT_S, "a new leader")

    def default_partitions(node_id: int) -> str | None:
        out = admin(cluster, node_id, "configs", "describe", "--entity-type", "brokers",
                    "--entity-default", "--json")
        if out.returncode != 0:
            return None
        configs = {c["name"]: c["value"] for e in json.loads(out.stdout) for c in e["configs"]}
        return configs.get("num.partitions")

    # The new active controller holds the committed state and accepts writes at once.
    assert wait_for(lambda: default_partitions(new), ELECTION_WAIT_S, "configs") == "6"
    out = admin(cluster, new, "configs", "alter", "--entity-type", "brokers",
                "--entity-default", "--add-config", "num.partitions=3")
    assert out.returncode == 0, out.stderr
    cluster.start(leader)
    wait_for(lambda: default_partitions(leader) == "3", ELECTION_WAIT_S,
             "the restarted controller to replay the new write")
    out = admin(cluster, leader, "cluster", "describe", "--json")
    assert json.loads(out.stdout)["clusterId"] == cluster_id


def test_broker_failover_story_with_a_controller_failover(make_cluster) -> None:
    """Brokers register and heartbeat; a topic of 6 partitions, RF 3; a silent broker is fenced
    after the session timeout (its leaderships moved, ISRs shrunk); the active controller is
    killed; the broker comes back and is unfenced; its partitions' leaders add it back to the
    ISR; a preferred election restores the original leaders; nothing lost or duplicated."""
    cluster = make_cluster(internal_test_hooks_enable="false",
                           broker_session_timeout_ms="1500")
    cluster_id = cluster.format()
    cluster.start_all()
    wait_for(cluster.leader, ELECTION_WAIT_S, "an active controller")
    endpoints = [n.endpoint for n in cluster.nodes.values()]

    def metadata_offset() -> int:
        statuses = cluster.statuses()
        return max((s.high_watermark for s in statuses.values()), default=0)

    brokers = {b: TestBroker(b, cluster_id, endpoints, metadata_offset) for b in (1, 2, 3)}
    for broker in brokers.values():
        broker.start()

    def broker_list(node_id: int | None = None) -> dict[int, dict] | None:
        nodes = [node_id] if node_id else [n for n in cluster.nodes if cluster.nodes[n].alive]
        out = admin(cluster, nodes[0], "brokers", "list", "--json")
        return {b["id"]: b for b in json.loads(out.stdout)} if out.returncode == 0 else None

    wait_for(lambda: (bl := broker_list()) and len(bl) == 3
             and not any(b["fenced"] for b in bl.values()),
             ELECTION_WAIT_S, "three unfenced brokers")
    out = admin(cluster, 1, "topics", "create", "--topic", "orders", "--partitions", "6",
                "--replication-factor", "3")
    assert out.returncode == 0, out.stderr

    def describe(node_id: int | None = None) -> dict:
        """The topic as a node's committed image has it; a standby may lag a write by the
        time its next Fetch takes, so callers wait for what they expect."""
        nodes = [node_id] if node_id else [n for n in cluster.nodes if cluster.nodes[n].alive]
        out = admin(cluster, nodes[0], "topics", "describe", "--topic", "orders", "--json")
        return json.loads(out.stdout) if out.returncode == 0 else {"partitions": []}

    def leaders(node_id: int | None = None) -> dict[int, int]:
        return {p["partition"]: p["leader"] for p in describe(node_id)["partitions"]}

    original = wait_for(lambda: len(leaders()) == 6 and leaders(), ELECTION_WAIT_S,
                        "the topic to be visible")
    assert sorted(original.values()) == [1, 1, 2, 2, 3, 3]

    # Broker 1 goes silent: fenced after the session timeout, out of every ISR and leadership.
    brokers[1].stop()
    wait_for(lambda: (bl := broker_list()) and bl[1]["fenced"], ELECTION_WAIT_S,
             "broker 1 to be fenced")
    def moved_off_1() -> bool:
        partitions = describe()["partitions"]
        return len(partitions) == 6 and all(
            p["leader"] != 1 and 1 not in p["isr"] for p in partitions)

    wait_for(moved_off_1, ELECTION_WAIT_S, "broker 1 out of every ISR and leadership")
    topic = describe()

    # The active controller dies mid-way; the next one carries on from the same image.
    active = wait_for(cluster.leader, ELECTION_WAIT_S, "the active controller")
    cluster.kill(active)
    survivors = set(cluster.nodes) - {active}
    wait_for(lambda: cluster.leader(among=survivors), ELECTION_WAIT_S, "a new controller")

    brokers[1].start()  # a new incarnation: registered fenced, unfenced once caught up
    wait_for(lambda: (bl := broker_list()) and not bl[1]["fenced"], ELECTION_WAIT_S,
             "broker 1 to be unfenced")
    # Partition leaders add broker 1 back to their ISRs (ISR expansion is leader-driven).
    epochs = {b: broker.epoch for b, broker in brokers.items()}
    current = wait_for(cluster.leader, ELECTION_WAIT_S, "the active controller")
    for p in describe(current)["partitions"]:  # the active controller's view is the newest
        leader = brokers[p["leader"]]
        isr = sorted({*p["isr"], 1})
        reply = leader.alter_partition(topic["topicId"], p["partition"], p["leaderEpoch"],
                                       p["partitionEpoch"], [(b, epochs[b]) for b in isr])
        assert reply.error_code == 0 and reply.partitions[0].error_code == 0, reply
    wait_for(lambda: all(1 in p["isr"] for p in describe()["partitions"]), ELECTION_WAIT_S,
             "broker 1 back in every ISR")
    out = admin(cluster, min(survivors), "leaders", "elect", "--election-type", "preferred",
                "--all-topic-partitions")
    assert out.returncode == 0, out.stderr
    wait_for(lambda: leaders() == original, ELECTION_WAIT_S, "the original leaders")

    # Every controller, the killed one included, replays the same log: one topic record.
    cluster.start(active)
    wait_for(lambda: leaders(active) == original, ELECTION_WAIT_S,
             "the restarted controller to catch up")
    for broker in brokers.values():
        broker.stop()
    out = admin(cluster, active, "topics", "list", "--json")
    # A duplicated TopicRecord would have stopped the node (replay refuses it).
    assert [t["name"] for t in json.loads(out.stdout)] == ["orders"]
