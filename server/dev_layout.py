"""The files of a `kraft-server --dev` cluster: its settings, each node's config file, the
formatted storage, and `dev-cluster.json` (what a later `--data DIR` run starts again from).

One broker: node 1, combined (controller and broker). More: controller 0 and brokers 1..N.
The settings are the test-fit ones (server/dev.py); everything else is the product's default.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kraft.log.meta_properties import StorageError, random_uuid, read_meta_properties
from metadata.config_keys import BROKER_CONFIGS
from metadata.records import ConfigRecord, ConfigResourceType
from server.bootstrap_metadata import write_bootstrap_checkpoint
from server.config import ConfigError, load_config
from server.config_keys import REGISTRY
from server.storage_cli import format_storage

HOST = "127.0.0.1"
STATE_FILE = "dev-cluster.json"
COMBINED_ID = 1
CONTROLLER_ID = 0  # with more than one broker


class LayoutError(Exception):
    """A one-line reason the dev cluster's files cannot be made or used."""


def dev_settings(brokers: int) -> tuple[dict[str, str], dict[str, str]]:
    """(every node's settings, the cluster-wide broker configs bootstrapped into the log) for
    a cluster of `brokers` brokers: replication that fits them, the group and transaction
    coordinators' topics sized to them, no initial rebalance delay, a follower out of the ISR
    after 3 s behind."""
    replicas = min(3, brokers)
    node = {
        "offsets.topic.replication.factor": str(replicas),
        "offsets.topic.num.partitions": str(brokers),
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.num.partitions": str(brokers),
        "transaction.state.log.min.isr": str(min(2, brokers)),
        "group.initial.rebalance.delay.ms": "0",
        "replica.lag.time.max.ms": "3000",
    }
    cluster = {
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(min(2, brokers)),
    }
    return node, cluster


def split_overrides(overrides: dict[str, str]) -> tuple[dict[str, str], dict[str, str]]:
    """--override KEY=VALUE: (node settings, cluster-wide broker configs). A dynamic broker
    config (metadata.config_keys) that is no node setting goes to the cluster's."""
    node, cluster = {}, {}
    for key, value in overrides.items():
        if key in BROKER_CONFIGS and key not in REGISTRY:
            cluster[key] = value
        else:
            node[key] = value
    return node, cluster


@dataclass
class DevNode:
    node_id: int
    roles: str
    config_path: Path
    log_path: Path
    kafka_port: int = 0  # 0: no Kafka listener (the controller of a multi-broker cluster)


