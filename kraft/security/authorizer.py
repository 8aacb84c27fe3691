"""Authorization of every gRPC call, with Kafka's operations (KIP-801's StandardAuthorizer).

With `authorizer.class.name` set, one server interceptor on every gRPC listener asks the node's
authorizer (metadata/authorizer/standard.py, which this layer cannot import: it sees it as a
`RequestAuthorizer`) before any handler runs. METHOD_OPERATIONS says what each RPC needs, as
the Kafka API it mirrors needs it:

* an operation on the CLUSTER resource (`ALTER` for ElectLeaders, `CLUSTER_ACTION` for Raft
  and the broker lifecycle, ...): refused calls never reach the handler;
* PER_RESOURCE: Kafka checks each topic, group or config resource (CreateTopics needs CREATE on
  the cluster or on each topic, DescribeTopics lists only what the caller may DESCRIBE, ...),
  so the handler does it (metadata/authorizer/admin_checks.py), with the caller this
  interceptor hands it through `current_caller()`;
* NO_CHECK: Kafka checks nothing beyond authentication (its DescribeCluster and Metadata
  broker lists, its ApiVersions features).

An RPC that no entry names is refused to everyone but super users, so a new RPC cannot slip
through unclassified (a unit test checks every RPC of every service). Refusals are logged by
the authorizer (rate-limited, `kraft.authorizer`) and answered the way the RPC answers errors:
CLUSTER_AUTHORIZATION_FAILED (31) in the response's status or error code, or gRPC
PERMISSION_DENIED where the response has no error field (Raft's stream and votes).
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

import grpc
from google.protobuf import descriptor_pool, symbol_database

from kraft.errors import Errors
from kraft.security.principal import peer_principal
from kraft.security.principal_mapping import DEFAULT_MAPPER, PrincipalMapper

CLUSTER_AUTHORIZATION_FAILED = Errors.CLUSTER_AUTHORIZATION_FAILED
PER_RESOURCE = "PER_RESOURCE"
NO_CHECK = "NO_CHECK"

# "/package.Service/Method" -> a Kafka operation on the CLUSTER, PER_RESOURCE or NO_CHECK.
METHOD_OPERATIONS: dict[str, str] = {
    **{f"/kraft.admin.v1.Admin/{m}": op for m, op in {
        # Kafka's CreateTopics, DeleteTopics, CreatePartitions, DescribeConfigs,
        # IncrementalAlterConfigs and Metadata (for the topic reads) check each resource.
        "CreateTopics": PER_RESOURCE, "DeleteTopics": PER_RESOURCE,
        "CreatePartitions": PER_RESOURCE, "DescribeConfigs": PER_RESOURCE,
        "IncrementalAlterConfigs": PER_RESOURCE, "ListTopics": PER_RESOURCE,
        "DescribeTopics": PER_RESOURCE,
        "ElectLeaders": "ALTER", "AlterPartitionReassignments": "ALTER",
        "UnregisterBroker": "ALTER", "UpdateFeatures": "ALTER",
        "ListPartitionReassignments": "DESCRIBE",
        # A broker's configs: Kafka's BROKER config resource is authorized on the CLUSTER.
        "DescribeBroker": "DESCRIBE_CONFIGS",
        # Kafka shows brokers, the cluster id and features to every authenticated client
        # (Metadata, DescribeCluster, ApiVersions).
        "ListBrokers": NO_CHECK, "DescribeCluster": NO_CHECK, "DescribeFeatures": NO_CHECK,
        # Kafka's CreateAcls / DeleteAcls need ALTER on the cluster, DescribeAcls DESCRIBE.
        "CreateAcls": "ALTER", "DeleteAcls": "ALTER", "DescribeAcls": "DESCRIBE",
        # Kafka's SCRAM credential APIs need ALTER / DESCRIBE on the cluster, its client
        # quota APIs ALTER_CONFIGS / DESCRIBE_CONFIGS.
        "AlterUserScramCredentials": "ALTER", "DescribeUserScramCredentials": "DESCRIBE",
        "AlterClientQuotas": "ALTER_CONFIGS", "DescribeClientQuotas": "DESCRIBE_CONFIGS",
    }.items()},
    **{f"/kraft.raft.v1.Raft/{m}": "CLUSTER_ACTION" for m in (
        "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot",
        "ApiVersions")},
    "/kraft.raft.v1.Quorum/DescribeQuorum": "DESCRIBE",
    "/kraft.raft.v1.Quorum/NodeStatus": "DESCRIBE",
    # KIP-853: changing the voter set is ALTER on the cluster; a voter updating its own
    # endpoints is inter-node traffic (CLUSTER_ACTION), as in Kafka.
    "/kraft.raft.v1.Quorum/AddRaftVoter": "ALTER",
    "/kraft.raft.v1.Quorum/RemoveRaftVoter": "ALTER",
    "/kraft.raft.v1.Quorum/UpdateRaftVoter": "CLUSTER_ACTION",
    **{f"/kraft.broker.v1.BrokerLifecycle/{m}": "CLUSTER_ACTION" for m in (
        "RegisterBroker", "BrokerHeartbeat", "AlterPartition", "AllocateProducerIds",
        "BrokerLiveness")},
    "/kraft.brokermetadata.v1.BrokerMetadata/DescribeCluster": NO_CHECK,
    "/kraft.brokermetadata.v1.BrokerMetadata/DescribeTopics": PER_RESOURCE,
}
# Probes must work without credentials.
UNCHECKED_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


class RequestAuthorizer(Protocol):
    """What this layer asks of the node's authorizer (metadata.authorizer.StandardAuthorizer)."""

    def authorize_cluster(self, principal: str, address: str, operation: str) -> bool:
        """May `principal` calling from `address` (an IP) do `operation` (Kafka's name,
        e.g. "ALTER") on the CLUSTER? Logs a refusal."""
        ...

    def is_super_user(self, principal: str) -> bool: ...


