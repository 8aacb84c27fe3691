"""A real three-controller run with failovers whose logs the audit reads: brokers register, a
topic is created, a broker goes silent and is fenced, the active controller is killed, the
broker comes back, another topic is created, the killed controller rejoins and catches up.
`RealRun` records what happened, so the audit's timelines can be checked against it."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from harness.cluster import ProcessCluster, run_cli, wait_for
from tests.integration.brokers import TestBroker

WAIT_S = 20


@dataclass
class RealRun:
    root: Path
    node_dirs: dict[int, Path]
    # (epoch, leader) of each controller leadership the test saw, in order
    leaders: list[tuple[int, int]] = field(default_factory=list)
    killed: int = -1
    kill_time_ms: int = 0
    fenced_broker: int = 1
    broker_epochs: dict[int, list[int]] = field(default_factory=dict)


def _admin(cluster: ProcessCluster, node_id: int, *args: str):  # type: ignore[no-untyped-def]
    return run_cli("server.admin_cli", "--bootstrap-server",
                   cluster.nodes[node_id].endpoint, *args)


def _leader_and_epoch(cluster: ProcessCluster, among: set[int] | None = None) -> tuple[int, int]:
    leader = wait_for(lambda: cluster.leader(among=among), WAIT_S, "an active controller")
    return cluster.status(leader).epoch, leader


def run_cluster(root: Path) -> RealRun:
    cluster = ProcessCluster(root, 3, {"internal.test.hooks.enable": "false",
                                       "broker.session.timeout.ms": "1500"})
    run = RealRun(root, {n: root / f"node-{n}" for n in cluster.nodes})
    brokers: dict[int, TestBroker] = {}
    try:
        cluster_id = cluster.format()
        cluster.start_all()
        run.leaders.append(_leader_and_epoch(cluster))
        endpoints = [n.endpoint for n in cluster.nodes.values()]

        def offset() -> int:
            return max((s.high_watermark for s in cluster.statuses().values()), default=0)

        brokers = {b: TestBroker(b, cluster_id, endpoints, offset) for b in (1, 2, 3)}
        for broker in brokers.values():
            broker.start()
            run.broker_epochs.setdefault(broker.broker_id, []).append(broker.epoch)

        def broker_list() -> dict[int, dict] | None:
            live = [n for n in cluster.nodes if cluster.nodes[n].alive]
            out = _admin(cluster, live[0], "brokers", "list", "--json")
            return {b["id"]: b for b in json.loads(out.stdout)} if out.returncode == 0 else None

        wait_for(lambda: (bl := broker_list()) and len(bl) == 3
                 and not any(b["fenced"] for b in bl.values()), WAIT_S, "unfenced brokers")
        out = _admin(cluster, run.leaders[0][1], "topics", "create", "--topic", "orders",
                     "--partitions", "6", "--replication-factor", "3")
        assert out.returncode == 0, out.stderr

        brokers[1].stop()
        wait_for(lambda: (bl := broker_list()) and bl[1]["fenced"], WAIT_S, "broker 1 fenced")

        epoch, leader = _leader_and_epoch(cluster)
        if run.leaders[-1] != (epoch, leader):
            run.leaders.append((epoch, leader))
        run.killed = leader
        run.kill_time_ms = int(time.time() * 1000)
        cluster.kill(leader)
        survivors = set(cluster.nodes) - {leader}
        run.leaders.append(_leader_and_epoch(cluster, survivors))

        brokers[1].start()
        run.broker_epochs[1].append(brokers[1].epoch)
        wait_for(lambda: (bl := broker_list()) and not bl[1]["fenced"], WAIT_S,
                 "broker 1 unfenced")
        out = _admin(cluster, run.leaders[-1][1], "topics", "create", "--topic", "payments",
                     "--partitions", "3", "--replication-factor", "2")
        assert out.returncode == 0, out.stderr

        cluster.start(run.killed)

        def caught_up() -> bool:
            statuses = cluster.statuses()
            ends = {s.log_end_offset for s in statuses.values()}
            marks = {s.high_watermark for s in statuses.values()}
            return len(statuses) == 3 and len(ends) == 1 and marks == ends
        wait_for(caught_up, WAIT_S, "every controller caught up")
        final = _leader_and_epoch(cluster)
        if run.leaders[-1] != final:
            run.leaders.append(final)
        for broker in brokers.values():
            broker.stop()
    finally:
        for broker in brokers.values():
            broker.stop()
        cluster.stop_all()
    return run
