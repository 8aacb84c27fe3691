"""Kafka's admin operations, as one code path for both front ends: the Admin gRPC service
(metadata/admin_service.py) and the Kafka protocol's admin APIs on a broker's Kafka listener
(broker/kafka/admin_*.py). Requests and responses are the Admin protocol's messages
(metadata/rpc/admin.proto); a Kafka handler translates its wire request into one and the answer
back, so validation, the controller's rules and forwarding are the same whoever asks.

Writes run a rule through `QuorumController.write`, so they validate against the latest image
and are answered once committed. A controller that is not active forwards a write once to the
active controller (known from Raft) with a deadline, so a user may ask any controller; a
forwarded request is never forwarded again. Reads answer from the committed image of the node
asked, so a standby may lag the active controller by what it has not replicated yet.

Every request field is checked here before it reaches a rule (counts, lengths, ranges, enum
values, control characters); such a refusal is INVALID_REQUEST for the whole request. No
exception leaves a handler: an unexpected one becomes UNKNOWN_SERVER_ERROR with a message.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from kraft.errors import Errors
from kraft.security.tls import TlsConfig
from metadata.acl_ops import AclOperations
from metadata.admin_forward import FORWARD_TIMEOUT_S, ControllerForwarder
from metadata.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    ConfigEntry,
    DescribeConfigsResource,
    describe_configs,
    describe_features,
    incremental_alter_configs,
    non_default_topic_configs,
)
from metadata.controller import NotControllerError
from metadata.errors import (
    MAX_RECORDS_PER_USER_OP,
    ControllerApiError,
    ControllerResult,
)
from metadata.image import BrokerRegistration, MetadataImage, PartitionRegistration
from metadata.reassignment import (
    ReassignablePartition,
    alter_partition_reassignments,
    list_partition_reassignments,
)
from metadata.records import ConfigResourceType
from metadata.replication import ElectionType, elect_leaders, unregister_broker
from metadata.rpc import admin_pb2 as pb
from metadata.security_ops import SecurityOperations
from metadata.topics import (
    CreatableTopic,
    CreatePartitionsTopic,
    ReplicaAssignment,
    TopicRef,
    create_partitions,
    create_topics,
    delete_topics,
)

log = logging.getLogger(__name__)

MAX_ENTRIES = 10_000  # per repeated field of a request: Kafka's bound on one user operation
MAX_STRING_CHARS = 32_768
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")

Response = TypeVar("Response")


# ---- request checks ----

def _invalid(message: str) -> ControllerApiError:
    return ControllerApiError(Errors.INVALID_REQUEST, message)


def _check_count(what: str, count: int) -> None:
    if count > MAX_ENTRIES:
        raise _invalid(f"Too many {what} in one request: {count} (at most {MAX_ENTRIES}).")


def _check_text(what: str, value: str) -> None:
    """Protobuf already refuses strings that are not UTF-8; these would break one-line
    messages and outputs, or are larger than anything Kafka accepts."""
    if len(value) > MAX_STRING_CHARS:
        raise _invalid(f"The {what} is longer than {MAX_STRING_CHARS} characters.")
    if _CONTROL_CHARS.search(value):
        raise _invalid(f"The {what} {value!r} contains control characters.")


def _check_non_negative(what: str, value: int) -> None:
    if value < 0:
        raise _invalid(f"Invalid negative {what} {value}.")


def _check_ids(what: str, ids: Sequence[int]) -> tuple[int, ...]:
    _check_count(what, len(ids))
    return tuple(ids)


# ---- responses ----

def _status(code: int = 0, message: str = "", controller_id: int = -1,
            endpoint: str = "") -> pb.ResponseStatus:
    return pb.ResponseStatus(error_code=code, error_message=_one_line(message),
                             controller_id=controller_id, controller_endpoint=endpoint)


def _one_line(message: str) -> str:
    return " ".join(message.split())


def _error(error: ControllerApiError | None) -> dict[str, Any]:
    """The error fields of a per-item result."""
    if error is None:
        return {"error_code": 0, "error_message": ""}
    return {"error_code": error.code, "error_message": _one_line(error.message)}


def _broker_pb(registration: BrokerRegistration) -> pb.BrokerDescription:
    return pb.BrokerDescription(
        broker_id=registration.id, epoch=registration.epoch,
        incarnation_id=registration.incarnation_id,
        endpoints=[pb.BrokerEndpoint(name=e.name, host=e.host, port=e.port)
                   for e in registration.endpoints],
        rack=registration.rack, fenced=registration.fenced,
        in_controlled_shutdown=registration.in_controlled_shutdown,
    )


def _partition_pb(partition_id: int, p: PartitionRegistration) -> pb.PartitionDescription:
    return pb.PartitionDescription(
        partition_index=partition_id, leader=p.leader, replicas=p.replicas, isr=p.isr,
        adding_replicas=p.adding_replicas, removing_replicas=p.removing_replicas,
        leader_epoch=p.leader_epoch, partition_epoch=p.partition_epoch,
        leader_recovery_state=p.leader_recovery_state,
    )


def _enum(value: int) -> Any:
    """A protobuf enum field's value: the runtime takes the int, the generated stubs name the
    enum class."""
    return value


def _config_pb(entry: ConfigEntry) -> pb.ConfigEntry:
    return pb.ConfigEntry(
        name=entry.name, value=entry.value, source=_enum(entry.source),
        read_only=entry.read_only, is_sensitive=entry.sensitive,
        config_type=_enum(entry.config_type), documentation=entry.documentation,
        synonyms=[pb.ConfigSynonym(name=s.name, value=s.value, source=_enum(s.source))
                  for s in entry.synonyms],
    )


def _bounded(image: MetadataImage, new_partitions: Iterable[int]) -> None:
    """Refuse before placement what Kafka's BoundedList would refuse after: placing 2^31
    partitions would exhaust memory before the rule could count its records."""
    if sum(n for n in new_partitions if n > 0) > MAX_RECORDS_PER_USER_OP:
        raise ControllerApiError(Errors.POLICY_VIOLATION,
                                 "Unable to perform excessively large batch operation.")


class ControllerView(Protocol):
    """What the Admin service needs of the node behind it: the QuorumController on a
    controller, a read-only view of the metadata cache on a broker (broker/service.py)."""

    @property
    def is_active(self) -> bool: ...

    @property
    def committed_image(self) -> MetadataImage: ...

    @property
    def leader_id(self) -> int: ...

    @property
    def node_id(self) -> int: ...

    async def write(
        self, rule: Callable[[MetadataImage], ControllerResult[Response]]
    ) -> Response: ...


class AdminOperations(AclOperations, SecurityOperations):  # acl_ops.py, security_ops.py
    def __init__(
        self,
        controller: ControllerView,
        cluster_id: str,
        controller_endpoints: Mapping[int, str],
        *,
        forward_timeout_s: float = FORWARD_TIMEOUT_S,
        tls: TlsConfig | None = None,
        acls_enabled: bool = False,
    ) -> None:
        self.tls = tls  # how to dial the active controller when forwarding
        self.acls_enabled = acls_enabled  # an authorizer is configured: ACLs are managed
        self.controller = controller
        self.cluster_id = cluster_id
        # Read at each use: a live view (kraft.client.ControllerEndpoints) follows a dynamic
        # quorum's voter changes.
        self.controller_endpoints = controller_endpoints
        self._forwarder = ControllerForwarder(cluster_id, timeout_s=forward_timeout_s, tls=tls)

    async def close(self) -> None:
        """Close the channels used for forwarding."""
        await self._forwarder.close()

    async def call(self, method: str, request: Any, *, from_peer: bool = False) -> Any:
        """The answer to the Admin RPC `method` (e.g. "CreateTopics"): every failure becomes a
        response with a status — Kafka's error for a refusal, NOT_CONTROLLER with the active
        controller, UNKNOWN_SERVER_ERROR otherwise. `from_peer`: another node forwarded it, so
        it is never forwarded again."""
        handler = getattr(self, method)
        response_type = getattr(pb, f"{method}Response")
        try:
            return await handler(request, from_peer)
        except NotControllerError as exc:
            return response_type(status=self._not_controller(exc.leader_id, exc.message))
        except ControllerApiError as exc:
            return response_type(status=_status(exc.code, exc.message))
        except Exception as exc:  # never let a request take the node down
            log.exception("%s failed", method)
            return response_type(status=_status(
                Errors.UNKNOWN_SERVER_ERROR,
                f"Unexpected error in {method}: {type(exc).__name__}: {exc}"))

    # ---- the active controller and forwarding ----

    @property
    def node_id(self) -> int:
        return self.controller.node_id

    def _leader_id(self) -> int:
        return self.controller.leader_id

    def _not_controller(self, leader_id: int, message: str) -> pb.ResponseStatus:
        endpoint = self.controller_endpoints.get(leader_id, "") if leader_id >= 0 else ""
        return _status(Errors.NOT_CONTROLLER, message, leader_id, endpoint)

    async def _forward(
        self, method: str, request: Any, from_peer: bool
    ) -> Any | None:
        """The active controller's answer to `request`, or None when this node is active."""
        if self.controller.is_active:
            return None
        leader = self._leader_id()
        endpoint = self.controller_endpoints.get(leader, "")
        if from_peer or leader < 0 or leader == self.node_id or not endpoint:
            known = f"; the active controller is {leader}" if leader >= 0 else ""
            raise NotControllerError(leader, f"This is not the active controller{known}")
        return await self._forwarder.forward(method, request, node_id=self.node_id,
                                             leader=leader, endpoint=endpoint)

    async def _write(self, rule: Callable[[MetadataImage], ControllerResult[Response]]) -> Response:
        return await self.controller.write(rule)

    # ---- topics ----

    async def CreateTopics(self, request: pb.CreateTopicsRequest,
                           from_peer: bool) -> pb.CreateTopicsResponse:
        topics = _creatable_topics(request)
        forwarded: pb.CreateTopicsResponse | None = await self._forward(
            "CreateTopics", request, from_peer)
        if forwarded is not None:
            return forwarded

        def rule(image: MetadataImage) -> Any:
            default: int = image.cluster_setting("num.partitions")
            _bounded(image, (len(t.assignments) or (default if t.num_partitions == -1
                                                     else t.num_partitions) for t in topics))
            return create_topics(image, topics, validate_only=request.validate_only)

        results = await self._write(rule)
        return pb.CreateTopicsResponse(status=_status(), topics=[
            pb.CreatableTopicResult(name=r.name, topic_id=r.topic_id or "",
                                    num_partitions=r.num_partitions,
                                    replication_factor=r.replication_factor, **_error(r.error))
            for r in results])

    async def DeleteTopics(self, request: pb.DeleteTopicsRequest,
                           from_peer: bool) -> pb.DeleteTopicsResponse:
        _check_count("topics", len(request.topics))
        refs = []
        for topic in request.topics:
            _check_text("topic name", topic.name)
            _check_text("topic id", topic.topic_id)
            refs.append(TopicRef(topic.name or None, topic.topic_id or None))
        forwarded: pb.DeleteTopicsResponse | None = await self._forward(
            "DeleteTopics", request, from_peer)
        if forwarded is not None:
            return forwarded
        results = await self._write(lambda image: delete_topics(image, refs))
        return pb.DeleteTopicsResponse(status=_status(), topics=[
            pb.DeletableTopicResult(name=r.name or "", topic_id=r.topic_id or "",
                                    **_error(r.error))
            for r in results])

    async def ListTopics(self, request: pb.ListTopicsRequest,
                         from_peer: bool) -> pb.ListTopicsResponse:
        image = self.controller.committed_image
        topics = [image.topics.by_name[name] for name in sorted(image.topics.by_name)]
        return pb.ListTopicsResponse(status=_status(), topics=[
            pb.ListedTopic(name=t.name, topic_id=t.topic_id, partition_count=len(t.partitions),
                           replication_factor=t.replication_factor)
            for t in topics])

    async def DescribeTopics(
        self, request: pb.DescribeTopicsRequest, from_peer: bool
    ) -> pb.DescribeTopicsResponse:
        _check_count("topics", len(request.names))
        for name in request.names:
            _check_text("topic name", name)
        image = self.controller.committed_image
        names = list(dict.fromkeys(request.names)) or sorted(image.topics.by_name)
        described = []
        for name in names:
            topic = image.topic(name)
            if topic is None:
                missing = ControllerApiError(Errors.UNKNOWN_TOPIC_OR_PARTITION,
                                             f"The topic '{name}' does not exist.")
                described.append(pb.TopicDescription(name=name, **_error(missing)))
                continue
            described.append(pb.TopicDescription(
                name=name, error_code=0, topic_id=topic.topic_id,
                partitions=[_partition_pb(i, p) for i, p in sorted(topic.partitions.items())],
                configs=[_config_pb(e) for e in non_default_topic_configs(image, name)],
            ))
        return pb.DescribeTopicsResponse(status=_status(), topics=described)

    async def CreatePartitions(
        self, request: pb.CreatePartitionsRequest, from_peer: bool
    ) -> pb.CreatePartitionsResponse:
        _check_count("topics", len(request.topics))
        topics = []
        for topic in request.topics:
            _check_text("topic name", topic.name)
            _check_count("assignments", len(topic.assignments))
            assignments = tuple(_check_ids("replicas", a.broker_ids) for a in topic.assignments)
            topics.append(CreatePartitionsTopic(topic.name, topic.count, assignments or None))
        forwarded: pb.CreatePartitionsResponse | None = await self._forward(
            "CreatePartitions", request, from_peer)
        if forwarded is not None:
            return forwarded

        def rule(image: MetadataImage) -> Any:
            current = {t.name: len(t.partitions) for t in map(image.topic, {t.name for t in topics})
                       if t is not None}
            _bounded(image, (t.count - current.get(t.name, t.count) for t in topics))
            return create_partitions(image, topics, validate_only=request.validate_only)

        results = await self._write(rule)
        return pb.CreatePartitionsResponse(status=_status(), topics=[
            pb.CreatePartitionsTopicResult(name=r.name, **_error(r.error)) for r in results])

    # ---- brokers ----

    async def ListBrokers(self, request: pb.ListBrokersRequest,
                          from_peer: bool) -> pb.ListBrokersResponse:
        brokers = self.controller.committed_image.cluster.brokers
        return pb.ListBrokersResponse(status=_status(), brokers=[
            _broker_pb(brokers[b]) for b in sorted(brokers)])

    async def DescribeBroker(
        self, request: pb.DescribeBrokerRequest, from_peer: bool
    ) -> pb.DescribeBrokerResponse:
        _check_non_negative("broker ID", request.broker_id)
        image = self.controller.committed_image
        registration = image.cluster.broker(request.broker_id)
        if registration is None:
            raise ControllerApiError(Errors.BROKER_ID_NOT_REGISTERED,
                                     f"Broker ID {request.broker_id} is not currently registered")
        [described] = describe_configs(image, [DescribeConfigsResource(
            ConfigResourceType.BROKER, str(request.broker_id))])
        return pb.DescribeBrokerResponse(
            status=_status(), broker=_broker_pb(registration),
            leader_count=sum(1 for _ in image.partitions_led_by(request.broker_id)),
            isr_count=sum(1 for _ in image.partitions_with_isr_member(request.broker_id)),
            configs=[_config_pb(e) for e in described.entries if not e.is_default],
        )

    async def UnregisterBroker(
        self, request: pb.UnregisterBrokerRequest, from_peer: bool
    ) -> pb.UnregisterBrokerResponse:
        _check_non_negative("broker ID", request.broker_id)
        forwarded: pb.UnregisterBrokerResponse | None = await self._forward(
            "UnregisterBroker", request, from_peer)
        if forwarded is not None:
            return forwarded
        await self._write(lambda image: unregister_broker(image, request.broker_id))
        return pb.UnregisterBrokerResponse(status=_status())

    # ---- leaders and reassignments ----

    async def ElectLeaders(self, request: pb.ElectLeadersRequest,
                           from_peer: bool) -> pb.ElectLeadersResponse:
        if request.election_type not in ElectionType._value2member_map_:
            raise _invalid(f"Unknown election type {request.election_type}.")
        election = ElectionType(request.election_type)
        if request.all_partitions and request.topic_partitions:
            raise _invalid("Name partitions or ask for all partitions, not both.")
        partitions = None if request.all_partitions else _topic_partitions(
            request.topic_partitions)
        forwarded: pb.ElectLeadersResponse | None = await self._forward(
            "ElectLeaders", request, from_peer)
        if forwarded is not None:
            return forwarded
        results = await self._write(lambda image: elect_leaders(image, election, partitions))
        return pb.ElectLeadersResponse(status=_status(), results=[
            pb.PartitionResult(topic=r.topic, partition=r.partition_id, **_error(r.error))
            for r in results])

    async def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest,
        from_peer: bool,
    ) -> pb.AlterPartitionReassignmentsResponse:
        _check_count("partitions", len(request.partitions))
        targets, seen = [], set()
        for p in request.partitions:
            _check_text("topic name", p.topic)
            _check_non_negative("partition", p.partition)
            if (p.topic, p.partition) in seen:
                raise _invalid(f"Duplicate partition {p.topic}-{p.partition} in the request.")
            seen.add((p.topic, p.partition))
            if p.cancel and p.replicas:
                raise _invalid(f"Cancelling the reassignment of {p.topic}-{p.partition} "
                               "takes no target replicas.")
            replicas = None if p.cancel else _check_ids("replicas", p.replicas)
            targets.append(ReassignablePartition(p.topic, p.partition, replicas))
        forwarded: pb.AlterPartitionReassignmentsResponse | None = await self._forward(
            "AlterPartitionReassignments", request, from_peer)
        if forwarded is not None:
            return forwarded
        results = await self._write(lambda image: alter_partition_reassignments(image, targets))
        return pb.AlterPartitionReassignmentsResponse(status=_status(), results=[
            pb.PartitionResult(topic=r.topic, partition=r.partition_index, **_error(r.error))
            for r in results])

    async def ListPartitionReassignments(
        self, request: pb.ListPartitionReassignmentsRequest,
        from_peer: bool,
    ) -> pb.ListPartitionReassignmentsResponse:
        wanted = None
        if request.topics:
            by_topic: dict[str, list[int]] = {}
            for topic, partition in _topic_partitions(request.topics):
                by_topic.setdefault(topic, []).append(partition)
            wanted = list(by_topic.items())
        ongoing = list_partition_reassignments(self.controller.committed_image, wanted)
        return pb.ListPartitionReassignmentsResponse(status=_status(), reassignments=[
            pb.OngoingReassignment(topic=r.topic, partition=r.partition_index,
                                   replicas=r.replicas, adding_replicas=r.adding_replicas,
                                   removing_replicas=r.removing_replicas)
            for r in ongoing])

    # ---- configs ----

    async def DescribeConfigs(
        self, request: pb.DescribeConfigsRequest, from_peer: bool
    ) -> pb.DescribeConfigsResponse:
        _check_count("resources", len(request.resources))
        resources = []
        for r in request.resources:
            _check_text("resource name", r.resource_name)
            _check_count("config names", len(r.config_names))
            for name in r.config_names:
                _check_text("config name", name)
            resources.append(DescribeConfigsResource(r.resource_type, r.resource_name,
                                                     tuple(r.config_names)))
        results = describe_configs(self.controller.committed_image, resources)
        return pb.DescribeConfigsResponse(status=_status(), results=[
            pb.DescribeConfigsResult(
                resource_type=_enum(r.resource_type), resource_name=r.resource_name,
                configs=[_config_pb(e) for e in r.entries], **_error(r.error))
            for r in results])

    async def IncrementalAlterConfigs(
        self, request: pb.IncrementalAlterConfigsRequest,
        from_peer: bool,
    ) -> pb.IncrementalAlterConfigsResponse:
        _check_count("resources", len(request.resources))
        resources = []
        for r in request.resources:
            _check_text("resource name", r.resource_name)
            _check_count("configs", len(r.configs))
            changes = []
            for c in r.configs:
                _check_text("config name", c.name)
                _check_text("config value", c.value)
                if c.op not in AlterConfigOp._value2member_map_:
                    raise _invalid(f"Unknown config operation {c.op} for {c.name}.")
                delete = int(c.op) == AlterConfigOp.DELETE
                changes.append(AlterableConfig(c.name, c.op, None if delete else c.value))
            resources.append(AlterConfigsResource(r.resource_type, r.resource_name,
                                                  tuple(changes)))
        forwarded: pb.IncrementalAlterConfigsResponse | None = await self._forward(
            "IncrementalAlterConfigs", request, from_peer)
        if forwarded is not None:
            return forwarded
        controllers = frozenset(self.controller_endpoints)
        results = await self._write(lambda image: incremental_alter_configs(
            image, resources, validate_only=request.validate_only, controller_ids=controllers))
        return pb.IncrementalAlterConfigsResponse(status=_status(), results=[
            pb.AlterConfigsResourceResult(
                resource_type=_enum(r.resource_type), resource_name=r.resource_name,
                **_error(r.error))
            for r in results])

    # ---- cluster and features ----

    async def DescribeCluster(
        self, request: pb.DescribeClusterRequest, from_peer: bool
    ) -> pb.DescribeClusterResponse:
        image = self.controller.committed_image
        brokers = image.cluster.brokers
        leader = self._leader_id()
        return pb.DescribeClusterResponse(
            status=_status(), cluster_id=self.cluster_id, controller_id=leader,
            controller_endpoint=self.controller_endpoints.get(leader, ""),
            brokers=[_broker_pb(brokers[b]) for b in sorted(brokers)
                     if request.include_fenced_brokers or not brokers[b].fenced],
            controllers=[pb.ControllerDescription(id=i, endpoint=e)
                         for i, e in sorted(self.controller_endpoints.items())],
            metadata_offset=image.provenance.offset,
        )

    async def DescribeFeatures(
        self, request: pb.DescribeFeaturesRequest, from_peer: bool
    ) -> pb.DescribeFeaturesResponse:
        features = describe_features(self.controller.committed_image)
        return pb.DescribeFeaturesResponse(
            status=_status(),
            supported=[pb.SupportedFeature(name=n, min_version=low, max_version=high)
                       for n, (low, high) in sorted(features.supported.items())],
            finalized=[pb.FinalizedFeature(name=n, level=level)
                       for n, level in features.finalized.items()],
            finalized_epoch=features.epoch,
        )


def _topic_partitions(entries: Sequence[pb.TopicPartitions]) -> list[tuple[str, int]]:
    _check_count("topics", len(entries))
    partitions = []
    for entry in entries:
        _check_text("topic name", entry.topic)
        for partition in entry.partitions:
            _check_non_negative("partition", partition)
            partitions.append((entry.topic, partition))
    _check_count("partitions", len(partitions))
    return partitions


def _creatable_topics(request: pb.CreateTopicsRequest) -> list[CreatableTopic]:
    _check_count("topics", len(request.topics))
    topics = []
    for t in request.topics:
        _check_text("topic name", t.name)
        _check_count("assignments", len(t.assignments))
        _check_count("configs", len(t.configs))
        assignments = []
        for a in t.assignments:
            _check_non_negative("partition", a.partition_index)
            assignments.append(ReplicaAssignment(a.partition_index,
                                                 _check_ids("replicas", a.broker_ids)))
        for c in t.configs:
            _check_text("config name", c.name)
            _check_text("config value", c.value)
        topics.append(CreatableTopic(t.name, t.num_partitions, t.replication_factor,
                                     tuple(assignments),
                                     tuple((c.name, c.value) for c in t.configs)))
    return topics
