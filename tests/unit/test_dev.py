"""`kraft-server --dev` without processes: its arguments, settings and files, the Metadata probe,
the pytest plugin's registration, and a broker's auto-creation held until it is unfenced."""

from __future__ import annotations

import asyncio
import importlib.metadata
import socket
import struct
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.admin_auto_create import AutoTopicCreator
from metadata.records import ConfigRecord
from metadata.rpc import admin_pb2 as pb
from server import dev, dev_layout, dev_sockets
from server.bootstrap_metadata import read_bootstrap_records
from server.config import load_config


def run_dev(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = dev.main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@pytest.mark.parametrize("brokers", ["0", "17", "-1", "three"])
def test_bad_broker_counts_are_one_line(brokers: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_dev(["--dev", "--brokers", brokers], capsys)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("kraft-server --dev: ")
    assert "--brokers" in err


def test_a_port_in_use_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, err = run_dev(["--dev", "--port", str(port)], capsys)
    assert code == 2
    assert err == (f"kraft-server --dev: cannot listen on 127.0.0.1:{port}: the port is in use "
                   "(another Kafka or kraft-server --dev?); pick another with --port, or "
                   "--port 0 for free ports\n")


def test_a_later_brokers_port_in_use_releases_the_first(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        first = probe.getsockname()[1]
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", first + 1))
        except OSError:
            pytest.skip("the next port is not free here")
        taken.listen()
        code, err = run_dev(["--dev", "--brokers", "2", "--port", str(first)], capsys)
        assert code == 2 and f"127.0.0.1:{first + 1}" in err
    with socket.socket() as again:  # the first port was closed again
        again.bind(("127.0.0.1", first))


def test_other_arguments_are_checked(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_dev(["--dev", "--port", "70000"], capsys)[0] == 2
    code, err = run_dev(["--dev", "--override", "novalue"], capsys)
    assert code == 2 and "KEY=VALUE" in err


def test_kraft_server_without_dev_runs_a_node_from_its_file(capsys: pytest.CaptureFixture[str],
                                                           tmp_path: Path) -> None:
    code, err = run_dev([str(tmp_path / "missing.properties")], capsys)
    assert code == 2 and "does not exist" in err


@pytest.mark.parametrize(("brokers", "replicas", "min_isr"), [(1, "1", "1"), (2, "2", "2"),
                                                            (3, "3", "2"), (5, "3", "2")])
def test_replication_fits_the_brokers(brokers: int, replicas: str, min_isr: str) -> None:
    node, cluster = dev_layout.dev_settings(brokers)
    assert node["offsets.topic.replication.factor"] == replicas
    assert node["offsets.topic.num.partitions"] == str(brokers)
    # The transaction coordinator's topic too: a transactional producer on one node works.
    assert node["transaction.state.log.replication.factor"] == replicas
    assert node["transaction.state.log.min.isr"] == min_isr
    assert node["transaction.state.log.num.partitions"] == str(brokers)
    assert cluster == {"default.replication.factor": replicas, "min.insync.replicas": min_isr}


def test_overrides_split_into_node_and_cluster_settings() -> None:
    node, cluster = dev_layout.split_overrides({"min.insync.replicas": "1",
                                                "replica.lag.time.max.ms": "500"})
    assert node == {"replica.lag.time.max.ms": "500"}
    assert cluster == {"min.insync.replicas": "1"}


def test_prepare_formats_a_controller_and_brokers(tmp_path: Path) -> None:
    layout = dev_layout.prepare(tmp_path / "c", 3, [9101, 9102, 9103],
                                {"min.insync.replicas": "1", "num.partitions": "4"})
    assert layout.broker_ids == [1, 2, 3] and layout.start_order == [0, 1, 2, 3]
    assert layout.bootstrap_servers == "127.0.0.1:9101,127.0.0.1:9102,127.0.0.1:9103"
    controller = load_config(layout.nodes[0].config_path)
    assert controller.process_roles == {"controller"} and not controller.is_broker
    broker = load_config(layout.nodes[2].config_path)
    assert broker.process_roles == {"broker"}
    assert [(n.host, n.port) for n in broker.listeners.values()] == [("127.0.0.1", 9102)]
    assert set(read_bootstrap_records(controller)) == {
        ConfigRecord(4, "", "default.replication.factor", "3"),
        ConfigRecord(4, "", "min.insync.replicas", "1"),
        ConfigRecord(4, "", "num.partitions", "4")}
    # Started again from the same directory: the same cluster, no second format.
    again = dev_layout.prepare(tmp_path / "c", 3, [9101, 9102, 9103], {})
    assert again.cluster_id == layout.cluster_id
    with pytest.raises(dev_layout.LayoutError, match="holds a dev cluster of 3 broker"):
        dev_layout.prepare(tmp_path / "c", 1, [9101], {})


def test_one_broker_is_one_combined_node(tmp_path: Path) -> None:
    layout = dev_layout.prepare(tmp_path / "c", 1, [9101], {})
    assert list(layout.nodes) == [1] and layout.controller_id == 1
    assert load_config(layout.nodes[1].config_path).process_roles == {"broker", "controller"}


def test_a_bad_override_or_a_foreign_directory_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(dev_layout.LayoutError, match=r"replica\.lag\.time\.max\.ms"):
        dev_layout.prepare(tmp_path / "a", 1, [9101], {"replica.lag.time.max.ms": "soon"})
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "notes.txt").write_text("mine")
    with pytest.raises(dev_layout.LayoutError, match="holds no dev cluster"):
        dev_layout.prepare(tmp_path / "b", 1, [9101], {})


def _metadata_v1_response(correlation_id: int, brokers: list[tuple[int, str, int]]) -> bytes:
    body = struct.pack(">ii", correlation_id, len(brokers))
    for node_id, host, port in brokers:
        body += struct.pack(">ih", node_id, len(host)) + host.encode() + struct.pack(">i", port)
        body += struct.pack(">h", -1)  # rack: null
    body += struct.pack(">ii", 1, 0)  # controller id, no topics
    return body


def test_the_probe_reads_the_brokers_a_metadata_answer_lists() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]
        received: list[bytes] = []

        def answer() -> None:
            connection, _ = server.accept()
            with connection:
                size = struct.unpack(">i", connection.recv(4))[0]
                received.append(connection.recv(size))
                reply = _metadata_v1_response(1, [(1, "127.0.0.1", 9092), (3, "h", 1)])
                connection.sendall(struct.pack(">i", len(reply)) + reply)

        thread = threading.Thread(target=answer)
        thread.start()
        assert dev_sockets.listed_brokers("127.0.0.1", port, 5.0) == {1, 3}
        thread.join()
    api_key, version, correlation_id = struct.unpack_from(">hhi", received[0])
    assert (api_key, version, correlation_id) == (3, 1, 1)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        free = closed.getsockname()[1]
    assert dev_sockets.listed_brokers("127.0.0.1", free, 1.0) is None


def test_the_pytest_plugin_is_registered_and_light() -> None:
    plugins = {ep.value for ep in importlib.metadata.entry_points(group="pytest11")}
    assert "server.dev_pytest" in plugins
    scripts = {ep.name: ep.value for ep in importlib.metadata.entry_points(
        group="console_scripts")}
    assert scripts["kraft-server"] == "server.dev:main"
    # Loaded into every pytest run of a project that installs kraft-quorum: pytest, and the
    # server package's 2 ms of kio (its phantom types module, server/__init__.py).
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, server.dev_pytest; print(sorted(m for m in "
         "('grpc', 'kio.index', 'broker', 'metadata', 'server.dev_cluster') "
         "if m in sys.modules))"],
        capture_output=True, text=True, timeout=60, check=True).stdout
    assert loaded.strip() == "[]"


class RecordingAdmin:
    def __init__(self) -> None:
        self.calls: list[str] = []

    async def call(self, method: str, request: Any) -> Any:
        self.calls.append(method)
        return pb.CreateTopicsResponse(status=pb.ResponseStatus(), topics=[
            pb.CreatableTopicResult(name=t.name) for t in request.topics])


def test_auto_creation_waits_until_the_broker_is_unfenced() -> None:
    async def scenario() -> None:
        admin = RecordingAdmin()
        creator = AutoTopicCreator(admin, enabled=True, wait_unfenced=True)  # type: ignore[arg-type]
        creator.create(["orders"])
        for _ in range(5):
            await asyncio.sleep(0)
        assert admin.calls == [] and creator.in_flight == {"orders"}
        creator.unfenced.set()
        while creator.in_flight:
            await asyncio.sleep(0)
        assert admin.calls == ["CreateTopics"]
        await creator.close()

    asyncio.run(scenario())
