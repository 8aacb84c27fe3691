"""A dev cluster for a Python program or a test: `server.dev.cluster(brokers=3)` and the pytest
fixture `kafka_cluster` (server/dev_pytest.py) hand out a DevCluster.

It runs `kraft-server --dev --control` (server/dev_supervisor.py) as a child and speaks JSON
lines with it: the supervisor forks the nodes and kills, pauses, resumes and restarts them on
request. Topics, leaders and ISRs are read from the controller's gRPC Admin API. When this
process ends, however it ends, the supervisor sees its stdin close (or its parent change) and
removes the cluster; each node dies with the supervisor (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import grpc

from metadata.rpc import admin_pb2 as pb
from metadata.rpc import admin_pb2_grpc as admin_rpc

T = TypeVar("T")
ADMIN_TIMEOUT_S = 10.0
NONE = 0


class DevClusterError(Exception):
    """The dev cluster could not do what was asked (one line, with the log to read)."""


class DevCluster:
    """A running dev cluster: where to connect, admin helpers, and faults on demand."""

    def __init__(self, process: subprocess.Popen[bytes], ready: dict[str, Any],
                 stderr: IO[bytes]) -> None:
        self._process = process
        self._stderr = stderr
        self.bootstrap_servers: str = ready["bootstrap_servers"]
        self.controller: str = ready["controller"]  # host:port of the gRPC Admin API
        self.controller_id: int = int(ready["controller_id"])
        self.cluster_id: str = ready["cluster_id"]
        self.data_dir = Path(ready["data_dir"])
        self.brokers: dict[int, str] = {int(k): v["kafka"] for k, v in ready["brokers"].items()}
        self.logs: dict[int, Path] = {int(k): Path(v) for k, v in ready["logs"].items()}
        self.start_seconds: float = float(ready["seconds"])
        self.pids: dict[int, int] = {int(k): int(v) for k, v in ready["pids"].items()}
        self.stopped: set[int] = set()  # killed or terminated, not started again
        self.paused: set[int] = set()
        self._channel = grpc.insecure_channel(self.controller)
        self._admin = admin_rpc.AdminStub(self._channel)

    @property
    def broker_ids(self) -> list[int]:
        return sorted(self.brokers)

    # -- faults ----------------------------------------------------------------------------------

    def _command(self, op: str, node_id: int, timeout_s: float = 60.0) -> dict[str, Any]:
        assert self._process.stdin is not None and self._process.stdout is not None
        request = {"op": op, "id": node_id, "timeout": timeout_s}
        try:
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            self._process.stdin.flush()
            line = self._process.stdout.readline()
        except (BrokenPipeError, OSError):
            line = b""
        if not line:
            raise DevClusterError(f"the dev cluster has stopped: {self._stderr_tail()}")
        reply: dict[str, Any] = json.loads(line)
        if not reply.get("ok"):
            raise DevClusterError(f"{op} {node_id}: {reply.get('error')}")
        return reply

    def kill_broker(self, broker_id: int) -> None:
        """kill -9 the broker's process; returns once it is gone (its port refuses)."""
        self._command("kill", broker_id)
        self.stopped.add(broker_id)
        self.paused.discard(broker_id)

    def stop_broker(self, broker_id: int, timeout_s: float = 40.0) -> int:
        """SIGTERM: a controlled shutdown (its leaderships moved first); its exit code."""
        code = int(self._command("terminate", broker_id, timeout_s)["code"])
        self.stopped.add(broker_id)
        self.paused.discard(broker_id)
        return code

    def pause_broker(self, broker_id: int) -> None:
        """SIGSTOP: the process holds its connections but answers nothing."""
        self._command("pause", broker_id)
        self.paused.add(broker_id)

    def resume_broker(self, broker_id: int) -> None:
        self._command("resume", broker_id)
        self.paused.discard(broker_id)

    def start_broker(self, broker_id: int, timeout_s: float = 60.0) -> None:
        """Start a killed or stopped broker again on its port and data; returns once it
        answers Kafka clients, unfenced."""
        reply = self._command("start", broker_id, timeout_s)
        self.pids[broker_id] = int(reply["pid"])
        self.stopped.discard(broker_id)

    def restart_broker(self, broker_id: int, graceful: bool = False,
                       timeout_s: float = 60.0) -> None:
        """kill -9 (or, `graceful`, SIGTERM) and start again."""
        if broker_id not in self.stopped:
            if graceful:
                self.stop_broker(broker_id)
            else:
                self.kill_broker(broker_id)
        self.start_broker(broker_id, timeout_s)

    def heal(self) -> None:
        """Resume paused brokers and start stopped ones (a shared cluster between tests)."""
        for broker_id in sorted(self.paused):
            self.resume_broker(broker_id)
        for broker_id in sorted(self.stopped):
            self.start_broker(broker_id)

    # -- admin -----------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                     config: Mapping[str, str] | None = None, wait_s: float = 30.0) -> None:
        """Create `name` (replication_factor -1: the cluster's default, which fits its
        brokers) and wait until every partition has a leader."""
        topic = pb.CreatableTopic(
            name=name, num_partitions=partitions, replication_factor=replication_factor,
            configs=[pb.ConfigValue(name=k, value=v) for k, v in (config or {}).items()])
        reply = self._admin.CreateTopics(pb.CreateTopicsRequest(topics=[topic]),
                                         timeout=ADMIN_TIMEOUT_S)
        if reply.status.error_code != NONE:
            raise DevClusterError(f"create {name}: {reply.status.error_message}")
        for result in reply.topics:
            if result.error_code != NONE:
                raise DevClusterError(f"create {name}: {result.error_message or result.error_code}")
        self.wait_for(lambda: all(self.leader_of(name, p) is not None for p in range(partitions)),
                      wait_s, f"leaders for {name}")

    def describe_topic(self, name: str) -> pb.TopicDescription:
        reply = self._admin.DescribeTopics(pb.DescribeTopicsRequest(names=[name]),
                                           timeout=ADMIN_TIMEOUT_S)
        if reply.status.error_code != NONE or not reply.topics:
            raise DevClusterError(f"describe {name}: {reply.status.error_message}")
        description: pb.TopicDescription = reply.topics[0]
        return description

    def _partition(self, topic: str, partition: int) -> pb.PartitionDescription | None:
        description = self.describe_topic(topic)
        if description.error_code != NONE:
            return None
        return next((p for p in description.partitions if p.partition_index == partition), None)

    def leader_of(self, topic: str, partition: int = 0) -> int | None:
        """The partition's leader as the controller has it, or None (no leader, no topic)."""
        found = self._partition(topic, partition)
        return found.leader if found is not None and found.leader >= 0 else None

    def isr_of(self, topic: str, partition: int = 0) -> list[int]:
        found = self._partition(topic, partition)
        return sorted(found.isr) if found is not None else []

    def wait_isr(self, topic: str, partition: int, size: int,
                 timeout_s: float = 30.0) -> list[int]:
        """Until the partition's ISR has `size` members; the ISR."""
        def isr() -> list[int]:
            members = self.isr_of(topic, partition)
            return members if len(members) == size else []

        return self.wait_for(isr, timeout_s, f"{topic}-{partition} with {size} in-sync replicas")

    def wait_leader(self, topic: str, partition: int = 0, *, not_on: int | None = None,
                    timeout_s: float = 30.0) -> int:
        """Until the partition has a leader (other than `not_on`); the leader."""
        def leader() -> int | None:
            found = self.leader_of(topic, partition)
            return found if found != not_on else None

        found = self.wait_for(leader, timeout_s,
                              f"a leader of {topic}-{partition} other than {not_on}")
        assert found is not None  # wait_for returns only a truthy value
        return found

    def wait_for(self, condition: Callable[[], T], timeout_s: float, what: str) -> T:
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                value = condition()
                if value:
                    return value
            except grpc.RpcError:
                pass
            if time.monotonic() > deadline:
                raise DevClusterError(f"timed out after {timeout_s} s waiting for {what}")
            time.sleep(0.02)  # the condition is polled every 20 ms

    # -- life ------------------------------------------------------------------------------------

    def _stderr_tail(self) -> str:
        try:
            self._stderr.seek(0)
            return self._stderr.read().decode(errors="replace").strip()[-2000:]
        except (OSError, ValueError):
            return ""

    def close(self, timeout_s: float = 60.0) -> None:
        """Stop every node and remove the data (unless it was given)."""
        self._channel.close()
        if self._process.stdin is not None:
            try:
                self._process.stdin.close()  # the supervisor stops when its stdin closes
            except OSError:
                pass
        try:
            self._process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()
        self._stderr.close()

    def __enter__(self) -> DevCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def launch(brokers: int = 1, *, overrides: Mapping[str, str] | None = None,
           data: str | Path | None = None, port: int = 0,
           start_timeout_s: float = 60.0) -> DevCluster:
    """Start a dev cluster and return it running (every broker unfenced)."""
    command = [sys.executable, "-m", "server.dev", "--dev", "--control",
               "--brokers", str(brokers), "--port", str(port)]
    if data is not None:
        command += ["--data", str(data)]
    for key, value in (overrides or {}).items():
        command += ["--override", f"{key}={value}"]
    stderr = tempfile.TemporaryFile()  # noqa: SIM115  # the DevCluster closes it
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=stderr, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert process.stdout is not None
    line = _read_line(process.stdout, start_timeout_s)
    ready = json.loads(line) if line else {}
    if ready.get("event") != "ready":
        process.kill()
        process.wait()
        stderr.seek(0)
        detail = ready.get("error") or stderr.read().decode(errors="replace").strip()
        stderr.close()
        raise DevClusterError(f"the dev cluster did not start: {detail}")
    return DevCluster(process, ready, stderr)


def _read_line(stream: IO[bytes], timeout_s: float) -> bytes:
    """One line, or b"" if none comes within `timeout_s` (the supervisor's own start-up
    deadline is shorter; this only guards against a hung one)."""
    import selectors

    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        if not selector.select(timeout_s + 10):
            return b""
    return stream.readline()


@contextmanager
def start_cluster(brokers: int = 1, **kwargs: Any) -> Iterator[DevCluster]:
    cluster = launch(brokers, **kwargs)
    try:
        yield cluster
    finally:
        cluster.close()
