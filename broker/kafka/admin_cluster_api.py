"""DescribeCluster (API 60, v0-1), ElectLeaders (API 43, v0-2), AlterPartitionReassignments
(API 45, v0) and ListPartitionReassignments (API 46, v0).

DescribeCluster answers from this broker's image the way Metadata does: the brokers alive on
the listener the request came in on, and a live broker as ControllerId (clients cannot reach
KRaft controllers; Kafka names a random live broker, we name the first). The other three are
the admin operations: elections and reassignments forwarded to the active controller, the list
of ongoing reassignments read from this broker's image.
"""

from __future__ import annotations

from typing import Any

from broker.kafka.admin_common import (
    AdminBackend,
    call_controller,
    message,
    status_error,
    timeout_ms,
)
from broker.kafka.authorization import (
    ALLOW_ALL,
    AUTHORIZED_OPERATIONS_OMITTED,
    RequestAuthorization,
)
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.metadata_api import cluster_operations, controller_id_for, live_endpoint
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import DEFAULT_MESSAGES, Errors
from metadata.image import MetadataImage
from metadata.records import NO_LEADER
from metadata.rpc import admin_pb2 as pb

BROKER_ENDPOINTS = 1  # DescribeCluster EndpointType (KIP-919)
CONTROLLER_ENDPOINTS = 2


# ---- DescribeCluster ----

def handle_describe_cluster(image: MetadataImage, cluster_id: str, listener: str, version: int,
                            request: Any, auth: RequestAuthorization = ALLOW_ALL,
                            broker_id: int = NO_LEADER) -> Reply:
    """Kafka checks nothing here; the operations bitfield needs DESCRIBE on the cluster."""
    module = response_module(ApiKey.DESCRIBE_CLUSTER, version)
    endpoint_type = getattr(request, "endpoint_type", BROKER_ENDPOINTS)
    error = Errors.NONE
    if endpoint_type == CONTROLLER_ENDPOINTS:
        error = Errors.MISMATCHED_ENDPOINT_TYPE  # a broker lists brokers only
    elif endpoint_type != BROKER_ENDPOINTS:
        error = Errors.UNSUPPORTED_ENDPOINT_TYPE
    brokers = []
    if error == Errors.NONE:
        for node_id in sorted(image.cluster.brokers):
            endpoint = live_endpoint(image, node_id, listener)
            if endpoint is not None:
                brokers.append(build(
                    module, "DescribeClusterBroker", broker_id=node_id, host=endpoint.host,
                    port=endpoint.port, rack=image.cluster.brokers[node_id].rack))
    return Reply(build(
        module, "DescribeClusterResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(error),
        error_message=DEFAULT_MESSAGES.get(error) if error != Errors.NONE else None,
        endpoint_type=endpoint_type, cluster_id=cluster_id,
        controller_id=controller_id_for([b.broker_id for b in brokers], broker_id),
        brokers=tuple(brokers),
        cluster_authorized_operations=cluster_operations(auth)
        if request.include_cluster_authorized_operations else AUTHORIZED_OPERATIONS_OMITTED))


def _by_topic(rows: list[tuple[str, Any]]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for topic, item in rows:
        grouped.setdefault(topic, []).append(item)
    return grouped


# ---- ElectLeaders ----

async def handle_elect_leaders(admin: AdminBackend, version: int, request: Any) -> Reply:
    module = response_module(ApiKey.ELECT_LEADERS, version)
    election_type: Any = getattr(request, "election_type", 0)  # v0: preferred only
    named = request.topic_partitions
    response = await call_controller(admin, "ElectLeaders", pb.ElectLeadersRequest(
        election_type=election_type, all_partitions=named is None,
        topic_partitions=[pb.TopicPartitions(topic=t.topic, partitions=list(t.partitions))
                          for t in named or ()]), timeout_ms(request))
    whole = status_error(response)
    rows: list[tuple[str, Any]] = []
    if whole is None:
        rows = [(r.topic, build(module, "PartitionResult", partition_id=r.partition,
                                error_code=error_code(r.error_code),
                                error_message=message(r.error_code, r.error_message)))
                for r in response.results]
    else:  # each named partition carries it too (v0 has no top-level error; Kafka's
        # getErrorResponse fills them at every version)
        rows = [(t.topic, build(module, "PartitionResult", partition_id=p,
                                error_code=error_code(whole[0]), error_message=whole[1]))
                for t in named or () for p in t.partitions]
    code = whole[0] if whole is not None else Errors.NONE
    return Reply(build(
        module, "ElectLeadersResponse", throttle_time=NO_THROTTLE, error_code=error_code(code),
        replica_election_results=tuple(
            build(module, "ReplicaElectionResult", topic=topic, partition_result=tuple(items))
            for topic, items in _by_topic(rows).items())))


# ---- AlterPartitionReassignments ----

async def handle_alter_partition_reassignments(admin: AdminBackend, version: int,
                                               request: Any) -> Reply:
    module = response_module(ApiKey.ALTER_PARTITION_REASSIGNMENTS, version)
    asked = [(t.name, p.partition_index, p.replicas) for t in request.topics for p in t.partitions]
    whole = None
    results = []
    if asked:
        response = await call_controller(
            admin, "AlterPartitionReassignments", pb.AlterPartitionReassignmentsRequest(
                partitions=[pb.ReassignablePartition(
                    topic=topic, partition=index, cancel=replicas is None,
                    replicas=list(replicas or ())) for topic, index, replicas in asked]),
            timeout_ms(request))
        whole = status_error(response)
        if whole is None:
            results = [(r.topic, r.partition, r.error_code, message(r.error_code, r.error_message))
                       for r in response.results]
    if whole is not None:  # answered for the request and, so every client sees it, each entry
        results = [(topic, index, *whole) for topic, index, _ in asked]
    code, text = whole or (Errors.NONE, None)
    rows = [(topic, build(module, "ReassignablePartitionResponse", partition_index=index,
                          error_code=error_code(c), error_message=t))
            for topic, index, c, t in results]
    return Reply(build(
        module, "AlterPartitionReassignmentsResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(code), error_message=text, responses=tuple(
            build(module, "ReassignableTopicResponse", name=topic, partitions=tuple(items))
            for topic, items in _by_topic(rows).items())))


# ---- ListPartitionReassignments ----

async def handle_list_partition_reassignments(admin: AdminBackend, version: int,
                                              request: Any) -> Reply:
    module = response_module(ApiKey.LIST_PARTITION_REASSIGNMENTS, version)
    topics = request.topics
    ongoing: list[Any] = []
    whole = None
    wanted = [pb.TopicPartitions(topic=t.name, partitions=list(t.partition_indexes))
              for t in topics or () if t.partition_indexes]
    if topics is None or wanted:  # an empty list asks for nothing; the empty pb list is "all"
        response = await admin.call("ListPartitionReassignments",
                                    pb.ListPartitionReassignmentsRequest(topics=wanted))
        whole = status_error(response)
        ongoing = list(response.reassignments) if whole is None else []
    code, text = whole or (Errors.NONE, None)
    rows = [(r.topic, build(module, "OngoingPartitionReassignment", partition_index=r.partition,
                            replicas=tuple(r.replicas), adding_replicas=tuple(r.adding_replicas),
                            removing_replicas=tuple(r.removing_replicas)))
            for r in ongoing]
    return Reply(build(
        module, "ListPartitionReassignmentsResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(code), error_message=text, topics=tuple(
            build(module, "OngoingTopicReassignment", name=topic, partitions=tuple(items))
            for topic, items in _by_topic(rows).items())))
