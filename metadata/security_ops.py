"""The admin operations on SCRAM credentials (AlterUserScramCredentials,
DescribeUserScramCredentials) and client quotas (AlterClientQuotas, DescribeClientQuotas), part
of AdminOperations (metadata/admin_ops.py) like every other Admin RPC, for the gRPC Admin
service and the Kafka listener's APIs (broker/kafka/scram_api.py, quotas_api.py) alike.

Alterations are forwarded to the active controller and answered once committed
(metadata/scram.py and metadata/quotas.py have the rules); descriptions are read from the
committed image of the node asked, as a Kafka broker answers them from its metadata cache.
Unlike the ACL operations they are served with or without an authorizer, as in Kafka.
"""

from __future__ import annotations

import asyncio
import re
import socket
from typing import TYPE_CHECKING, cast

from kraft.errors import Errors
from metadata.errors import ControllerApiError
from metadata.quotas import (
    EntityParts,
    QuotaAlteration,
    QuotaFilterComponent,
    QuotaOp,
    alter_client_quotas,
    describe_client_quotas,
    is_ip_literal,
)
from metadata.rpc import admin_pb2 as pb
from metadata.scram import (
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)

if TYPE_CHECKING:  # AdminOperations mixes these operations in
    from metadata.admin_ops import AdminOperations

MAX_ENTRIES = 10_000  # per repeated field, as admin_ops bounds every request
MAX_STRING_CHARS = 32_768
RESOLVE_TIMEOUT_S = 5.0  # an IP quota entity's host name must resolve within this
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")


def _invalid(message: str) -> ControllerApiError:
    return ControllerApiError(Errors.INVALID_REQUEST, message)


def _check_count(what: str, count: int) -> None:
    if count > MAX_ENTRIES:
        raise _invalid(f"Too many {what} in one request: {count} (at most {MAX_ENTRIES}).")


def _check_text(what: str, value: str) -> None:
    """Names end up in one-line messages and outputs (as admin_ops checks every name)."""
    if len(value) > MAX_STRING_CHARS:
        raise _invalid(f"The {what} is longer than {MAX_STRING_CHARS} characters.")
    if _CONTROL_CHARS.search(value):
        raise _invalid(f"The {what} {value!r} contains control characters.")


def _error_fields(error: ControllerApiError | None) -> dict[str, int | str]:
    if error is None:
        return {"error_code": 0, "error_message": ""}
    return {"error_code": error.code, "error_message": " ".join(error.message.split())}


def entity_parts(parts: list[pb.QuotaEntityPart]) -> EntityParts:
    return tuple((p.entity_type, p.entity_name if p.HasField("entity_name") else None)
                 for p in parts)


def entity_pb(entity: EntityParts) -> list[pb.QuotaEntityPart]:
    return [pb.QuotaEntityPart(entity_type=kind, entity_name=name) for kind, name in entity]


def _check_entity(entity: EntityParts) -> None:
    for kind, name in entity:
        _check_text("entity type", kind)
        if name is not None:
            _check_text(f"{kind} name", name)


async def _resolved_hosts(alterations: list[QuotaAlteration]) -> frozenset[str]:
    """The host names of IP entities that resolve (Kafka's InetAddress.getByName), looked up
    here because a rule does no I/O."""
    names = {name for a in alterations for kind, name in a.entity
             if kind == "ip" and name and not is_ip_literal(name)}
    loop = asyncio.get_running_loop()
    resolved = set()
    for name in names:
        try:
            await asyncio.wait_for(loop.getaddrinfo(name, None), RESOLVE_TIMEOUT_S)
        except (OSError, socket.gaierror, TimeoutError, UnicodeError):
            continue
        resolved.add(name)
    return frozenset(resolved)


