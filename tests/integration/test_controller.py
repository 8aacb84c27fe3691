"""The metadata layer in real processes: three controllers, writes through `kraft-admin` at any
node, the state surviving a kill -9 of the active controller."""

from __future__ import annotations

import json

from tests.integration.cluster import run_cli, wait_for

ELECTION_WAIT_S = 15


def admin(cluster, node_id: int, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("kraft.server.admin_cli", "--bootstrap-server",
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
