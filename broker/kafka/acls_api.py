"""DescribeAcls (API 29), CreateAcls (30) and DeleteAcls (31), v1-3: translated onto the admin
operations (metadata/acl_ops.py), which read the node's committed image for a description and
forward creations and deletions to the active controller, answered once committed.

Kafka's answers: a refusal of the whole request (CLUSTER_AUTHORIZATION_FAILED without DESCRIBE
or ALTER on the cluster, SECURITY_DISABLED without an authorizer) is DescribeAcls' top-level
error, and the error of every creation or filter result for CreateAcls and DeleteAcls; a
malformed creation or filter is INVALID_REQUEST for itself alone. A raw 0 (UNKNOWN) code in a
creation or a filter is a request Kafka's parser refuses (IllegalArgumentException): the
connection is closed without an answer.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import groupby
from typing import Any

from broker.kafka.admin_common import AdminBackend, call_controller, message, status_error
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.rpc import admin_pb2 as pb

# Neither request carries a timeout; a forwarded write waits for a controller this long
# (Kafka's default request.timeout.ms).
WRITE_TIMEOUT_MS = 30_000
CLOSE = Reply(None, close=True)


def _filter_pb(body: Any) -> pb.AclBindingFilter:
    """A DescribeAcls request or a DeleteAclsFilter, whose fields are the same."""
    return pb.AclBindingFilter(
        resource_type=body.resource_type_filter, resource_name=body.resource_name_filter,
        pattern_type=body.pattern_type_filter, principal=body.principal_filter,
        host=body.host_filter, operation=body.operation, permission_type=body.permission_type)


def _acl_fields(b: pb.AclBinding) -> dict[str, Any]:
    return {"resource_type": b.resource_type, "resource_name": b.resource_name,
            "pattern_type": b.pattern_type, "principal": b.principal, "host": b.host,
            "operation": b.operation, "permission_type": b.permission_type}


def _failure(code: int, text: str | None) -> dict[str, Any]:
    return {"error_code": error_code(code), "error_message": message(code, text)}


# ---- DescribeAcls ----

def _resources(module: Any, bindings: Iterable[pb.AclBinding]) -> tuple[Any, ...]:
    """Kafka's DescribeAclsResponse.aclsResources: the bindings grouped by resource pattern
    (they arrive ordered by resource, so each group is contiguous)."""
    def pattern(b: pb.AclBinding) -> tuple[int, str, int]:
        return b.resource_type, b.resource_name, b.pattern_type

    return tuple(
        build(module, "DescribeAclsResource", resource_type=kind, resource_name=name,
              pattern_type=pattern_type, acls=tuple(
                  build(module, "AclDescription", principal=b.principal, host=b.host,
                        operation=b.operation, permission_type=b.permission_type)
                  for b in group))
        for (kind, name, pattern_type), group in groupby(bindings, key=pattern))


async def handle_describe_acls(admin: AdminBackend, version: int, request: Any) -> Reply:
    if 0 in (request.resource_type_filter, request.pattern_type_filter, request.operation,
             request.permission_type):
        return CLOSE
    module = response_module(ApiKey.DESCRIBE_ACLS, version)
    response = await admin.call("DescribeAcls", pb.DescribeAclsRequest(
        filter=_filter_pb(request)))
    failure = status_error(response)
    if failure is not None:
        return Reply(build(module, "DescribeAclsResponse", throttle_time=NO_THROTTLE,
                           resources=(), **_failure(*failure)))
    return Reply(build(module, "DescribeAclsResponse", throttle_time=NO_THROTTLE,
                       error_code=error_code(Errors.NONE), error_message=None,
                       resources=_resources(module, response.bindings)))


# ---- CreateAcls ----

async def handle_create_acls(admin: AdminBackend, version: int, request: Any) -> Reply:
    creations = request.creations
    if any(0 in (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type)
           for c in creations):
        return CLOSE
    module = response_module(ApiKey.CREATE_ACLS, version)
    results: list[dict[str, Any]]
    if not creations:
        results = []
    else:
        response = await call_controller(admin, "CreateAcls", pb.CreateAclsRequest(creations=[
            pb.AclBinding(resource_type=c.resource_type, resource_name=c.resource_name,
                          pattern_type=c.resource_pattern_type, principal=c.principal,
                          host=c.host, operation=c.operation, permission_type=c.permission_type)
            for c in creations]), WRITE_TIMEOUT_MS)
        failure = status_error(response)
        if failure is None and len(response.results) != len(creations):
            failure = (Errors.UNKNOWN_SERVER_ERROR, "The controller answered "
                       f"{len(response.results)} results for {len(creations)} creations.")
        if failure is not None:
            results = [_failure(*failure)] * len(creations)
        else:
            results = [_failure(r.error_code, r.error_message) for r in response.results]
    return Reply(build(module, "CreateAclsResponse", throttle_time=NO_THROTTLE, results=tuple(
        build(module, "AclCreationResult", **result) for result in results)))


# ---- DeleteAcls ----

async def handle_delete_acls(admin: AdminBackend, version: int, request: Any) -> Reply:
    filters = request.filters
    if any(0 in (f.resource_type_filter, f.pattern_type_filter, f.operation, f.permission_type)
           for f in filters):
        return CLOSE
    module = response_module(ApiKey.DELETE_ACLS, version)
    results: list[Any] = []
    if filters:
        response = await call_controller(admin, "DeleteAcls", pb.DeleteAclsRequest(
            filters=[_filter_pb(f) for f in filters]), WRITE_TIMEOUT_MS)
        failure = status_error(response)
        if failure is None and len(response.results) != len(filters):
            failure = (Errors.UNKNOWN_SERVER_ERROR, "The controller answered "
                       f"{len(response.results)} results for {len(filters)} filters.")
        for index in range(len(filters)):
            deleted: tuple[pb.AclBinding, ...] = ()
            if failure is not None:
                code, text = failure
            else:
                r = response.results[index]
                code, text, deleted = r.error_code, r.error_message, tuple(r.deleted)
            results.append(build(
                module, "DeleteAclsFilterResult", **_failure(code, text), matching_acls=tuple(
                    build(module, "DeleteAclsMatchingAcl", error_code=error_code(Errors.NONE),
                          error_message=None, **_acl_fields(b))
                    for b in deleted)))
    return Reply(build(module, "DeleteAclsResponse", throttle_time=NO_THROTTLE,
                       filter_results=tuple(results)))
