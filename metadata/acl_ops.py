"""The admin operations on ACLs (CreateAcls, DescribeAcls, DeleteAcls), part of
AdminOperations (metadata/admin_ops.py) like every other Admin RPC, for the gRPC Admin service
and the Kafka listener's ACL APIs (broker/kafka/acls_api.py) alike.

Creations and deletions are forwarded to the active controller and answered once committed
(metadata/authorizer/control.py has the rules); descriptions are read from the committed image
of the node asked. As Kafka's ControllerApis and AclApis do, a node without an authorizer
(`acls_enabled` False) refuses them all with SECURITY_DISABLED: the node that runs the rule
decides, so a forwarded write is refused by the active controller, a read by the node asked.

Codes outside Kafka's enums read as UNKNOWN (Kafka's fromCode): a binding with one is refused
per entry, a deletion filter per filter; a description filter with one matches nothing, as in
Kafka, but a filter with a 0 code is refused (0 is proto3's unset value, so it is an omission,
and Kafka's own parser refuses a raw 0 too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from kraft.errors import Errors
from metadata.authorizer.control import (
    AclDeleteResult,
    create_acls,
    delete_acls,
    describe_acls,
    enum_of,
)
from metadata.authorizer.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.errors import MAX_RECORDS_PER_USER_OP, ControllerApiError
from metadata.rpc import admin_pb2 as pb

if TYPE_CHECKING:  # AdminOperations mixes these operations in
    from metadata.admin_ops import AdminOperations

NO_AUTHORIZER = "No Authorizer is configured."  # Kafka's ControllerApis
NO_AUTHORIZER_ON_BROKER = "No Authorizer is configured on the broker"  # Kafka's AclApis


def binding_from_pb(b: pb.AclBinding) -> AclBinding:
    return AclBinding(
        enum_of(ResourceType, b.resource_type), b.resource_name,
        enum_of(PatternType, b.pattern_type), b.principal, b.host,
        enum_of(AclOperation, b.operation), enum_of(AclPermissionType, b.permission_type))


def binding_pb(b: AclBinding) -> pb.AclBinding:
    return pb.AclBinding(
        resource_type=b.resource_type, resource_name=b.resource_name,
        pattern_type=b.pattern_type, principal=b.principal, host=b.host,
        operation=b.operation, permission_type=b.permission_type)


def filter_from_pb(f: pb.AclBindingFilter) -> AclBindingFilter:
    return AclBindingFilter(
        enum_of(ResourceType, f.resource_type),
        f.resource_name if f.HasField("resource_name") else None,
        enum_of(PatternType, f.pattern_type),
        f.principal if f.HasField("principal") else None,
        f.host if f.HasField("host") else None,
        enum_of(AclOperation, f.operation), enum_of(AclPermissionType, f.permission_type))


def filter_pb(f: AclBindingFilter) -> pb.AclBindingFilter:
    return pb.AclBindingFilter(
        resource_type=f.resource_type, resource_name=f.resource_name,
        pattern_type=f.pattern_type, principal=f.principal, host=f.host,
        operation=f.operation, permission_type=f.permission_type)


def _check_count(what: str, count: int) -> None:
    if count > MAX_RECORDS_PER_USER_OP:
        raise ControllerApiError(Errors.INVALID_REQUEST, f"Too many {what} in one request: "
                                 f"{count} (at most {MAX_RECORDS_PER_USER_OP}).")


def _error_fields(error: ControllerApiError | None) -> dict[str, int | str]:
    if error is None:
        return {"error_code": 0, "error_message": ""}
    return {"error_code": error.code, "error_message": " ".join(error.message.split())}


def _deletion_pb(result: AclDeleteResult) -> pb.DeleteAclsFilterResult:
    return pb.DeleteAclsFilterResult(deleted=[binding_pb(b) for b in result.deleted],
                                     **_error_fields(result.error))  # type: ignore[arg-type]


class AclOperations:
    """Mixed into AdminOperations, whose forwarding, writes and images they use."""

    acls_enabled = False  # an authorizer is configured (authorizer.class.name)

    def _ops(self) -> AdminOperations:
        return cast("AdminOperations", self)

    def _require_authorizer(self, message: str) -> None:
        if not self.acls_enabled:
            raise ControllerApiError(Errors.SECURITY_DISABLED, message)

    async def CreateAcls(self, request: pb.CreateAclsRequest,
                         from_peer: bool) -> pb.CreateAclsResponse:
        _check_count("ACL creations", len(request.creations))
        forwarded: pb.CreateAclsResponse | None = await self._ops()._forward(
            "CreateAcls", request, from_peer)
        if forwarded is not None:
            return forwarded
        self._require_authorizer(NO_AUTHORIZER)
        bindings = [binding_from_pb(b) for b in request.creations]
        results = await self._ops()._write(lambda image: create_acls(image, bindings))
        return pb.CreateAclsResponse(status=pb.ResponseStatus(), results=[
            pb.AclCreationResult(**_error_fields(error))  # type: ignore[arg-type]
            for error in results])

    async def DescribeAcls(self, request: pb.DescribeAclsRequest,
                           from_peer: bool) -> pb.DescribeAclsResponse:
        self._require_authorizer(NO_AUTHORIZER_ON_BROKER)
        acl_filter = AclBindingFilter()
        if request.HasField("filter"):
            f = request.filter
            if 0 in (f.resource_type, f.pattern_type, f.operation, f.permission_type):
                raise ControllerApiError(
                    Errors.INVALID_REQUEST, "The filter leaves a code unset (0, UNKNOWN): set "
                    "resource_type, pattern_type, operation and permission_type (1 is ANY).")
            acl_filter = filter_from_pb(f)
        bindings = describe_acls(self._ops().controller.committed_image, acl_filter)
        return pb.DescribeAclsResponse(status=pb.ResponseStatus(),
                                       bindings=[binding_pb(b) for b in bindings])

    async def DeleteAcls(self, request: pb.DeleteAclsRequest,
                         from_peer: bool) -> pb.DeleteAclsResponse:
        _check_count("ACL filters", len(request.filters))
        forwarded: pb.DeleteAclsResponse | None = await self._ops()._forward(
            "DeleteAcls", request, from_peer)
        if forwarded is not None:
            return forwarded
        self._require_authorizer(NO_AUTHORIZER)
        filters = [filter_from_pb(f) for f in request.filters]
        results = await self._ops()._write(lambda image: delete_acls(image, filters))
        return pb.DeleteAclsResponse(status=pb.ResponseStatus(),
                                     results=[_deletion_pb(r) for r in results])
