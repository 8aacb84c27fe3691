"""Authorization of the admin operations, as Kafka's ControllerApis / ConfigHelper / KafkaApis
authorize them, in one place for both fronts: the gRPC Admin service (metadata/admin_service.py,
with the caller the gRPC interceptor hands it) and the Kafka listener's admin APIs
(broker/kafka/authorization.py, with the connection's principal).

An operation on the whole cluster (kraft.security.authorizer.METHOD_OPERATIONS: ElectLeaders
needs ALTER, ...) is refused as a whole with CLUSTER_AUTHORIZATION_FAILED in the status. The
others are authorized per resource, the refused resources answered with Kafka's code for their
type and the rest going on:

| operation | needs | refused |
|---|---|---|
| CreateTopics | CREATE on the cluster, or on the topic | 29 per topic |
| DeleteTopics | DELETE on the cluster, or DELETE on the topic (by id: also DESCRIBE) | 29 |
| CreatePartitions | ALTER on the topic | 29 |
| Describe- / IncrementalAlterConfigs | DESCRIBE_CONFIGS / ALTER_CONFIGS on the resource | 29-31 |
| ListTopics / DescribeTopics | DESCRIBE on the topic | named: 29; all: left out |

A config resource is authorized on its topic (29), its group (30), or the cluster for broker,
broker-logger and client-metrics resources (31).

A request another node forwarded was authorized there under the caller's principal; here it
comes under the forwarding node's, a super user's, so it passes.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kraft.errors import Errors
from kraft.security.authorizer import (
    METHOD_OPERATIONS,
    PER_RESOURCE,
    Caller,
    RequestAuthorizer,
    allowed_by_table,
    refusal_message,
)
from metadata.authorizer.model import CLUSTER_NAME, AclOperation, ResourceType
from metadata.authorizer.standard import StandardAuthorizer, java_host
from metadata.image import MetadataImage
from metadata.records import ConfigResourceType
from metadata.rpc import admin_pb2 as pb

ADMIN_SERVICE = "/kraft.admin.v1.Admin/"
_TOPIC_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED
_CLUSTER_TYPES = frozenset({ConfigResourceType.BROKER, ConfigResourceType.BROKER_LOGGER,
                            ConfigResourceType.CLIENT_METRICS})
_FAILED_BY_TYPE = {ResourceType.TOPIC: ("Topic", Errors.TOPIC_AUTHORIZATION_FAILED),
                   ResourceType.GROUP: ("Group", Errors.GROUP_AUTHORIZATION_FAILED),
                   ResourceType.CLUSTER: ("Cluster", Errors.CLUSTER_AUTHORIZATION_FAILED)}

AdminCall = Callable[[Any], Awaitable[Any]]


def as_standard(authorizer: RequestAuthorizer, principal: str) -> StandardAuthorizer:
    """The node's StandardAuthorizer; any other RequestAuthorizer allows its super users
    alone per resource (fail closed)."""
    if isinstance(authorizer, StandardAuthorizer):
        return authorizer
    return StandardAuthorizer([principal] if authorizer.is_super_user(principal) else [])


@dataclass(frozen=True, slots=True)
class AdminCaller:
    """One request's caller: `host` is its address as Java prints it (ACL hosts' form)."""

    authorizer: StandardAuthorizer
    principal: str
    host: str

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
               log_if_denied: bool = True) -> bool:
        return self.authorizer.authorize(self.principal, self.host, operation, resource_type,
                                         name, log_if_denied=log_if_denied)

    def cluster_allows(self, operation: AclOperation) -> bool:
        """Kafka asks the cluster first without logging, then each resource."""
        return self.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=False)

    def refusal(self, operation: AclOperation, resource_type: ResourceType,
                name: str) -> tuple[int, str]:
        """(Kafka's code, one line) for a refused resource; an empty name is not shown."""
        kind, code = _FAILED_BY_TYPE[resource_type]
        kind_name = resource_type.name.lower()
        what = ("the cluster" if resource_type == ResourceType.CLUSTER
                else f"{kind_name} '{name}'" if name else f"this {kind_name}")
        return code, (f"{kind} authorization failed: {self.principal} may not "
                      f"{operation.name} {what}")


def admin_caller(caller: Caller) -> AdminCaller:
    """The caller of a gRPC call, as the gRPC interceptor handed it over."""
    return AdminCaller(as_standard(caller.authorizer, caller.principal), caller.principal,
                       java_host(caller.address))


async def authorized_admin_call(caller: AdminCaller, method: str, request: Any,
                                image: MetadataImage, call: AdminCall) -> Any:
    """`call` on what `caller` may do of `request`, the refusals merged into its answer."""
    rule = METHOD_OPERATIONS.get(ADMIN_SERVICE + method)
    response_type = getattr(pb, f"{method}Response")
    if rule != PER_RESOURCE:
        if allowed_by_table(caller.authorizer, caller.principal, caller.host, rule):
            return await call(request)
        return response_type(status=pb.ResponseStatus(
            error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=refusal_message(caller.principal, rule, method)))
    check = _CHECKS[method]
    kept, merge = check(caller, request, image)
    response = await call(kept) if kept is not None else response_type(
        status=pb.ResponseStatus())
    return merge(response)


# Each check: (the request with the refused resources removed, or None when none is left;
# how to merge their refusals into the answer).
Merge = Callable[[Any], Any]
Checked = tuple[Any | None, Merge]


def _unchanged(response: Any) -> Any:
    return response


def _create_topics(caller: AdminCaller, request: pb.CreateTopicsRequest,
                   image: MetadataImage) -> Checked:
    if caller.cluster_allows(AclOperation.CREATE):
        return request, _unchanged
    refused = {t.name: caller.refusal(AclOperation.CREATE, ResourceType.TOPIC, t.name)
               for t in request.topics
               if not caller.allows(AclOperation.CREATE, ResourceType.TOPIC, t.name)}
    if not refused:
        return request, _unchanged
    kept = [t for t in request.topics if t.name not in refused]

    def merge(response: pb.CreateTopicsResponse) -> pb.CreateTopicsResponse:
        response.topics.extend(
            pb.CreatableTopicResult(name=name, error_code=code, error_message=text,
                                    num_partitions=-1, replication_factor=-1)
            for name, (code, text) in refused.items())
        return response

    return (pb.CreateTopicsRequest(topics=kept, validate_only=request.validate_only)
            if kept else None), merge


def _delete_topics(caller: AdminCaller, request: pb.DeleteTopicsRequest,
                   image: MetadataImage) -> Checked:
    if caller.cluster_allows(AclOperation.DELETE):
        return request, _unchanged
    kept = []
    refused: list[pb.DeletableTopicResult] = []
    for ref in request.topics:
        name = ref.name
        if not name and ref.topic_id:
            topic = image.topic_by_id(ref.topic_id)
            if topic is None:  # the operation answers UNKNOWN_TOPIC_ID
                kept.append(ref)
                continue
            name = topic.name
            if not caller.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
                # Kafka does not name a topic to whom may not see it.
                code, text = caller.refusal(AclOperation.DESCRIBE, ResourceType.TOPIC, "")
                refused.append(pb.DeletableTopicResult(topic_id=ref.topic_id, error_code=code,
                                                       error_message=text))
                continue
        if caller.allows(AclOperation.DELETE, ResourceType.TOPIC, name):
            kept.append(ref)
            continue
        code, text = caller.refusal(AclOperation.DELETE, ResourceType.TOPIC, name)
        refused.append(pb.DeletableTopicResult(name=name, topic_id=ref.topic_id,
                                               error_code=code, error_message=text))
    if not refused:
        return request, _unchanged

    def merge(response: pb.DeleteTopicsResponse) -> pb.DeleteTopicsResponse:
        response.topics.extend(refused)
        return response

    return (pb.DeleteTopicsRequest(topics=kept) if kept else None), merge


def _create_partitions(caller: AdminCaller, request: pb.CreatePartitionsRequest,
                       image: MetadataImage) -> Checked:
    refused = {t.name: caller.refusal(AclOperation.ALTER, ResourceType.TOPIC, t.name)
               for t in request.topics
               if not caller.allows(AclOperation.ALTER, ResourceType.TOPIC, t.name)}
    if not refused:
        return request, _unchanged
    kept = [t for t in request.topics if t.name not in refused]

    def merge(response: pb.CreatePartitionsResponse) -> pb.CreatePartitionsResponse:
        response.topics.extend(
            pb.CreatePartitionsTopicResult(name=name, error_code=code, error_message=text)
            for name, (code, text) in refused.items())
        return response

    return (pb.CreatePartitionsRequest(topics=kept, validate_only=request.validate_only)
            if kept else None), merge


def config_resource(resource_type: int, name: str) -> tuple[ResourceType, str] | None:
    """The ACL resource a config resource is authorized on (Kafka's ConfigHelper /
    AuthHelper); None for a type no ACL covers (the operation refuses it)."""
    if resource_type == ConfigResourceType.TOPIC:
        return ResourceType.TOPIC, name
    if resource_type in _CLUSTER_TYPES:
        return ResourceType.CLUSTER, CLUSTER_NAME
    if resource_type == ConfigResourceType.GROUP:
        return ResourceType.GROUP, name
    return None


def _config_refusals(caller: AdminCaller, operation: AclOperation,
                     resources: Sequence[Any]) -> dict[int, tuple[int, str]]:
    """Request index -> (code, message) of each config resource the caller may not touch."""
    refused = {}
    for index, r in enumerate(resources):
        target = config_resource(r.resource_type, r.resource_name)
        if target is not None and not caller.allows(operation, *target):
            refused[index] = caller.refusal(operation, *target)
    return refused


def _in_request_order(total: int, refused: dict[int, Any], answered: Sequence[Any]) -> list[Any]:
    """The answers of the kept entries (in order) and the refusals, back in request order
    (both fronts match config answers to resources by position)."""
    results = iter(answered)
    merged = [refused[i] if i in refused else next(results, None) for i in range(total)]
    return [r for r in merged if r is not None] + list(results)


def _describe_configs(caller: AdminCaller, request: pb.DescribeConfigsRequest,
                      image: MetadataImage) -> Checked:
    refused = _config_refusals(caller, AclOperation.DESCRIBE_CONFIGS, request.resources)
    if not refused:
        return request, _unchanged
    resources = list(request.resources)

    def merge(response: pb.DescribeConfigsResponse) -> pb.DescribeConfigsResponse:
        denials = {i: pb.DescribeConfigsResult(
            resource_type=resources[i].resource_type, resource_name=resources[i].resource_name,
            error_code=code, error_message=text) for i, (code, text) in refused.items()}
        merged = _in_request_order(len(resources), denials, response.results)
        del response.results[:]
        response.results.extend(merged)
        return response

    kept = [r for i, r in enumerate(resources) if i not in refused]
    return (pb.DescribeConfigsRequest(resources=kept) if kept else None), merge


def _alter_configs(caller: AdminCaller, request: pb.IncrementalAlterConfigsRequest,
                   image: MetadataImage) -> Checked:
    refused = _config_refusals(caller, AclOperation.ALTER_CONFIGS, request.resources)
    if not refused:
        return request, _unchanged
    resources = list(request.resources)

    def merge(response: pb.IncrementalAlterConfigsResponse
              ) -> pb.IncrementalAlterConfigsResponse:
        denials = {i: pb.AlterConfigsResourceResult(
            resource_type=resources[i].resource_type, resource_name=resources[i].resource_name,
            error_code=code, error_message=text) for i, (code, text) in refused.items()}
        merged = _in_request_order(len(resources), denials, response.results)
        del response.results[:]
        response.results.extend(merged)
        return response

    kept = [r for i, r in enumerate(resources) if i not in refused]
    return (pb.IncrementalAlterConfigsRequest(resources=kept,
                                              validate_only=request.validate_only)
            if kept else None), merge


def _list_topics(caller: AdminCaller, request: pb.ListTopicsRequest,
                 image: MetadataImage) -> Checked:
    def merge(response: pb.ListTopicsResponse) -> pb.ListTopicsResponse:
        visible = [t for t in response.topics if caller.allows(
            AclOperation.DESCRIBE, ResourceType.TOPIC, t.name, log_if_denied=False)]
        del response.topics[:]
        response.topics.extend(visible)
        return response

    return request, merge


def _describe_topics(caller: AdminCaller, request: pb.DescribeTopicsRequest,
                     image: MetadataImage) -> Checked:
    named = bool(request.names)

    def merge(response: pb.DescribeTopicsResponse) -> pb.DescribeTopicsResponse:
        answered = []
        for t in response.topics:
            # All topics: the hidden ones are left out silently; a named one is refused.
            if caller.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name,
                             log_if_denied=named):
                answered.append(t)
            elif named:
                code, text = caller.refusal(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
                answered.append(pb.TopicDescription(name=t.name, error_code=code,
                                                    error_message=text))
        del response.topics[:]
        response.topics.extend(answered)
        return response

    return request, merge


_CHECKS: dict[str, Callable[[AdminCaller, Any, MetadataImage], Checked]] = {
    "CreateTopics": _create_topics,
    "DeleteTopics": _delete_topics,
    "CreatePartitions": _create_partitions,
    "DescribeConfigs": _describe_configs,
    "IncrementalAlterConfigs": _alter_configs,
    "ListTopics": _list_topics,
    "DescribeTopics": _describe_topics,
}
