"""Asking one node (not whichever the client is redirected to) what it serves."""

from __future__ import annotations

import grpc

from kraft.security.tls import MESSAGE_SIZE_OPTIONS
from metadata.rpc import admin_pb2 as apb
from metadata.rpc import admin_pb2_grpc as arpc
from tests.chaos.checks import Served
from tests.chaos.writers import TOPIC_RESOURCE

DESCRIBE_BATCH = 1000  # resources per DescribeConfigs (the server takes at most 10,000)


def served_by(node_id: int, endpoint: str, prefix: str, config_topics: list[str]) -> Served:
    """Every chaos topic the node lists, and every dynamic config (any key) it serves for
    `config_topics`. Raises grpc.RpcError, or AssertionError when the node refuses (e.g. a
    broker not running yet)."""
    with grpc.insecure_channel(endpoint, options=MESSAGE_SIZE_OPTIONS) as channel:
        stub = arpc.AdminStub(channel)
        listed = stub.ListTopics(apb.ListTopicsRequest(), timeout=10)
        _ok(listed.status, node_id)
        topics = {t.name: t.topic_id for t in listed.topics if t.name.startswith(prefix)}
        results = []
        for i in range(0, len(config_topics), DESCRIBE_BATCH):
            request = apb.DescribeConfigsRequest(resources=[
                apb.DescribeConfigsResource(resource_type=TOPIC_RESOURCE, resource_name=name)
                for name in config_topics[i:i + DESCRIBE_BATCH]])
            described = stub.DescribeConfigs(request, timeout=10)
            _ok(described.status, node_id)
            results.extend(described.results)
    configs: dict[tuple[str, str], str | None] = {}
    for result in results:
        if result.error_code:
            continue  # a topic this node does not have: check_served reports it
        for entry in result.configs:
            if entry.source == apb.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG:
                configs[(result.resource_name, entry.name)] = (
                    entry.value if entry.HasField("value") else None)
    return Served(node_id, topics, configs, frozenset(config_topics))


def _ok(status: apb.ResponseStatus, node_id: int) -> None:
    if status.error_code:
        raise AssertionError(f"node {node_id} answered error {status.error_code}: "
                             f"{status.error_message}")


def unfenced_brokers(endpoint: str) -> set[int]:
    with grpc.insecure_channel(endpoint) as channel:
        reply = arpc.AdminStub(channel).ListBrokers(apb.ListBrokersRequest(), timeout=5)
    _ok(reply.status, -1)
    return {b.broker_id for b in reply.brokers if not b.fenced}
