"""The Admin gRPC service (metadata/rpc/admin.proto): Kafka's admin requests, served by every
controller and by brokers on their gRPC listeners.

Every RPC is metadata/admin_ops.py's operation of the same name (validation, the controller's
rules, forwarding to the active controller), the same code the Kafka protocol's admin APIs run;
this servicer only tells it whether another node already forwarded the request (the
`kraft-forwarded-by` metadata key), so a request is forwarded at most once.

With an authorizer, the gRPC interceptor (kraft/security/authorizer.py) has checked what the
whole cluster needs and hands over the caller; the operations Kafka authorizes per resource
(topics, configs) are authorized here by metadata/authorizer/admin_checks.py, as the Kafka
listener's admin APIs are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import grpc

from kraft.security.authorizer import current_caller
from kraft.security.tls import TlsConfig
from metadata.admin_forward import FORWARD_TIMEOUT_S, FORWARDED_BY
from metadata.admin_ops import AdminOperations, ControllerView
from metadata.authorizer.admin_checks import admin_caller, authorized_admin_call
from metadata.rpc import CLUSTER_ID_KEY
from metadata.rpc import admin_pb2 as pb
from metadata.rpc import admin_pb2_grpc as rpc

__all__ = ["CLUSTER_ID_KEY", "FORWARDED_BY", "AdminServicer", "ControllerView",
           "add_admin_service"]

Context = grpc.aio.ServicerContext[Any, Any]


def _from_peer(context: Context) -> bool:
    return FORWARDED_BY in dict(context.invocation_metadata() or ())


class AdminServicer(rpc.AdminServicer):
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
        """`acls_enabled`: the node has an authorizer, so the ACL RPCs are served (else
        SECURITY_DISABLED, as Kafka)."""
        self.ops = AdminOperations(controller, cluster_id, controller_endpoints,
                                   forward_timeout_s=forward_timeout_s, tls=tls,
                                   acls_enabled=acls_enabled)

    @property
    def controller_endpoints(self) -> Mapping[int, str]:
        return self.ops.controller_endpoints

    async def close(self) -> None:
        """Close the channels used for forwarding."""
        await self.ops.close()

    async def _call(self, method: str, request: Any, context: Context) -> Any:
        from_peer = _from_peer(context)
        context.set_trailing_metadata(((CLUSTER_ID_KEY, self.ops.cluster_id),))
        caller = current_caller()
        if caller is None:  # no authorizer configured
            return await self.ops.call(method, request, from_peer=from_peer)
        return await authorized_admin_call(
            admin_caller(caller), method, request, self.ops.controller.committed_image,
            lambda kept: self.ops.call(method, kept, from_peer=from_peer))

    async def CreateTopics(self, request: pb.CreateTopicsRequest,
                           context: Context) -> pb.CreateTopicsResponse:
        return await self._call("CreateTopics", request, context)  # type: ignore[no-any-return]

    async def DeleteTopics(self, request: pb.DeleteTopicsRequest,
                           context: Context) -> pb.DeleteTopicsResponse:
        return await self._call("DeleteTopics", request, context)  # type: ignore[no-any-return]

    async def ListTopics(self, request: pb.ListTopicsRequest,
                         context: Context) -> pb.ListTopicsResponse:
        return await self._call("ListTopics", request, context)  # type: ignore[no-any-return]

    async def DescribeTopics(self, request: pb.DescribeTopicsRequest,
                             context: Context) -> pb.DescribeTopicsResponse:
        return await self._call("DescribeTopics", request, context)  # type: ignore[no-any-return]

    async def CreatePartitions(self, request: pb.CreatePartitionsRequest,
                               context: Context) -> pb.CreatePartitionsResponse:
        return await self._call(  # type: ignore[no-any-return]
            "CreatePartitions", request, context)

    async def ListBrokers(self, request: pb.ListBrokersRequest,
                          context: Context) -> pb.ListBrokersResponse:
        return await self._call("ListBrokers", request, context)  # type: ignore[no-any-return]

    async def DescribeBroker(self, request: pb.DescribeBrokerRequest,
                             context: Context) -> pb.DescribeBrokerResponse:
        return await self._call("DescribeBroker", request, context)  # type: ignore[no-any-return]

    async def UnregisterBroker(self, request: pb.UnregisterBrokerRequest,
                               context: Context) -> pb.UnregisterBrokerResponse:
        return await self._call(  # type: ignore[no-any-return]
            "UnregisterBroker", request, context)

    async def ElectLeaders(self, request: pb.ElectLeadersRequest,
                           context: Context) -> pb.ElectLeadersResponse:
        return await self._call("ElectLeaders", request, context)  # type: ignore[no-any-return]

    async def AlterPartitionReassignments(
        self, request: pb.AlterPartitionReassignmentsRequest, context: Context
    ) -> pb.AlterPartitionReassignmentsResponse:
        return await self._call(  # type: ignore[no-any-return]
            "AlterPartitionReassignments", request, context)

    async def ListPartitionReassignments(
        self, request: pb.ListPartitionReassignmentsRequest, context: Context
    ) -> pb.ListPartitionReassignmentsResponse:
        return await self._call(  # type: ignore[no-any-return]
            "ListPartitionReassignments", request, context)

    async def DescribeConfigs(self, request: pb.DescribeConfigsRequest,
                              context: Context) -> pb.DescribeConfigsResponse:
        return await self._call("DescribeConfigs", request, context)  # type: ignore[no-any-return]

    async def IncrementalAlterConfigs(
        self, request: pb.IncrementalAlterConfigsRequest, context: Context
    ) -> pb.IncrementalAlterConfigsResponse:
        return await self._call(  # type: ignore[no-any-return]
            "IncrementalAlterConfigs", request, context)

    async def DescribeCluster(self, request: pb.DescribeClusterRequest,
                              context: Context) -> pb.DescribeClusterResponse:
        return await self._call("DescribeCluster", request, context)  # type: ignore[no-any-return]

    async def DescribeFeatures(self, request: pb.DescribeFeaturesRequest,
                               context: Context) -> pb.DescribeFeaturesResponse:
        return await self._call(  # type: ignore[no-any-return]
            "DescribeFeatures", request, context)

    async def CreateAcls(self, request: pb.CreateAclsRequest,
                         context: Context) -> pb.CreateAclsResponse:
        return await self._call("CreateAcls", request, context)  # type: ignore[no-any-return]

    async def DescribeAcls(self, request: pb.DescribeAclsRequest,
                           context: Context) -> pb.DescribeAclsResponse:
        return await self._call("DescribeAcls", request, context)  # type: ignore[no-any-return]

    async def DeleteAcls(self, request: pb.DeleteAclsRequest,
                         context: Context) -> pb.DeleteAclsResponse:
        return await self._call("DeleteAcls", request, context)  # type: ignore[no-any-return]

    async def AlterUserScramCredentials(
        self, request: pb.AlterUserScramCredentialsRequest, context: Context
    ) -> pb.AlterUserScramCredentialsResponse:
        return await self._call(  # type: ignore[no-any-return]
            "AlterUserScramCredentials", request, context)

    async def DescribeUserScramCredentials(
        self, request: pb.DescribeUserScramCredentialsRequest, context: Context
    ) -> pb.DescribeUserScramCredentialsResponse:
        return await self._call(  # type: ignore[no-any-return]
            "DescribeUserScramCredentials", request, context)

    async def AlterClientQuotas(self, request: pb.AlterClientQuotasRequest,
                                context: Context) -> pb.AlterClientQuotasResponse:
        return await self._call(  # type: ignore[no-any-return]
            "AlterClientQuotas", request, context)

    async def DescribeClientQuotas(self, request: pb.DescribeClientQuotasRequest,
                                   context: Context) -> pb.DescribeClientQuotasResponse:
        return await self._call(  # type: ignore[no-any-return]
            "DescribeClientQuotas", request, context)


def add_admin_service(server: grpc.aio.Server, servicer: AdminServicer) -> None:
    """Register the Admin service on a grpc.aio server (before it starts)."""
    rpc.add_AdminServicer_to_server(servicer, server)
