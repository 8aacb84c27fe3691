"""The broker role in real processes: 3 controllers + 3 brokers, and a 3-node combined-mode
cluster. Brokers observe the metadata log, serve their cache, register and heartbeat, are
fenced when silent, catch up after downtime, and shut down in a controlled way on SIGTERM."""

from __future__ import annotations

import json
import signal
import urllib.request

import grpc

from harness.cluster import run_cli, wait_for
from kraft.security.tls import MESSAGE_SIZE_OPTIONS
from metadata.rpc import admin_pb2 as apb
from metadata.rpc import admin_pb2_grpc as arpc
from tests.integration.brokers import broker_cluster, broker_topics, partition_view

WAIT_S = 20
RESTART_WAIT_S = 60
CONTROLLERS = {1, 2, 3}
BROKERS = [4, 5, 6]
# Short timings keep the test quick; heartbeats well inside the session timeout. Not shorter:
# on a loaded 2-core machine a broker applying thousands of partitions misses a 1.5-s session,
# its fencing moves thousands of leaderships, and the churn fences the next one.
TIMINGS = {
    "internal_test_hooks_enable": "false",
    "broker_session_timeout_ms": "4000",
    "broker_heartbeat_interval_ms": "300",
}


def admin(endpoint: str, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("server.admin_cli", "--bootstrap-server", endpoint, *args)


def brokers_list(endpoint: str) -> dict[int, dict] | None:
    """Registered brokers as `kraft-admin brokers list --json` names them, asked over gRPC
    from this process (polled: a CLI per poll would cost a Python start each time)."""
    with grpc.insecure_channel(endpoint) as channel:
        reply = arpc.AdminStub(channel).ListBrokers(apb.ListBrokersRequest(), timeout=10)
    if reply.status.error_code:
        return None
    return {b.broker_id: {"id": b.broker_id, "fenced": b.fenced} for b in reply.brokers}


def fenced(endpoint: str, broker_id: int) -> bool | None:
    """Whether the node at `endpoint` sees `broker_id` fenced (None: no answer yet)."""
    brokers = brokers_list(endpoint)
    return None if brokers is None or broker_id not in brokers else brokers[broker_id]["fenced"]


def controller_topics(endpoint: str) -> dict[tuple[str, int], tuple]:
    """Every partition as a controller's committed image has it (Admin.DescribeTopics)."""
    with grpc.insecure_channel(endpoint, options=MESSAGE_SIZE_OPTIONS) as channel:
        reply = arpc.AdminStub(channel).DescribeTopics(apb.DescribeTopicsRequest(), timeout=10)
    return {
        (t.name, p.partition_index): (p.leader, tuple(p.replicas), tuple(p.isr),
                                      p.leader_epoch, p.partition_epoch)
        for t in reply.topics for p in t.partitions
    }


def start_cluster(make_cluster):  # type: ignore[no-untyped-def]
    cluster = make_cluster(**TIMINGS)
    cluster.add_brokers(BROKERS)
    cluster.format()
    cluster.start_all()
    wait_for(lambda: cluster.leader(among=CONTROLLERS), WAIT_S, "an active controller")
    controller = cluster.nodes[1].endpoint
    wait_for(lambda: (bl := brokers_list(controller)) and sorted(bl) == BROKERS
             and not any(b["fenced"] for b in bl.values()), WAIT_S, "three unfenced brokers")
    return cluster


def active_endpoint(cluster) -> str:  # type: ignore[no-untyped-def]
    leader = wait_for(lambda: cluster.leader(among=CONTROLLERS), WAIT_S, "the active controller")
    return cluster.nodes[leader].endpoint


def test_brokers_cache_the_log_catch_up_and_are_fenced_when_killed(make_cluster) -> None:
    cluster = start_cluster(make_cluster)
    endpoints = {b: cluster.nodes[b].endpoint for b in BROKERS}

    # A write sent to a broker is forwarded to the active controller; every cache shows it.
    out = admin(endpoints[4], "topics", "create", "--topic", "orders", "--partitions", "6",
                "--replication-factor", "3")
    assert out.returncode == 0, out.stderr
    for b in BROKERS:
        reply = broker_topics(endpoints[b], ["orders"], wait_ms=5000)
        assert reply.topics[0].error_code == 0, (b, reply)
        assert len(reply.topics[0].partitions) == 6
        assert all(len(p.isr) == 3 and p.leader in BROKERS for p in reply.topics[0].partitions)
    # Reads through the broker's Admin API answer from its cache.
    out = admin(endpoints[5], "topics", "describe", "--topic", "orders", "--json")
    assert out.returncode == 0 and len(json.loads(out.stdout)["partitions"]) == 6, out.stderr

    # Each broker's reported offset converges to the high watermark.
    leader = wait_for(lambda: cluster.leader(among=CONTROLLERS), WAIT_S, "the leader")
    hw = cluster.status(leader).high_watermark
    for b in BROKERS:
        position = broker_cluster(endpoints[b], min_offset=hw - 1, wait_ms=5000).position
        assert position.offset >= hw - 1, (b, position, hw)
        assert position.high_watermark >= hw
    # The quorum knows the brokers as observers; their metrics say they run.
    out = admin(cluster.nodes[leader].endpoint, "quorum", "describe", "--status", "--json")
    observers = {o["id"] for o in json.loads(out.stdout)["currentObservers"]}
    assert observers >= set(BROKERS), out.stdout
    metrics = urllib.request.urlopen(
        f"http://127.0.0.1:{cluster.nodes[4].metrics_port}/metrics", timeout=5).read().decode()
    assert 'kraft_broker_state{state="running"} 1.0' in metrics
    assert "kraft_broker_metadata_lag_records" in metrics
    assert "kraft_broker_image_load_seconds_count" in metrics

    # Broker 6 stops (controlled); 10,000 records are written meanwhile; on restart it
    # catches up and its image matches the active controller's.
    cluster.signal(6, signal.SIGTERM)
    assert cluster.wait_exit(6, WAIT_S) == 0
    for i in range(2):  # two batches of 5,000 records (1 topic + 4,999 partitions each)
        out = admin(endpoints[4], "topics", "create", "--topic", f"bulk-{i}",
                    "--partitions", "4999", "--replication-factor", "2")
        assert out.returncode == 0, out.stderr
    cluster.start(6)
    active = active_endpoint(cluster)
    wait_for(lambda: fenced(active, 6) is False, WAIT_S, "broker 6 unfenced")
    ours = wait_for(lambda: (view := partition_view(list(broker_topics(endpoints[6]).topics)))
                    == controller_topics(active_endpoint(cluster)) and view, WAIT_S,
                    "broker 6's image to match the active controller's", poll_s=0.2)
    assert len(ours) == 6 + 2 * 4999

    # kill -9: fenced after the session timeout, its leaderships moved; back and unfenced
    # after a restart (a new incarnation, registered once the old session expired).
    cluster.kill(5)
    wait_for(lambda: fenced(active_endpoint(cluster), 5), WAIT_S, "broker 5 fenced")
    wait_for(lambda: all(p.leader != 5 for t in broker_topics(endpoints[4]).topics
                         for p in t.partitions), WAIT_S, "broker 5's leaderships moved",
             poll_s=0.2)  # each answer lists 10,000 partitions
    cluster.start(5)
    wait_for(lambda: fenced(active_endpoint(cluster), 5) is False, RESTART_WAIT_S,
             "broker 5 unfenced after its restart")
    state = wait_for(lambda: broker_cluster(endpoints[5]).broker_state, WAIT_S, "broker 5 up")
    assert state == "RUNNING"
    # The partition leaders add the returned replica back to their ISRs (AlterPartition), once
    # it has recovered its 10,000 logs after the kill, applied them and fetched: longer than
    # WAIT_S on a loaded 2-core machine (bench/restart_bench.py measures it).
    wait_for(lambda: all(len(p.isr) == 3 for t in broker_topics(endpoints[4], ["orders"]).topics
                         for p in t.partitions), RESTART_WAIT_S,
             "broker 5 back in every ISR of orders")


def test_sigterm_is_a_controlled_shutdown(make_cluster) -> None:
    cluster = start_cluster(make_cluster)
    out = admin(cluster.nodes[4].endpoint, "topics", "create", "--topic", "orders",
                "--partitions", "6", "--replication-factor", "3")
    assert out.returncode == 0, out.stderr
    active = active_endpoint(cluster)
    wait_for(lambda: any(v[0] == 4 for v in controller_topics(active).values()), WAIT_S,
             "broker 4 to lead a partition")

    cluster.signal(4, signal.SIGTERM)
    assert cluster.wait_exit(4, WAIT_S) == 0
    # Before it exited the controller had moved every leadership away and fenced it.
    view = controller_topics(active_endpoint(cluster))
    assert all(leader != 4 and 4 not in isr for leader, _, isr, _, _ in view.values()), view
    assert fenced(active_endpoint(cluster), 4) is True
    assert "controlled shutdown complete" in cluster.logs(4)


def test_combined_mode_cluster_with_a_controller_failover(make_cluster) -> None:
    cluster = make_cluster(**TIMINGS)
    brokers = cluster.make_combined()
    endpoints = {n: b.endpoint for n, b in brokers.items()}
    cluster.format()
    cluster.start_all()
    leader = wait_for(cluster.leader, WAIT_S, "an active controller")
    wait_for(lambda: (bl := brokers_list(endpoints[1])) and sorted(bl) == [1, 2, 3]
             and not any(b["fenced"] for b in bl.values()), WAIT_S, "three unfenced brokers")
    out = admin(endpoints[1], "topics", "create", "--topic", "orders", "--partitions", "3",
                "--replication-factor", "3")
    assert out.returncode == 0, out.stderr
    for node_id in (1, 2, 3):
        reply = broker_topics(endpoints[node_id], ["orders"], wait_ms=5000)
        assert reply.topics[0].error_code == 0 and len(reply.topics[0].partitions) == 3

    # The active controller (and its broker) dies; the others elect a new one, fence the dead
    # broker, and keep accepting writes through their broker listeners.
    cluster.kill(leader)
    survivors = {1, 2, 3} - {leader}
    new = wait_for(lambda: cluster.leader(among=survivors), WAIT_S, "a new active controller")
    assert new != leader
    other = endpoints[min(survivors)]
    wait_for(lambda: fenced(other, leader), WAIT_S, "the dead broker fenced")
    out = admin(other, "topics", "create", "--topic", "after", "--partitions", "2",
                "--replication-factor", "2")
    assert out.returncode == 0, out.stderr
    for node_id in survivors:
        reply = broker_topics(endpoints[node_id], ["after"], wait_ms=5000)
        assert reply.topics[0].error_code == 0, reply

    cluster.start(leader)
    wait_for(lambda: fenced(other, leader) is False, WAIT_S,
             "the restarted node's broker unfenced")
    reply = broker_topics(endpoints[leader], ["orders", "after"], wait_ms=5000)
    assert [t.error_code for t in reply.topics] == [0, 0]