class SecurityOperations:
    """Mixed into AdminOperations, whose forwarding, writes and images they use."""

    def _ops(self) -> AdminOperations:
        return cast("AdminOperations", self)

    # ---- SCRAM credentials ----

    async def AlterUserScramCredentials(
        self, request: pb.AlterUserScramCredentialsRequest, from_peer: bool
    ) -> pb.AlterUserScramCredentialsResponse:
        _check_count("SCRAM credential deletions", len(request.deletions))
        _check_count("SCRAM credential upsertions", len(request.upsertions))
        for name in [d.name for d in request.deletions] + [u.name for u in request.upsertions]:
            _check_text("user name", name)
        forwarded: pb.AlterUserScramCredentialsResponse | None = await self._ops()._forward(
            "AlterUserScramCredentials", request, from_peer)
        if forwarded is not None:
            return forwarded
        deletions = [ScramDeletion(d.name, d.mechanism) for d in request.deletions]
        upsertions = [ScramUpsertion(u.name, u.mechanism, u.iterations, u.salt,
                                     u.salted_password) for u in request.upsertions]
        results = await self._ops()._write(
            lambda image: alter_user_scram_credentials(image, deletions, upsertions))
        return pb.AlterUserScramCredentialsResponse(status=pb.ResponseStatus(), results=[
            pb.AlterUserScramCredentialsResult(
                user=r.user, **_error_fields(r.error))  # type: ignore[arg-type]
            for r in results])

    async def DescribeUserScramCredentials(
        self, request: pb.DescribeUserScramCredentialsRequest, from_peer: bool
    ) -> pb.DescribeUserScramCredentialsResponse:
        _check_count("users", len(request.users))
        answers = describe_user_scram_credentials(self._ops().controller.committed_image,
                                                  list(request.users))
        return pb.DescribeUserScramCredentialsResponse(status=pb.ResponseStatus(), results=[
            pb.DescribeUserScramCredentialsResult(
                user=a.user, credential_infos=[
                    pb.ScramCredentialInfo(mechanism=mechanism, iterations=iterations)
                    for mechanism, iterations in a.credentials],
                **_error_fields(a.error))  # type: ignore[arg-type]
            for a in answers])

    # ---- client quotas ----

    async def AlterClientQuotas(self, request: pb.AlterClientQuotasRequest,
                                from_peer: bool) -> pb.AlterClientQuotasResponse:
        _check_count("quota entries", len(request.entries))
        alterations = []
        for entry in request.entries:
            entity = entity_parts(list(entry.entity))
            _check_entity(entity)
            _check_count("quota operations", len(entry.ops))
            for op in entry.ops:
                _check_text("quota key", op.key)
            alterations.append(QuotaAlteration(entity, tuple(
                QuotaOp(op.key, None if op.remove else op.value) for op in entry.ops)))
        forwarded: pb.AlterClientQuotasResponse | None = await self._ops()._forward(
            "AlterClientQuotas", request, from_peer)
        if forwarded is not None:
            return forwarded
        resolved = await _resolved_hosts(alterations)
        results = await self._ops()._write(lambda image: alter_client_quotas(
            image, alterations, validate_only=request.validate_only, resolved_hosts=resolved))
        return pb.AlterClientQuotasResponse(status=pb.ResponseStatus(), results=[
            pb.AlterClientQuotasResult(entity=entity_pb(a.entity),
                                       **_error_fields(error))  # type: ignore[arg-type]
            for a, error in zip(alterations, results, strict=True)])

    async def DescribeClientQuotas(self, request: pb.DescribeClientQuotasRequest,
                                   from_peer: bool) -> pb.DescribeClientQuotasResponse:
        _check_count("filter components", len(request.components))
        components = []
        for c in request.components:
            _check_text("entity type", c.entity_type)
            components.append(QuotaFilterComponent(
                c.entity_type, c.match_type, c.match if c.HasField("match") else None))
        matched = describe_client_quotas(self._ops().controller.committed_image, components,
                                         request.strict)
        return pb.DescribeClientQuotasResponse(status=pb.ResponseStatus(), entries=[
            pb.ClientQuotaEntry(entity=entity_pb(entity), values=[
                pb.QuotaValue(key=key, value=values[key]) for key in sorted(values)])
            for entity, values in matched])