@dataclass(frozen=True, slots=True)
class Caller:
    """Who makes the call being served, and the authorizer that decides for it."""

    principal: str
    address: str  # the peer's IP, as gRPC reports it
    authorizer: RequestAuthorizer


_CALLER: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "kraft_grpc_caller", default=None)


def current_caller() -> Caller | None:
    """The caller of the gRPC call this task serves, set by the interceptor before the
    handler runs; None when no authorizer is configured (everything is allowed)."""
    return _CALLER.get()


def peer_address(peer: str) -> str:
    """The IP of a gRPC peer (`ipv4:127.0.0.1:5000`, `ipv6:[::1]:5000`, `unix:...`)."""
    kind, _, rest = peer.partition(":")
    if kind == "ipv6" and rest.startswith("["):
        return rest[1:].split("]", 1)[0]
    if kind == "ipv4":
        return rest.rsplit(":", 1)[0]
    return rest or peer


def allowed_by_table(authorizer: RequestAuthorizer, principal: str, address: str,
                     rule: str | None) -> bool:
    """The cluster-level decision of one table entry (PER_RESOURCE passes: the handler
    decides); an unlisted call (None) only for super users."""
    if rule is None:
        return authorizer.is_super_user(principal)
    if rule in (PER_RESOURCE, NO_CHECK):
        return True
    return authorizer.authorize_cluster(principal, address, rule)


class AuthorizingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    def __init__(self, authorizer: RequestAuthorizer,
                 mapper: PrincipalMapper = DEFAULT_MAPPER) -> None:
        self.authorizer = authorizer
        self.mapper = mapper

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        method = handler_call_details.method
        if handler is None or method.startswith(UNCHECKED_PREFIXES):
            return handler
        rule = METHOD_OPERATIONS.get(method)
        authorizer, mapper = self.authorizer, self.mapper

        def admit(context: grpc.aio.ServicerContext[Any, Any]) -> Caller | None:
            caller = Caller(peer_principal(context, mapper), peer_address(context.peer()),
                            authorizer)
            if allowed_by_table(authorizer, caller.principal, caller.address, rule):
                _CALLER.set(caller)
                return caller
            return None

        if handler.stream_stream is not None:  # Fetch: every request is answered, refused
            inner_stream = handler.stream_stream

            async def authorized_stream(
                requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
            ) -> AsyncIterator[Any]:
                if admit(context) is not None:
                    # grpc-stubs types aio handlers as synchronous ones
                    async for reply in inner_stream(requests, context):  # type: ignore[attr-defined, arg-type]
                        yield reply
                    return
                principal = peer_principal(context, mapper)
                async for _ in requests:
                    yield await _denial(method, principal, rule, context)

            return grpc.stream_stream_rpc_method_handler(
                authorized_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_unary is None:
            raise TypeError(f"{method}: only unary and bidirectional calls are authorized")
        inner = handler.unary_unary

        async def authorized(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            caller = admit(context)
            if caller is not None:
                return await inner(request, context)  # type: ignore[arg-type]  # as above
            return await _denial(method, peer_principal(context, mapper), rule, context)

        return grpc.unary_unary_rpc_method_handler(
            authorized,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


def refusal_message(principal: str, operation: str | None, what: str) -> str:
    """One line for a cluster-level refusal, saying what would allow it."""
    if operation is None:
        return (f"{principal} may not call {what}: it is open to super.users only")
    return (f"{principal} may not {operation} on the cluster ({what}); an operator can "
            f"allow it: kraft-admin acls --add --allow-principal {principal} "
            f"--operation {operation} --cluster")


async def _denial(
    method: str, principal: str, operation: str | None, context: grpc.aio.ServicerContext[Any, Any]
) -> Any:
    message = refusal_message(principal, operation, method.rsplit("/", 1)[-1])
    response = _response_for(method)
    if response is not None:
        fields = response.DESCRIPTOR.fields_by_name
        if "status" in fields:
            response.status.error_code = CLUSTER_AUTHORIZATION_FAILED
            response.status.error_message = message
            return response
        if "error_code" in fields:
            response.error_code = CLUSTER_AUTHORIZATION_FAILED
            if "error_message" in fields:
                response.error_message = message
            return response
    await context.abort(grpc.StatusCode.PERMISSION_DENIED,
                        f"CLUSTER_AUTHORIZATION_FAILED: {message}")


def _response_for(method: str) -> Any | None:
    service, _, name = method.strip("/").partition("/")
    try:
        descriptor = descriptor_pool.Default().FindServiceByName(service).FindMethodByName(name)
        cls = symbol_database.Default().GetSymbol(descriptor.output_type.full_name)
    except KeyError:
        return None
    return cls()