@dataclass
class DevLayout:
    root: Path
    brokers: int
    cluster_id: str
    controller_id: int
    controller_port: int
    nodes: dict[int, DevNode] = field(default_factory=dict)

    @property
    def broker_ids(self) -> list[int]:
        return [n for n, node in sorted(self.nodes.items()) if node.kafka_port]

    @property
    def start_order(self) -> list[int]:
        """The controller first: the brokers register with it."""
        return [self.controller_id, *[n for n in self.broker_ids if n != self.controller_id]]

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{HOST}:{self.nodes[n].kafka_port}" for n in self.broker_ids)

    def describe(self) -> dict[str, Any]:
        return {
            "bootstrap_servers": self.bootstrap_servers,
            "controller": f"{HOST}:{self.controller_port}",
            "controller_id": self.controller_id,
            "cluster_id": self.cluster_id,
            "data_dir": str(self.root),
            "brokers": {str(n): {"kafka": f"{HOST}:{self.nodes[n].kafka_port}",
                                 "log": str(self.nodes[n].log_path)} for n in self.broker_ids},
            "logs": {str(n): str(node.log_path) for n, node in self.nodes.items()},
        }

    def summary(self) -> str:
        _, cluster = dev_settings(self.brokers)
        shape = ("one combined node" if self.brokers == 1
                 else f"controller {self.controller_id} and brokers 1-{self.brokers}")
        return (f"{shape}, topics created on first use with replication factor "
                f"{cluster['default.replication.factor']}, min.insync.replicas "
                f"{cluster['min.insync.replicas']}; logs in {self.root}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _read_state(root: Path, brokers: int) -> str | None:
    """The cluster id of the dev cluster already in `root`, if any (a --data DIR again)."""
    path = root / STATE_FILE
    if not path.exists():
        if root.exists() and any(root.iterdir()):
            raise LayoutError(f"{root} is not empty and holds no dev cluster ({STATE_FILE})")
        return None
    try:
        state = json.loads(path.read_text())
        cluster_id, had = str(state["cluster_id"]), int(state["brokers"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LayoutError(f"{path} cannot be read: {exc}") from None
    if had != brokers:
        raise LayoutError(f"{root} holds a dev cluster of {had} broker(s), not {brokers}: "
                          f"pass --brokers {had}, or another --data directory")
    return cluster_id


def _properties(values: dict[str, str]) -> str:
    return "".join(f"{key}={value}\n" for key, value in values.items())


def prepare(root: Path, brokers: int, kafka_ports: list[int],
            overrides: dict[str, str]) -> DevLayout:
    """Write the config files into `root` and format every node's storage (unless this is a
    dev cluster that `root` already holds); the layout to start."""
    cluster_id = _read_state(root, brokers)
    fresh = cluster_id is None
    cluster_id = cluster_id or random_uuid()
    root.mkdir(parents=True, exist_ok=True)
    node_settings, cluster_settings = dev_settings(brokers)
    node_overrides, cluster_overrides = split_overrides(overrides)
    controller_id = COMBINED_ID if brokers == 1 else CONTROLLER_ID
    controller_port = _free_port()
    layout = DevLayout(root, brokers, cluster_id, controller_id, controller_port)
    common = {
        "controller.quorum.voters": f"{controller_id}@{HOST}:{controller_port}",
        "controller.listener.names": "CONTROLLER",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
        **node_settings,
    }
    controller_listener = f"CONTROLLER://{HOST}:{controller_port}"
    ids = [controller_id] if brokers == 1 else [controller_id, *range(1, brokers + 1)]
    for node_id in ids:
        port = kafka_ports[node_id - 1] if node_id >= 1 else 0
        listeners = [controller_listener] if node_id == controller_id else []
        if port:
            listeners.append(f"PLAINTEXT://{HOST}:{port}")
        roles = ",".join(r for r, on in (("broker", bool(port)),
                                         ("controller", node_id == controller_id)) if on)
        values = {"process.roles": roles, "node.id": str(node_id),
                  "listeners": ",".join(listeners), **common,
                  "log.dirs": str(root / f"node-{node_id}"), **node_overrides}
        path = root / f"node-{node_id}.properties"
        path.write_text(_properties(values))
        layout.nodes[node_id] = DevNode(node_id, roles, path, root / f"node-{node_id}.log", port)
    for node in layout.nodes.values():
        try:
            load_config(node.config_path)  # a bad --override: one line now, not a node's exit
        except ConfigError as exc:
            raise LayoutError(str(exc)) from None
    if fresh:
        _format(layout, {**cluster_settings, **cluster_overrides})
        (root / STATE_FILE).write_text(json.dumps({"cluster_id": cluster_id,
                                                   "brokers": brokers}) + "\n")
    return layout


def _format(layout: DevLayout, cluster_configs: dict[str, str]) -> None:
    """`kraft-storage format` of every node, in this process; the cluster-wide configs go
    into the controller's bootstrap.checkpoint, as --add-scram's users do, so they are in the
    log's first batch."""
    for node_id, node in layout.nodes.items():
        try:
            config = load_config(node.config_path)
            if node_id == layout.controller_id:
                os.makedirs(config.metadata_log_dir, exist_ok=True)
                write_bootstrap_checkpoint(config, [
                    ConfigRecord(int(ConfigResourceType.BROKER), "", key, value)
                    for key, value in cluster_configs.items()])
            with contextlib.redirect_stdout(io.StringIO()):
                format_storage(config, layout.cluster_id, out=io.StringIO())
        except (ConfigError, StorageError) as exc:
            raise LayoutError(str(exc)) from None
        meta = read_meta_properties(config.metadata_log_dir)
        if meta is None or meta.cluster_id != layout.cluster_id:
            raise LayoutError(f"{config.metadata_log_dir} was not formatted")
