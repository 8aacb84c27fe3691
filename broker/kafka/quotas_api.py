"""DescribeClientQuotas (API 48) and AlterClientQuotas (49), v0-1: translated onto the admin
operations (metadata/security_ops.py), which read the broker's committed image for a
description and forward alterations to the active controller, answered once committed.

Kafka's answers: a refusal of the whole request (CLUSTER_AUTHORIZATION_FAILED without
DESCRIBE_CONFIGS or ALTER_CONFIGS on the cluster, a bad filter, no controller in time) is
DescribeClientQuotas' top-level error with no entries, and the error of every entry of
AlterClientQuotas; otherwise each entity's own result (metadata/quotas.py has the rules).
"""

from __future__ import annotations

from typing import Any

from broker.kafka.admin_common import AdminBackend, call_controller, message, status_error
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.rpc import admin_pb2 as pb

# The request carries no timeout; a forwarded write waits for a controller this long
# (Kafka's default request.timeout.ms).
WRITE_TIMEOUT_MS = 30_000


def _error(code: int, text: str | None) -> dict[str, Any]:
    return {"error_code": error_code(code), "error_message": message(code, text)}


def _entity(module: Any, parts: Any) -> tuple[Any, ...]:
    return tuple(build(module, "EntityData", entity_type=p.entity_type,
                       entity_name=p.entity_name if p.HasField("entity_name") else None)
                 for p in parts)


async def handle_describe_client_quotas(admin: AdminBackend, version: int,
                                        request: Any) -> Reply:
    module = response_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
    response = await admin.call("DescribeClientQuotas", pb.DescribeClientQuotasRequest(
        components=[pb.QuotaFilterComponent(entity_type=c.entity_type, match_type=c.match_type,
                                            match=c.match) for c in request.components],
        strict=request.strict))
    failure = status_error(response)
    if failure is not None:
        return Reply(build(module, "DescribeClientQuotasResponse", throttle_time=NO_THROTTLE,
                           entries=None, **_error(*failure)))
    return Reply(build(
        module, "DescribeClientQuotasResponse", throttle_time=NO_THROTTLE,
        **_error(Errors.NONE, None), entries=tuple(
            build(module, "EntryData", entity=_entity(module, e.entity), values=tuple(
                build(module, "ValueData", key=v.key, value=v.value) for v in e.values))
            for e in response.entries)))


async def handle_alter_client_quotas(admin: AdminBackend, version: int, request: Any) -> Reply:
    module = response_module(ApiKey.ALTER_CLIENT_QUOTAS, version)
    entries = [pb.QuotaAlteration(
        entity=[pb.QuotaEntityPart(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity],
        ops=[pb.QuotaOp(key=op.key, value=op.value, remove=op.remove) for op in entry.ops])
        for entry in request.entries]
    results: list[tuple[Any, int, str | None]] = []
    if entries:
        response = await call_controller(admin, "AlterClientQuotas", pb.AlterClientQuotasRequest(
            entries=entries, validate_only=request.validate_only), WRITE_TIMEOUT_MS)
        failure = status_error(response)
        if failure is None and len(response.results) != len(entries):
            failure = (Errors.UNKNOWN_SERVER_ERROR, "The controller answered "
                       f"{len(response.results)} results for {len(entries)} entries.")
        if failure is not None:  # Kafka's getErrorResponse: every entry gets it
            results = [(entry.entity, *failure) for entry in entries]
        else:
            results = [(r.entity, r.error_code, r.error_message) for r in response.results]
    return Reply(build(module, "AlterClientQuotasResponse", throttle_time=NO_THROTTLE,
                       entries=tuple(
                           build(module, "EntryData", entity=_entity(module, entity),
                                 **_error(code, text))
                           for entity, code, text in results)))
