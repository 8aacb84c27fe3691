"""A QuorumController on a RaftNode, composed the way server/main.py composes it: one
MetadataLoader registered with the node, the controller installed as its publisher."""

from __future__ import annotations

from typing import Any

from kraft.node.raft_node import RaftNode
from metadata.controller import QuorumController
from metadata.loader import MetadataLoader


def attach_controller(node: RaftNode, **options: Any) -> QuorumController:
    loader = MetadataLoader()
    node.register(loader)
    controller = QuorumController(node, **options)
    loader.install(controller)
    return controller
