"""Who may do what: Kafka's model cut to what this project serves.

With `authorizer.class.name` set, every RPC names an operation; a principal in `super.users`
may do everything; others need a grant for the operation in the ACL file
(`authorizer.acl.file`, JSON: `{"acls": [{"principal": "User:CN=ops", "operations":
["Create", "AlterConfigs"]}]}`), except that reads (Describe, DescribeConfigs) are open to
everyone when `allow.everyone.if.no.acl.found=true`. Controllers and brokers talk to each other
with ClusterAction, so their certificates' principals belong in `super.users`, as in Kafka.

Enforcement is one gRPC server interceptor for every service, so no handler can forget it. A
refusal is logged with the principal and the operation and answered the way the RPC answers
errors: CLUSTER_AUTHORIZATION_FAILED (31) in the response's status or error code, or gRPC
PERMISSION_DENIED where the response has no error field.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
from google.protobuf import descriptor_pool, symbol_database

from kraft.errors import Errors
from kraft.security.principal import peer_principal

log = logging.getLogger(__name__)

CLUSTER_AUTHORIZATION_FAILED = Errors.CLUSTER_AUTHORIZATION_FAILED
OPERATIONS = ("Create", "Delete", "Alter", "AlterConfigs", "Describe", "DescribeConfigs",
              "ClusterAction")
READS = frozenset({"Describe", "DescribeConfigs"})

# "/package.Service/Method" -> operation. A method not listed here is refused: a new RPC must
# say what it is before anyone outside super.users may call it.
METHOD_OPERATIONS: dict[str, str] = {
    **{f"/kraft.admin.v1.Admin/{m}": op for m, op in {
        "CreateTopics": "Create", "DeleteTopics": "Delete", "CreatePartitions": "Alter",
        "UnregisterBroker": "Alter", "ElectLeaders": "Alter",
        "AlterPartitionReassignments": "Alter", "IncrementalAlterConfigs": "AlterConfigs",
        "UpdateFeatures": "Alter", "ListTopics": "Describe", "DescribeTopics": "Describe",
        "ListBrokers": "Describe", "DescribeBroker": "Describe",
        "ListPartitionReassignments": "Describe", "DescribeConfigs": "DescribeConfigs",
        "DescribeCluster": "Describe", "DescribeFeatures": "Describe",
        # Kafka's AclApis: DESCRIBE on the cluster to list ACLs, ALTER to change them.
        "DescribeAcls": "Describe", "CreateAcls": "Alter", "DeleteAcls": "Alter",
    }.items()},
    **{f"/kraft.raft.v1.Raft/{m}": "ClusterAction" for m in (
        "Vote", "BeginQuorumEpoch", "EndQuorumEpoch", "Fetch", "FetchSnapshot",
        "ApiVersions")},
    "/kraft.raft.v1.Quorum/DescribeQuorum": "Describe",
    "/kraft.raft.v1.Quorum/NodeStatus": "Describe",
    # KIP-853: changing the voter set is ALTER on the cluster; a voter updating its own
    # endpoints is inter-node traffic (CLUSTER_ACTION), as in Kafka.
    "/kraft.raft.v1.Quorum/AddRaftVoter": "Alter",
    "/kraft.raft.v1.Quorum/RemoveRaftVoter": "Alter",
    "/kraft.raft.v1.Quorum/UpdateRaftVoter": "ClusterAction",
    **{f"/kraft.broker.v1.BrokerLifecycle/{m}": "ClusterAction" for m in (
        "RegisterBroker", "BrokerHeartbeat", "AlterPartition", "AllocateProducerIds",
        "BrokerLiveness")},
    "/kraft.brokermetadata.v1.BrokerMetadata/DescribeCluster": "Describe",
    "/kraft.brokermetadata.v1.BrokerMetadata/DescribeTopics": "Describe",
}
# Probes must work without credentials.
UNCHECKED_PREFIXES = ("/grpc.health.v1.Health/", "/grpc.reflection.")


class AclFileError(ValueError):
    """The ACL file cannot be read or says something invalid; the message names the file."""


@dataclass(frozen=True)
class Authorizer:
    super_users: frozenset[str] = frozenset()
    grants: dict[str, frozenset[str]] = field(default_factory=dict)  # principal -> operations
    reads_open: bool = False

    def allows(self, principal: str, operation: str | None) -> bool:
        if principal in self.super_users:
            return True
        if operation is None:
            return False
        if self.reads_open and operation in READS:
            return True
        granted = self.grants.get(principal, frozenset()) | self.grants.get("User:*", frozenset())
        return operation in granted


def parse_super_users(raw: str | None) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by semicolons."""
    return frozenset(p.strip() for p in (raw or "").split(";") if p.strip())


