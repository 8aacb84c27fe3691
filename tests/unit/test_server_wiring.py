"""How kraft-server turns a role config and its storage into the Raft node's config (KIP-853:
the replica key, the controller flag, static voters or bootstrap servers) and what it says
at start-up about where the voter set comes from."""

from __future__ import annotations

import asyncio
import logging
import random
import socket
from collections.abc import Callable
from pathlib import Path

import pytest

from kraft.client import ControllerEndpoints, OffsetAndEpoch
from kraft.core.voters import ReplicaKey
from kraft.log.meta_properties import read_meta_properties
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.log.snapshots import FileSnapshotStore
from kraft.node.raft_node import RaftNode
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE
from metadata.records import FeatureLevelRecord, TopicRecord
from metadata.topics import METADATA_PARTITION_DIR
from server.config import NodeConfig, load_config
from server.main import (
    Server,
    StartupError,
    _check_quorum_storage,
    metadata_directory_id,
    raft_config,
)
from server.storage_cli import main as storage_main
from snapshots.writer import write_image_snapshot

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
D1 = "3DOJ8GF4TLuIQcDdnvI4dQ"


def node(tmp_path: Path, text: str, *flags: str) -> NodeConfig:
    """A config whose log dir is tmp_path/data, formatted with `flags` (unless flags is
    ("none",))."""
    path = tmp_path / "node.properties"
    path.write_text(text + f"log.dirs={tmp_path / 'data'}\n")
    if flags != ("none",):
        assert storage_main(["format", "-t", CLUSTER, "-c", str(path), *flags]) == 0
    return load_config(path)


STATIC = ("process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093,"
          "2@127.0.0.1:9094\nlisteners=CONTROLLER://127.0.0.1:9093\n"
          "controller.listener.names=CONTROLLER\n")
DYNAMIC = ("process.roles=controller\nnode.id=2\ncontroller.quorum.bootstrap.servers="
           "127.0.0.1:9093,127.0.0.1:9094\nlisteners=CTRL://127.0.0.1:9094\n"
           "controller.listener.names=CTRL\n")
SOLO = ("process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:{port}\n"
        "listeners=CONTROLLER://127.0.0.1:{port}\ncontroller.listener.names=CONTROLLER\n")
BROKER = ("process.roles=broker\nnode.id=7\ncontroller.quorum.bootstrap.servers=127.0.0.1:9093\n"
          "listeners=PLAINTEXT://127.0.0.1:9092\ncontroller.listener.names=CONTROLLER\n")


def test_a_static_controller(tmp_path: Path) -> None:
    config = node(tmp_path, STATIC)
    raft = raft_config(config, CLUSTER, metadata_directory_id(config))
    assert dict(raft.voters) == {1: "127.0.0.1:9093", 2: "127.0.0.1:9094"}
    assert (raft.node_id, raft.controller, raft.bootstrap) == (1, True, ())
    assert raft.local_endpoint == "127.0.0.1:9093" and raft.listener == "CONTROLLER"
    meta = read_meta_properties(str(tmp_path / "data"))
    assert meta is not None and raft.directory_id == meta.directory_id


def test_a_dynamic_controller_joining_later(tmp_path: Path) -> None:
    config = node(tmp_path, DYNAMIC, "-N")
    raft = raft_config(config, CLUSTER, metadata_directory_id(config))
    assert dict(raft.voters) == {}
    assert raft.bootstrap == ((-2, "127.0.0.1:9093"), (-3, "127.0.0.1:9094"))
    assert (raft.controller, raft.listener, raft.local_endpoint) == (
        True, "CTRL", "127.0.0.1:9094")
    assert raft.directory_id and raft.directory_id != D1


def test_an_initial_controller_is_its_listed_key(tmp_path: Path) -> None:
    config = node(tmp_path, DYNAMIC, "-I", f"2@127.0.0.1:9094:{D1}")
    assert raft_config(config, CLUSTER, metadata_directory_id(config)).directory_id == D1


def test_a_bootstrap_only_broker_is_an_observer(tmp_path: Path) -> None:
    config = node(tmp_path, BROKER)
    raft = raft_config(config, CLUSTER, metadata_directory_id(config))
    assert (dict(raft.voters), raft.controller, raft.local_endpoint) == ({}, False, "")
    assert raft.bootstrap == ((-2, "127.0.0.1:9093"),)


def test_an_unformatted_metadata_directory_has_no_replica_key(tmp_path: Path) -> None:
    config = node(tmp_path, STATIC, "none")
    with pytest.raises(StartupError, match=r"has no directory\.id"):
        metadata_directory_id(config)


