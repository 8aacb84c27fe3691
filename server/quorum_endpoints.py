"""The controllers' endpoints as this node's Raft replica knows them right now.

A dynamic quorum (KIP-853) has no `controller.quorum.voters`: the voters, with their
endpoints, come from the bootstrap snapshot or the log and change with add-controller and
remove-controller. The Admin services hand these endpoints out (NOT_CONTROLLER hints,
DescribeCluster), so they read the live set instead of a copy of the config.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from kraft.node.raft_node import RaftNode


class ControllerEndpoints(Mapping[int, str]):
    """The latest voter set's endpoints (static, bootstrap or from the log), plus the
    leader's endpoint when discovery taught it and the set does not list it yet (an observer
    that has not read the voters)."""

    def __init__(self, node: RaftNode) -> None:
        self._node = node

    def _all(self) -> dict[int, str]:
        endpoints = self._node.voters().endpoints()
        leader = self._node.status().leader_id
        if leader >= 0 and leader not in endpoints:
            endpoint = self._node.leader_endpoint()
            if endpoint:
                endpoints[leader] = endpoint
        return endpoints

    def __getitem__(self, key: int) -> str:
        return self._all()[key]

    def __iter__(self) -> Iterator[int]:
        return iter(self._all())

    def __len__(self) -> int:
        return len(self._all())
