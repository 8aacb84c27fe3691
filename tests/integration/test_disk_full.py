"""A full disk in real processes: the quorum stops acknowledging (nothing reported committed
that is not durable), no node dies, and writes resume once space returns."""

from __future__ import annotations

import grpc
import pytest

from harness.cluster import ProcessCluster, wait_for
from kraft.core.errors import Errors

WAIT_S = 15


def with_fault_dirs(cluster: ProcessCluster) -> dict[int, object]:
    dirs = {}
    for node_id, node in cluster.nodes.items():
        directory = cluster.root / f"faults-{node_id}"
        directory.mkdir()
        with node.config_path.open("a") as config:
            config.write(f"internal.test.faults.dir={directory}\n")
        dirs[node_id] = directory
    return dirs


def test_a_full_disk_stalls_writes_and_space_returning_resumes_them(make_cluster) -> None:
    cluster = make_cluster()
    faults = with_fault_dirs(cluster)
    cluster.format()
    cluster.start_all()
    wait_for(cluster.leader, WAIT_S, "a leader")
    before, _ = cluster.append_committed([b"before"])

    for directory in faults.values():
        (directory / "disk-full").touch()
    # The nodes poll their fault directories; an append before they notice is legitimate.
    for node_id in cluster.nodes:
        wait_for(lambda n=node_id: "disk_full=True" in cluster.logs(n), WAIT_S,
                 f"node {node_id} to see its full disk")
    leader = wait_for(cluster.leader, WAIT_S, "a leader")

    # The write that reaches the log while the disk is full is never acknowledged; once
    # the flush has been refused, new appends are refused outright.
    def refused() -> bool:
        try:
            resp = cluster.append(leader, [b"while-full"], timeout_s=1.5)
        except grpc.RpcError:
            return False  # timed out: not acknowledged, as it must be
        if resp.error_code == Errors.NONE:
            pytest.fail("an append was acknowledged while every disk was full")
        return resp.error_code == Errors.KAFKA_STORAGE_ERROR

    wait_for(refused, WAIT_S, "appends to be refused with KAFKA_STORAGE_ERROR")
    assert all(node.alive for node in cluster.nodes.values()), "a full disk killed a node"
    assert cluster.status(leader).high_watermark == before + 1

    for directory in faults.values():
        (directory / "disk-full").unlink()
    after, _ = cluster.append_committed([b"after"], timeout_s=WAIT_S)
    assert after > before
    assert all(node.alive for node in cluster.nodes.values())
