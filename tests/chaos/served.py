"""Asking one node (not whichever the client is redirected to) what it serves."""

from __future__ import annotations

import grpc

from kraft.rpc import admin_pb2 as apb
from kraft.rpc import admin_pb2_grpc as arpc
from tests.chaos.checks import Served
from tests.chaos.writers import CONFIG_KEY, TOPIC_RESOURCE

_OPTIONS = [("grpc.max_receive_message_length", 64 * 1024 * 1024)]


def served_by(node_id: int, endpoint: str, prefix: str, config_topics: list[str]) -> Served:
    """Raises grpc.RpcError, or AssertionError when the node refuses (e.g. a broker not
    running yet)."""
    with grpc.insecure_channel(endpoint, options=_OPTIONS) as channel:
        stub = arpc.AdminStub(channel)
        listed = stub.ListTopics(apb.ListTopicsRequest(), timeout=10)
        _ok(listed.status, node_id)
        topics = {t.name: t.topic_id for t in listed.topics if t.name.startswith(prefix)}
        request = apb.DescribeConfigsRequest(resources=[
            apb.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name)
            for name in config_topics])
        described = stub.DescribeConfigs(request, timeout=10)
        _ok(described.status, node_id)
    configs: dict[str, str | None] = {}
    for result in described.results:
        if result.error_code:
            continue  # a topic this node does not have: check_served reports it
        for entry in result.configs:
            if entry.name == CONFIG_KEY and entry.source == apb.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG:
                configs[result.resource_name] = entry.value if entry.HasField("value") else None
    return Served(node_id, topics, configs)


def _ok(status: apb.ResponseStatus, node_id: int) -> None:
    if status.error_code:
        raise AssertionError(f"node {node_id} answered error {status.error_code}: "
                             f"{status.error_message}")


def unfenced_brokers(endpoint: str) -> set[int]:
    with grpc.insecure_channel(endpoint) as channel:
        reply = arpc.AdminStub(channel).ListBrokers(apb.ListBrokersRequest(), timeout=5)
    _ok(reply.status, -1)
    return {b.broker_id for b in reply.brokers if not b.fenced}
