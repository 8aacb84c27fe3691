"""`make demo`: a three-controller quorum from config/, a leader killed, a new one elected.

Formats ./demo-data for the nodes in config/controller-{1,2,3}.properties, starts them as real
processes, shows `kraft-admin quorum describe`, writes a cluster config through the Admin API
and reads it back, kills the leader with SIGKILL, shows the new leader, how long the election
took and that it holds the metadata, restarts the old leader, and stops everything with
SIGTERM. Node logs are in ./demo-data/logs.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc

from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from kraft.server.config import load_config
from kraft.server.meta_properties import random_uuid

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [ROOT / "config" / f"controller-{i}.properties" for i in (1, 2, 3)]
DATA = ROOT / "demo-data"


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def admin(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "kraft.server.admin_cli", *args], check=True, cwd=ROOT)


def leader_of(endpoints: list[str]) -> tuple[int, int] | None:
    """(leader id, epoch) when every reachable node agrees on a leader that says it leads."""
    views = []
    for endpoint in endpoints:
        try:
            with grpc.insecure_channel(endpoint) as channel:
                views.append(rpc.QuorumStub(channel).NodeStatus(pb.NodeStatusRequest(), timeout=1))
        except grpc.RpcError:
            continue
    if not views or len({(v.leader_id, v.epoch) for v in views}) != 1:
        return None
    leader = views[0].leader_id
    if leader < 0 or not any(v.node_id == leader and v.state == "Leader" for v in views):
        return None
    return leader, views[0].epoch


def wait_leader(endpoints: list[str], timeout_s: float = 20) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = leader_of(endpoints)
        if found:
            return found
        time.sleep(0.01)  # poll interval of a bounded condition wait
    raise SystemExit(f"no leader within {timeout_s} s; see {DATA / 'logs'}")


def main() -> int:
    configs = {load_config(path).node_id: (path, load_config(path)) for path in CONFIGS}
    endpoints = {nid: str(cfg.controller_listener.endpoint) for nid, (_, cfg) in configs.items()}
    shutil.rmtree(DATA, ignore_errors=True)
    (DATA / "logs").mkdir(parents=True)
    cluster_id = random_uuid()
    banner(f"Formatting storage for cluster {cluster_id}")
    for path, _ in configs.values():
        subprocess.run([sys.executable, "-m", "kraft.server.storage_cli", "format", "-t",
                        cluster_id, "-c", str(path)], check=True, cwd=ROOT)

    processes: dict[int, subprocess.Popen[bytes]] = {}

    def start(node_id: int) -> None:
        log = (DATA / "logs" / f"controller-{node_id}.log").open("ab")
        processes[node_id] = subprocess.Popen(
            [sys.executable, "-m", "kraft.server.main", str(configs[node_id][0])],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
        )

    try:
        banner("Starting three controllers")
        for node_id in sorted(configs):
            start(node_id)
            print(f"controller {node_id} on {endpoints[node_id]} (pid {processes[node_id].pid})")
        leader, epoch = wait_leader(list(endpoints.values()))
        print(f"leader: controller {leader} in epoch {epoch}")
        any_node = endpoints[min(endpoints)]
        banner(f"kraft-admin --bootstrap-server {any_node} quorum describe --status")
        admin("--bootstrap-server", any_node, "quorum", "describe", "--status")
        banner(f"kraft-admin --bootstrap-server {any_node} quorum describe --replication")
        admin("--bootstrap-server", any_node, "quorum", "describe", "--replication",
              "--human-readable")
        banner("The metadata layer: a config write through any controller, read back")
        admin("--bootstrap-server", any_node, "configs", "alter", "--entity-type", "brokers",
              "--entity-default", "--add-config", "num.partitions=3")
        admin("--bootstrap-server", any_node, "configs", "describe", "--entity-type",
              "brokers", "--entity-default")
        admin("--bootstrap-server", any_node, "features", "describe")

        banner(f"kill -9 of the leader, controller {leader}")
        killed_at = time.monotonic()
        processes[leader].send_signal(signal.SIGKILL)
        processes[leader].wait()
        survivors = [ep for nid, ep in endpoints.items() if nid != leader]
        new_leader, new_epoch = wait_leader(survivors)
        print(f"new leader: controller {new_leader} in epoch {new_epoch}, elected "
              f"{(time.monotonic() - killed_at) * 1000:.0f} ms after the kill")
        admin("--bootstrap-server", survivors[0], "quorum", "describe", "--status")
        # The new active controller holds the committed metadata: no reload.
        admin("--bootstrap-server", survivors[0], "configs", "describe", "--entity-type",
              "brokers", "--entity-default")

        banner(f"Restarting controller {leader}: it rejoins as a follower")
        start(leader)
        deadline = time.monotonic() + 20
        while leader_of(list(endpoints.values())) is None and time.monotonic() < deadline:
            time.sleep(0.05)  # poll interval of a bounded condition wait
        admin("--bootstrap-server", any_node, "quorum", "describe", "--replication")
    finally:
        banner("Stopping every controller with SIGTERM")
        for proc in processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for node_id, proc in processes.items():
            try:
                code = proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                code = proc.wait()
            print(f"controller {node_id} exited with {code}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
