"""Before `format --standalone` or `--initial-controllers`: is a quorum of this cluster already
running?

The protocol cannot tell two quorums of one cluster id apart (spec R3.2): a second
--standalone, or an --initial-controllers run on a controller that has already replicated,
makes an independent quorum or brings back a replica key with an empty disk (KAFKA-14205), and
the old quorum's voters may follow its leader and stop rather than truncate committed records.
So the storage tool asks the bootstrap servers first (briefly: an unreachable one, or one of
another cluster, proves nothing) and refuses when a running quorum says the flag is wrong.
"""

from __future__ import annotations

import time

from kraft.log.meta_properties import StorageError
from kraft.rpc import raft_pb2 as pb
from server.config import NodeConfig
from server.quorum_bootstrap import InitialController, advertised_controller_endpoint
from server.quorum_client import QuorumError, Retryable, call

PROBE_TIMEOUT_S = 1.0
LEADER_WAIT_S = 5.0
_JOIN = ("format it with --no-initial-controllers, start it, and add it with kraft-admin "
         "quorum add-controller")


def _peers(config: NodeConfig) -> list[str]:
    host, port = advertised_controller_endpoint(config)
    own = {f"{host}:{port}", f"localhost:{port}" if host == "127.0.0.1" else ""}
    return [str(ep) for ep in config.bootstrap_servers if str(ep) not in own]


def _ask(config: NodeConfig, endpoint: str, method: str, request: object) -> object | None:
    try:
        return call(endpoint, method, request, config.controller_tls, PROBE_TIMEOUT_S)
    except (QuorumError, Retryable):
        return None  # not running, not a controller of this release: nothing to learn


def running_node(config: NodeConfig, cluster_id: str) -> tuple[str, pb.NodeStatusResponse] | None:
    """The first bootstrap server (other than this node) that runs this cluster."""
    for endpoint in _peers(config):
        status = _ask(config, endpoint, "NodeStatus", pb.NodeStatusRequest())
        if isinstance(status, pb.NodeStatusResponse) and status.cluster_id == cluster_id:
            return endpoint, status
    return None


def _leader_view(config: NodeConfig, endpoint: str) -> pb.DescribeQuorumResponse | None:
    described = _ask(config, endpoint, "DescribeQuorum", pb.DescribeQuorumRequest())
    if isinstance(described, pb.DescribeQuorumResponse) and described.leader_endpoint and (
        described.error_code != 0
    ):
        described = _ask(config, described.leader_endpoint, "DescribeQuorum",
                         pb.DescribeQuorumRequest())
    if isinstance(described, pb.DescribeQuorumResponse) and described.error_code == 0:
        return described
    return None  # no leader yet: the initial controllers are still coming up


def _leader_view_within(
    config: NodeConfig, endpoint: str, wait_s: float
) -> pb.DescribeQuorumResponse | None:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        time.sleep(0.1)  # an election's pace; bounded by the deadline
        described = _leader_view(config, endpoint)
        if described is not None:
            return described
    return None


def check_standalone(config: NodeConfig, cluster_id: str) -> None:
    found = running_node(config, cluster_id)
    if found is not None:
        endpoint, status = found
        raise StorageError(
            f"A controller of cluster {cluster_id} already runs at {endpoint} (node "
            f"{status.node_id}, leader {status.leader_id}): --standalone would start a second "
            f"quorum under the same cluster id. To add node {config.node_id} to that quorum, "
            f"{_JOIN}."
        )


def check_initial_controllers(
    config: NodeConfig, cluster_id: str, controllers: tuple[InitialController, ...]
) -> list[str]:
    """Refuse what is certainly wrong; return warnings for what may be."""
    found = running_node(config, cluster_id)
    if found is None:
        return []
    endpoint, status = found
    described = _leader_view(config, endpoint)
    if described is None and status.high_watermark > 0:
        # A quorum that has committed is between leaders (an election takes a moment).
        described = _leader_view_within(config, endpoint, LEADER_WAIT_S)
        if described is None:
            raise StorageError(
                f"The quorum of cluster {cluster_id} runs (high watermark "
                f"{status.high_watermark} at {endpoint}) but has no leader to say whether node "
                f"{config.node_id}'s key has replicated before: retry once it has one, or "
                f"{_JOIN}."
            )
    if described is None:
        return []  # no leader has ever been elected: the initial controllers are coming up
    listed = {(c.node_id, c.directory_id) for c in controllers}
    running = {(v.replica_id, v.directory_id) for v in described.current_voters}
    if running != listed:
        raise StorageError(
            f"The quorum of cluster {cluster_id} already runs with the voters "
            + ", ".join(f"{i}/{d or '-'}" for i, d in sorted(running))
            + ", not those of --initial-controllers: it is only for the first controllers; "
            f"{_JOIN}."
        )
    own = next((v for v in described.current_voters if v.replica_id == config.node_id), None)
    if own is not None and (own.last_fetch_timestamp >= 0 or own.log_end_offset > 0):
        raise StorageError(
            f"Controller {config.node_id} with directory id {own.directory_id} has already "
            f"replicated the log of cluster {cluster_id} (end offset {own.log_end_offset}): "
            "formatted again with --initial-controllers it would come back with an empty disk "
            "under the same replica key, and its old acknowledgements would still count. "
            f"Format it with --no-initial-controllers, start it, then kraft-admin quorum "
            f"remove-controller -i {config.node_id} -d {own.directory_id} and add-controller."
        )
    if own is not None and described.high_watermark > 0:
        # Not fetched from this leader: never ran, or ran under an earlier leader. Only the
        # operator knows which.
        return [
            f"the quorum of cluster {cluster_id} has committed records (high watermark "
            f"{described.high_watermark}) and node {config.node_id} has not fetched from its "
            f"leader {described.leader_id}: fine if node {config.node_id} has never run; if "
            "this disk replaces one that had replicated, re-format it with "
            "--no-initial-controllers instead, or its old acknowledgements would still count."
        ]
    return []