def load_acl_file(path: str) -> dict[str, frozenset[str]]:
    try:
        with open(path, encoding="utf-8") as file:
            document = json.load(file)
    except (OSError, ValueError) as exc:
        raise AclFileError(f"authorizer.acl.file={path}: {exc}") from None
    entries = document.get("acls") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise AclFileError(f"authorizer.acl.file={path}: expected {{\"acls\": [...]}}")
    grants: dict[str, set[str]] = {}
    for index, entry in enumerate(entries):
        principal = entry.get("principal") if isinstance(entry, dict) else None
        operations = entry.get("operations") if isinstance(entry, dict) else None
        if not isinstance(principal, str) or not principal.startswith("User:"):
            raise AclFileError(
                f"authorizer.acl.file={path}: entry {index} needs a principal like User:CN=ops"
            )
        if not isinstance(operations, list) or not operations:
            raise AclFileError(f"authorizer.acl.file={path}: entry {index} lists no operations")
        for operation in operations:
            if operation not in OPERATIONS and operation != "All":
                raise AclFileError(
                    f"authorizer.acl.file={path}: entry {index}: unknown operation "
                    f"{operation!r}; use one of {', '.join(OPERATIONS)} or All"
                )
        expanded = OPERATIONS if "All" in operations else operations
        grants.setdefault(principal, set()).update(expanded)
    return {p: frozenset(ops) for p, ops in grants.items()}


class AuthorizingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    def __init__(self, authorizer: Authorizer) -> None:
        self.authorizer = authorizer

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
        operation = METHOD_OPERATIONS.get(method)
        authorizer = self.authorizer

        def allowed(context: grpc.aio.ServicerContext[Any, Any]) -> bool:
            principal = peer_principal(context)
            if authorizer.allows(principal, operation):
                return True
            log.warning("denied %s on %s to %s (peer %s)", operation or "an unlisted call",
                        method, principal, context.peer())
            return False

        if handler.stream_stream is not None:  # Fetch: every request is answered, refused
            inner_stream = handler.stream_stream

            async def authorized_stream(
                requests: AsyncIterator[Any], context: grpc.aio.ServicerContext[Any, Any]
            ) -> AsyncIterator[Any]:
                if allowed(context):
                    # grpc-stubs types aio handlers as synchronous ones
                    async for reply in inner_stream(requests, context):  # type: ignore[attr-defined, arg-type]
                        yield reply
                    return
                principal = peer_principal(context)
                async for _ in requests:
                    yield await _denial(method, principal, operation, context)

            return grpc.stream_stream_rpc_method_handler(
                authorized_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_unary is None:
            raise TypeError(f"{method}: only unary and bidirectional calls are authorized")
        inner = handler.unary_unary

        async def authorized(request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            if allowed(context):
                return await inner(request, context)  # type: ignore[arg-type]  # as above
            return await _denial(method, peer_principal(context), operation, context)

        return grpc.unary_unary_rpc_method_handler(
            authorized,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )


async def _denial(
    method: str, principal: str, operation: str | None, context: grpc.aio.ServicerContext[Any, Any]
) -> Any:
    message = (f"{principal} may not {operation or 'call'} ({method.rsplit('/', 1)[-1]}); ask "
               "an operator to add it to super.users or grant the operation in "
               "authorizer.acl.file")
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

