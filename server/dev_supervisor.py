"""The process behind `kraft-server --dev`: it formats the dev cluster, forks its nodes, watches
them and removes what it created when it stops.

The nodes are forked from this process once it has imported the node's modules, so N brokers
cost one import, not N + 1 (on two cores, most of a broker's start). A forked node runs
`server.main.main(config)` as `kraft-server CONFIG` does. Before forking this process starts
no thread, event loop or gRPC object; each node gets its own Kafka socket only, /dev/null as
stdin, its log file as stdout and stderr, a process group of its own (Ctrl-C in a terminal
reaches the supervisor alone, which stops the brokers before the controller) and SIGKILL when
the supervisor dies. With --control (server/dev_cluster.py) commands come as JSON lines on
stdin; the supervisor stops when stdin closes or its parent is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import select
import shutil
import signal
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from server import dev_layout
from server.dev_layout import DevLayout, DevNode
from server.dev_sockets import bind_kafka_ports, listed_brokers

START_TIMEOUT_S = 60.0
GRACEFUL_STOP_S = 40.0  # a broker's controlled shutdown is bounded at 30 s (server/main.py)
PR_SET_PDEATHSIG = 1


def _die_with_parent(sig: int) -> None:
    """Linux: the kernel sends `sig` to this process when its parent exits."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, sig)


