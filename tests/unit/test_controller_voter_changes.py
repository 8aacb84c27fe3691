"""The active controller predicts the offsets of its writes; a voter change makes the Raft
layer append a control batch of its own. It must land after every record the controller
submitted before it, and the controller must skip its offsets (RaftClient.submit,
control_records_appended): otherwise the controller renounces ('records landed at 6,
expected 4', seen on real processes) and every voter change costs an election."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from kraft.core.config import RaftConfig
from kraft.core.messages import UpdateRaftVoterRequest
from kraft.core.voters import ReplicaKey, VoterNode, VoterSet, bootstrap_control_records
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.log.snapshots import BOOTSTRAP_SNAPSHOT_ID, MemorySnapshotStore
from kraft.node.raft_node import RaftNode
from tests.unit.controller_harness import attach_controller
from tests.unit.test_metadata_controller import _until, register

DIR = "dir-1-aaaaaaaaaaaaaaaaaaaa"


def _standalone(tmp_path: Path) -> RaftNode:
    snapshots = MemorySnapshotStore()
    voters = VoterSet.of([VoterNode(ReplicaKey(1, DIR), "127.0.0.1:1")])
    snapshots.builder(
        BOOTSTRAP_SNAPSHOT_ID, 0, control_records=bootstrap_control_records(voters)
    ).freeze()
    config = RaftConfig("c", 1, {}, local_endpoint="127.0.0.1:1",
                        bootstrap=((-2, "127.0.0.1:1"),), directory_id=DIR, controller=True)
    return RaftNode(config, SegmentedLog(tmp_path / "log"), QuorumStateStore(tmp_path / "qs"),
                    rng=random.Random(1), snapshots=snapshots)


def test_writes_land_where_predicted_around_voter_changes(tmp_path: Path) -> None:
    asyncio.run(_writes_around_voter_changes(tmp_path))


async def _writes_around_voter_changes(tmp_path: Path) -> None:
    node = _standalone(tmp_path)
    controller = attach_controller(node, noop_interval_ms=0)
    await node.start()
    try:
        await _until(lambda: controller.is_active)
        await controller.write(lambda _image: register(1))
        core = node.core
        assert core is not None
        for broker in range(2, 6):
            write = asyncio.ensure_future(controller.write(lambda _i, b=broker: register(b)))
            await asyncio.sleep(0)  # the write ran its rule and submitted its records
            # A voter change handled before the records reach the log: what
            # RaftNode.handle_request does before its first await.
            update = UpdateRaftVoterRequest("c", core.epoch, 1, DIR, f"127.0.0.1:{broker}")
            node._drain_before_control_batch()
            token = 10**6 + broker
            node._guarded(lambda c, u=update, t=token: c.handle_request(  # type: ignore[misc]
                t, u, int(time.monotonic() * 1000)))
            await write  # NotControllerError here if the offsets moved under it
            await _until(lambda: core.high_watermark > (core.voter_history.latest_offset() or 0))
        assert node.control_records_appended() >= 2 * 4  # each change: KRaftVersion + Voters
        assert controller.is_active
    finally:
        await node.stop()