def test_startup_says_where_the_voters_come_from(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="server")
    joining = tmp_path / "joining"
    joining.mkdir()
    _check_quorum_storage(node(joining, DYNAMIC, "-N"))
    assert "learns the voter set from the quorum" in caplog.text
    assert "quorum add-controller --command-config" in caplog.text
    caplog.clear()
    standalone = tmp_path / "standalone"
    standalone.mkdir()
    config = node(standalone, DYNAMIC, "-s")
    _check_quorum_storage(config)
    assert caplog.text == ""
    # A static config on storage formatted with a bootstrap voter set: voters ignored.
    static = load_config(_rewrite(config, STATIC))
    _check_quorum_storage(static)
    assert "controller.quorum.voters is ignored" in caplog.text
    assert [r.levelno for r in caplog.records] == [logging.WARNING]


def _rewrite(config: NodeConfig, text: str) -> Path:
    path = Path(config.source)
    path.write_text(text + f"log.dirs={config.metadata_log_dir}\n")
    return path


def test_a_standalone_controller_leads_its_bootstrap_voter_set(tmp_path: Path) -> None:
    """format --standalone, then the node as kraft-server builds it: it elects itself from
    the bootstrap snapshot alone (no static voters) and the Admin services hand out its
    endpoint from the live voter set."""
    config = node(tmp_path, DYNAMIC, "--standalone")
    directory = metadata_directory_id(config)
    partition = tmp_path / "data" / "__cluster_metadata-0"
    raft_node = RaftNode(raft_config(config, CLUSTER, directory),
                         SegmentedLog(partition), QuorumStateStore(partition / "quorum-state"),
                         snapshots=FileSnapshotStore(partition), rng=random.Random(1))

    async def scenario() -> None:
        await raft_node.start()
        try:
            await asyncio.wait_for(_until(lambda: raft_node.status().state == "Leader"), 10)
            assert raft_node.kraft_version() == 1
            assert raft_node.voters().key_of(2) == ReplicaKey(2, directory)
            assert dict(ControllerEndpoints(raft_node)) == {2: "127.0.0.1:9094"}
        finally:
            await raft_node.stop()

    asyncio.run(scenario())


async def _until(condition: Callable[[], bool]) -> None:
    while not condition():
        await asyncio.sleep(0.001)  # yields to the node's tasks; bounded by wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_restarting_controller_has_its_snapshot_image_before_it_joins_the_quorum(
    tmp_path: Path,
) -> None:
    """A voter that joined the quorum while its loader still replayed the snapshot (seconds
    at a million partitions) could win an election and lead with no active controller."""
    port = free_port()
    config = node(tmp_path, SOLO.format(port=port))
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(FeatureLevelRecord("metadata.version", 21), 0, 1, 1000)
    delta.replay(TopicRecord("orders", "AAAAAAAAAAAAAAAAAAAAAA"), 1, 1, 1000)
    snapshot_id = OffsetAndEpoch(2, 1)
    store = FileSnapshotStore(Path(config.metadata_log_dir) / METADATA_PARTITION_DIR)
    write_image_snapshot(store, delta.apply(), snapshot_id, 1000)
    server = Server(config)
    loader = server.loader
    assert loader is not None
    # What the loader holds when the Raft listener opens (peers' requests can arrive from
    # then on) and when the node joins the quorum.
    joined: list[tuple[OffsetAndEpoch, bool]] = []
    real_listen = server._start_controller_listener
    real_start = server.node.start

    async def listen() -> None:
        joined.append((loader.applied, loader.loading_snapshot))
        await real_listen()

    async def start() -> None:
        joined.append((loader.applied, loader.loading_snapshot))
        await real_start()

    server._start_controller_listener = listen  # type: ignore[method-assign]
    server.node.start = start  # type: ignore[method-assign]

    async def run() -> None:
        await server.start()
        try:
            assert joined == [(snapshot_id, False)] * 2
            assert loader.image.topic("orders") is not None
        finally:
            await server.stop(graceful=False)

    asyncio.run(run())


def test_a_restarting_broker_publishes_its_snapshot_image_before_its_node_starts(
    tmp_path: Path,
) -> None:
    """The broker's cache publisher asks the Raft client for its high watermark on every
    image; the snapshot's image comes before the node starts (the node answers 0 then), and
    a broker with a snapshot on disk must still start."""
    port, controller = free_port(), free_port()
    config = node(tmp_path, (
        f"process.roles=broker\nnode.id=7\ncontroller.quorum.bootstrap.servers=127.0.0.1:"
        f"{controller}\nlisteners=PLAINTEXT://127.0.0.1:{port}\n"
        "controller.listener.names=CONTROLLER\n"))
    delta = MetadataDelta(EMPTY_IMAGE)
    delta.replay(FeatureLevelRecord("metadata.version", 21), 0, 1, 1000)
    delta.replay(TopicRecord("orders", "AAAAAAAAAAAAAAAAAAAAAA"), 1, 1, 1000)
    store = FileSnapshotStore(Path(config.metadata_log_dir) / METADATA_PARTITION_DIR)
    write_image_snapshot(store, delta.apply(), OffsetAndEpoch(2, 1), 1000)
    server = Server(config)

    async def run() -> None:
        await server.start()
        try:
            assert server.loader is not None
            assert server.loader.image.topic("orders") is not None
        finally:
            await server.stop(graceful=False)

    asyncio.run(run())