class Supervisor:
    def __init__(self, layout: DevLayout, sockets: dict[int, socket.socket],
                 keep: bool) -> None:
        self.layout = layout
        self.sockets = sockets  # node id -> its Kafka socket, until the node is forked
        self.keep = keep  # --data: stop gracefully and leave the directory
        self.pids: dict[int, int] = {}
        self.paused: set[int] = set()
        self.exits: dict[int, int] = {}  # node id -> exit status of a node that ended
        self.stopping = False

    # -- nodes -----------------------------------------------------------------------------------

    def start(self, node_id: int) -> None:
        node = self.layout.nodes[node_id]
        if node_id in self.pids:
            raise ValueError(f"node {node_id} is running")
        if node.kafka_port and node_id not in self.sockets:
            # Bound again before the fork: the port was closed when the node died.
            self.sockets[node_id] = bind_kafka_ports([node.kafka_port])[0]
        sys.stdout.flush()
        sys.stderr.flush()
        supervisor = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                self._become(node, supervisor)
            finally:
                os._exit(70)
        self.pids[node_id] = pid
        self.exits.pop(node_id, None)
        own = self.sockets.pop(node_id, None)
        if own is not None:
            own.close()  # the node holds it: once it dies the port refuses connections

    def _become(self, node: DevNode, supervisor: int) -> None:
        """In the forked child: become `kraft-server node.config_path`."""
        _die_with_parent(signal.SIGKILL)
        if os.getppid() != supervisor:
            os._exit(70)
        os.setpgid(0, 0)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        own = self.sockets.get(node.node_id)
        for other in self.sockets.values():
            if other is not own:
                other.close()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        output = os.open(node.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(output, 1)
        os.dup2(output, 2)
        if own is not None:
            from broker.kafka.connection_limits import inherit_listening_socket

            inherit_listening_socket(dev_layout.HOST, node.kafka_port, own)
        from server.main import main as node_main

        os._exit(node_main([str(node.config_path)]))

    def signal(self, node_id: int, sig: int) -> None:
        pid = self.pids.get(node_id)
        if pid is None:
            raise ValueError(f"node {node_id} is not running")
        os.kill(pid, sig)

    def kill(self, node_id: int) -> None:
        """kill -9, and wait for the process to be gone (its ports closed)."""
        self.signal(node_id, signal.SIGKILL)
        self._wait_exit(node_id, 10.0)

    def terminate(self, node_id: int, timeout_s: float = GRACEFUL_STOP_S) -> int:
        """SIGTERM (a broker's controlled shutdown, a leader's handover); its exit code."""
        self.resume(node_id)
        self.signal(node_id, signal.SIGTERM)
        return self._wait_exit(node_id, timeout_s)

    def pause(self, node_id: int) -> None:
        self.signal(node_id, signal.SIGSTOP)
        self.paused.add(node_id)

    def resume(self, node_id: int) -> None:
        if node_id in self.paused:
            self.signal(node_id, signal.SIGCONT)
            self.paused.discard(node_id)

    def _wait_exit(self, node_id: int, timeout_s: float) -> int:
        pid = self.pids[node_id]
        deadline = time.monotonic() + timeout_s
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return self._ended(node_id, status)
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                return self._ended(node_id, os.waitpid(pid, 0)[1])
            time.sleep(0.01)  # a child's exit polled at 10 ms

    def _ended(self, node_id: int, status: int) -> int:
        self.pids.pop(node_id, None)
        self.paused.discard(node_id)
        code = os.waitstatus_to_exitcode(status)
        self.exits[node_id] = code
        return code

    def reap(self) -> dict[int, int]:
        """Nodes that ended on their own since the last call: node id -> exit code."""
        ended = {}
        for node_id, pid in list(self.pids.items()):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                ended[node_id] = self._ended(node_id, status)
        return ended

    def wait_ready(self, broker_ids: list[int], every: list[int], timeout_s: float) -> None:
        """Until each of `broker_ids` answers a Kafka Metadata request listing every broker of
        `every` (a broker lists only unfenced brokers, and answers only once it has caught up
        with its own registration)."""
        deadline = time.monotonic() + timeout_s
        for broker_id in broker_ids:
            node = self.layout.nodes[broker_id]
            while True:
                if self.stopping:
                    raise InterruptedError("stopped while starting")
                if broker_id not in self.pids or self.reap():
                    failed = self.exits.get(broker_id)
                    raise RuntimeError(self._died_message(broker_id, failed))
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"broker {broker_id} did not list brokers {every} within "
                                       f"{timeout_s:.0f} s; its log: {node.log_path}")
                listed = listed_brokers(dev_layout.HOST, node.kafka_port, min(left, 2.0))
                if listed is not None and set(every) <= listed:
                    break
                time.sleep(0.01)  # the next Metadata request, polled

    def _died_message(self, node_id: int, code: int | None) -> str:
        ended = ", ".join(f"node {n} exited with code {c}" for n, c in self.exits.items())
        tail = ""
        for n in self.exits:
            path = self.layout.nodes[n].log_path
            with contextlib.suppress(OSError):
                lines = path.read_text(errors="replace").splitlines()[-5:]
                tail += f"\n--- {path} (last lines)\n" + "\n".join(lines)
        return (ended or f"node {node_id} is not running (code {code})") + tail

    def stop_all(self, graceful: bool) -> None:
        """Brokers first (a controlled shutdown needs the controller), then the controller;
        or everything killed at once."""
        for node_id in list(self.paused):
            self.resume(node_id)
        if graceful:
            for node_id in [n for n in self.layout.broker_ids if n != self.layout.controller_id]:
                if node_id in self.pids:
                    self.signal(node_id, signal.SIGTERM)
            for node_id in [n for n in self.layout.broker_ids if n in self.pids]:
                if node_id != self.layout.controller_id:
                    self._wait_exit(node_id, GRACEFUL_STOP_S)
            if self.layout.controller_id in self.pids:
                self.terminate(self.layout.controller_id)
        for node_id in list(self.pids):
            with contextlib.suppress(ProcessLookupError):
                self.signal(node_id, signal.SIGKILL)
            self._wait_exit(node_id, 10.0)
        for sock in self.sockets.values():
            sock.close()
        self.sockets.clear()

    # -- commands (--control) --------------------------------------------------------------------

    def command(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        node_id = int(request.get("id", -1))
        timeout_s = float(request.get("timeout", START_TIMEOUT_S))
        if op == "ping":
            return {"ok": True}
        if node_id not in self.layout.nodes:
            raise ValueError(f"no node {node_id}: brokers are {self.layout.broker_ids}")
        if op == "kill":
            self.kill(node_id)
        elif op == "terminate":
            return {"ok": True, "code": self.terminate(node_id, timeout_s)}
        elif op == "pause":
            self.pause(node_id)
        elif op == "resume":
            self.resume(node_id)
        elif op == "start":
            self.start(node_id)
            self.wait_ready([node_id], [node_id], timeout_s)
        else:
            raise ValueError(f"unknown command {op!r}")
        return {"ok": True, "pid": self.pids.get(node_id)}


def _reply(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _control_loop(supervisor: Supervisor, parent: int) -> None:
    """Commands until stdin closes (the handle, or the process that held it, is gone)."""
    stdin = sys.stdin.fileno()
    buffered = b""
    while not supervisor.stopping and os.getppid() == parent:
        readable, _, _ = select.select([stdin], [], [], 0.2)
        supervisor.reap()
        if not readable:
            continue
        chunk = os.read(stdin, 65536)
        if not chunk:
            return
        buffered += chunk
        while b"\n" in buffered:
            line, buffered = buffered.split(b"\n", 1)
            try:
                _reply(supervisor.command(json.loads(line)))
            except (ValueError, RuntimeError, TimeoutError, OSError) as exc:
                _reply({"ok": False, "error": str(exc)})


def _interactive_loop(supervisor: Supervisor) -> int:
    while not supervisor.stopping:
        time.sleep(0.2)  # the terminal's Ctrl-C and the nodes' exits, polled
        ended = supervisor.reap()
        if ended:
            print(supervisor._died_message(next(iter(ended)), None), file=sys.stderr)
            print("kraft-server --dev: stopping the other nodes", file=sys.stderr)
            return 1
    return 0


def run_supervisor(args: argparse.Namespace, sockets: list[socket.socket]) -> int:
    parent = os.getppid()
    created = args.data is None
    root = Path(tempfile.mkdtemp(prefix="kraft-dev-") if created else args.data).resolve()
    supervisor: Supervisor | None = None

    def stop(signum: int, frame: object) -> None:
        if supervisor is not None:
            supervisor.stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    if args.control:
        _die_with_parent(signal.SIGTERM)
    started = time.monotonic()
    code = 0
    try:
        # The node's modules, the broker's too (server.main loads them when a node has the
        # broker role): imported once here, forked N times.
        import server.broker_role
        import server.main  # noqa: F401

        ports = [s.getsockname()[1] for s in sockets]
        layout = dev_layout.prepare(root, args.brokers, ports, dict(args.override))
        supervisor = Supervisor(layout, dict(zip(layout.broker_ids, sockets, strict=True)),
                                keep=not created)
        for node_id in layout.start_order:
            supervisor.start(node_id)
        supervisor.wait_ready(layout.broker_ids, layout.broker_ids, START_TIMEOUT_S)
        took = time.monotonic() - started
        if args.control:
            _reply({"event": "ready", **layout.describe(), "seconds": round(took, 3),
                    "pids": supervisor.pids})
            _control_loop(supervisor, parent)
        else:
            print(f"ready in {took:.2f} s: {layout.summary()}; Ctrl-C stops it", flush=True)
            code = _interactive_loop(supervisor)
    except (dev_layout.LayoutError, RuntimeError, TimeoutError) as exc:
        print(f"kraft-server --dev: {exc}", file=sys.stderr)
        if args.control:
            _reply({"event": "failed", "error": str(exc)})
        code = 1
    except InterruptedError:
        code = 0
    finally:
        for sock in sockets:
            sock.close()
        if supervisor is not None:
            supervisor.stop_all(graceful=not created)
        if created:
            shutil.rmtree(root, ignore_errors=True)
        if not args.control:
            where = "removed" if created else "kept"
            print(f"kraft-server --dev: stopped; {root} {where}", file=sys.stderr)
    return code
