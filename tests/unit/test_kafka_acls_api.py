"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31) on the Kafka front
(broker/kafka/acls_api.py): real requests encoded with kio and decoded as the server decodes
them, handled over the admin operations of a live one-voter controller, and the answers decoded
back — every case of the table in kafka-security.md §1."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.acls_api import handle_create_acls, handle_delete_acls, handle_describe_acls
from broker.kafka.admin_common import AdminBackend
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.reply import Reply
from broker.kafka.versions import SUPPORTED, ApiKey
from kraft.core.config import RaftConfig
from kraft.errors import Errors
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from metadata.admin_ops import AdminOperations
from metadata.authorizer.model import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.controller import QuorumController
from metadata.rpc import admin_pb2 as pb
from tests.unit.controller_harness import attach_controller
from tests.unit.test_admin_service import until

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
VERSIONS = [1, 2, 3]
R, P, Op, A = ResourceType, PatternType, AclOperation, AclPermissionType
HANDLERS = {ApiKey.DESCRIBE_ACLS: ("DescribeAclsRequest", handle_describe_acls),
            ApiKey.CREATE_ACLS: ("CreateAclsRequest", handle_create_acls),
            ApiKey.DELETE_ACLS: ("DeleteAclsRequest", handle_delete_acls)}


class Refusing:
    """The admin operations as a client without the cluster operation gets them (the
    Kafka listener's AuthorizedAdmin answers a refused method so)."""

    async def call(self, method: str, request: Any, *, from_peer: bool = False) -> Any:
        return getattr(pb, f"{method}Response")(status=pb.ResponseStatus(
            error_code=Errors.CLUSTER_AUTHORIZATION_FAILED, error_message="refused"))


class AclFront:
    def __init__(self, root: Path) -> None:
        self.root = root

    async def start(self, acls_enabled: bool) -> None:
        self.node = RaftNode(RaftConfig(CLUSTER_ID, 1, {1: "127.0.0.1:1"}),
                             SegmentedLog(self.root / "log"),
                             QuorumStateStore(self.root / "quorum-state"), rng=random.Random(1))
        self.controller: QuorumController = attach_controller(self.node, noop_interval_ms=0)
        await self.node.start()
        await until(lambda: self.controller.is_active)
        self.ops = AdminOperations(self.controller, CLUSTER_ID, {1: "127.0.0.1:1"},
                                   acls_enabled=acls_enabled)
        self.admin: AdminBackend = self.ops

    async def close(self) -> None:
        await self.ops.close()
        await self.controller.close()
        await self.node.stop()

    @property
    def bindings(self) -> set[AclBinding]:
        return set(self.controller.committed_image.acls.values())

    async def reply(self, api_key: int, version: int, **fields: Any) -> Reply:
        name, handler = HANDLERS[api_key]
        frame = encode_request(7, "test", build(request_module(api_key, version), name,
                                                **fields))
        request = decode_request(frame[4:])
        reply: Reply = await handler(self.admin, request.api_version, request.body)
        return reply

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        reply = await self.reply(api_key, version, **fields)
        assert reply.response is not None and not reply.close
        correlation_id, response = decode_response(
            api_key, version, encode_response(7, reply.response)[4:])
        assert correlation_id == 7
        return response

    async def create(self, version: int, *creations: dict[str, Any]) -> list[tuple[int, Any]]:
        m = request_module(ApiKey.CREATE_ACLS, version)
        response = await self.call(ApiKey.CREATE_ACLS, version, creations=tuple(
            build(m, "AclCreation", **c) for c in creations))
        return [(r.error_code, r.error_message) for r in response.results]

    async def describe(self, version: int, **query: Any) -> Any:
        return await self.call(ApiKey.DESCRIBE_ACLS, version, **(ANY_FILTER | query))

    async def delete(self, version: int, *filters: dict[str, Any]) -> Any:
        m = request_module(ApiKey.DELETE_ACLS, version)
        response = await self.call(ApiKey.DELETE_ACLS, version, filters=tuple(
            build(m, "DeleteAclsFilter", **(ANY_FILTER | f)) for f in filters))
        return response.filter_results


def run(tmp_path: Path, scenario: Callable[[AclFront], Awaitable[None]],
        acls_enabled: bool = True) -> None:
    async def main() -> None:
        front = AclFront(tmp_path)
        await front.start(acls_enabled)
        try:
            await scenario(front)
        finally:
            await front.close()

    asyncio.run(main())


def creation(name: str = "t", principal: str = "User:alice", operation: int = Op.READ,
             pattern: int = P.LITERAL, resource: int = R.TOPIC, permission: int = A.ALLOW,
             host: str = "*") -> dict[str, Any]:
    return {"resource_type": resource, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": operation,
            "permission_type": permission}


def binding(c: dict[str, Any]) -> AclBinding:
    return AclBinding(R(c["resource_type"]), c["resource_name"],
                      P(c["resource_pattern_type"]), c["principal"], c["host"],
                      Op(c["operation"]), A(c["permission_type"]))


ANY_FILTER: dict[str, Any] = {
    "resource_type_filter": R.ANY, "resource_name_filter": None, "pattern_type_filter": P.ANY,
    "principal_filter": None, "host_filter": None, "operation": Op.ANY,
    "permission_type": A.ANY}
OK = (Errors.NONE, None)


def test_the_three_apis_are_served_at_kafka_4_ranges() -> None:
    assert {k: SUPPORTED[k] for k in HANDLERS} == {k: (1, 3) for k in HANDLERS}


# ---- CreateAcls ----

@pytest.mark.parametrize("version", VERSIONS)
def test_create_writes_the_bindings_and_a_repeat_is_a_success(tmp_path: Path,
                                                             version: int) -> None:
    wanted = [creation("t"), creation("logs-", pattern=P.PREFIXED, operation=Op.WRITE),
              creation("kafka-cluster", resource=R.CLUSTER, operation=Op.IDEMPOTENT_WRITE),
              creation("g", resource=R.GROUP, permission=A.DENY, host="10.0.0.1")]

    async def scenario(front: AclFront) -> None:
        assert await front.create(version, *wanted) == [OK] * 4
        assert front.bindings == {binding(c) for c in wanted}
        offset = front.controller.committed_image.provenance.offset
        assert await front.create(version, wanted[0]) == [OK]
        assert front.bindings == {binding(c) for c in wanted}
        assert front.controller.committed_image.provenance.offset == offset  # no record

    run(tmp_path, scenario)


@pytest.mark.parametrize("version", VERSIONS)
def test_each_invalid_creation_fails_alone_in_order(tmp_path: Path, version: int) -> None:
    invalid = [
        (creation(resource=R.ANY), "Invalid resourceType ANY"),
        (creation(resource=99), "Invalid resourceType UNKNOWN"),  # fromCode(99): UNKNOWN
        (creation(pattern=P.MATCH), "Invalid patternType MATCH"),
        (creation(pattern=P.ANY), "Invalid patternType ANY"),
        (creation(operation=Op.ANY), "Invalid operation ANY"),
        (creation(permission=A.ANY), "Invalid permissionType ANY"),
        (creation(name=""), "Resource name should not be empty"),
        (creation("other", resource=R.CLUSTER),
         "The only valid name for the CLUSTER resource is kafka-cluster"),
        (creation(principal="alice"),
         "Could not parse principal from `alice` (no colon is present)."),
    ]
    first, last = creation("first"), creation("last")

    async def scenario(front: AclFront) -> None:
        results = await front.create(version, first, *(c for c, _ in invalid), last)
        assert results == [OK, *((Errors.INVALID_REQUEST, m) for _, m in invalid), OK]
        assert front.bindings == {binding(first), binding(last)}

    run(tmp_path, scenario)


@pytest.mark.parametrize("field", ["resource_type", "resource_pattern_type", "operation",
                                   "permission_type"])
def test_a_raw_zero_in_a_creation_closes_the_connection(tmp_path: Path, field: str) -> None:
    async def scenario(front: AclFront) -> None:
        m = request_module(ApiKey.CREATE_ACLS, 2)
        reply = await front.reply(ApiKey.CREATE_ACLS, 2, creations=(
            build(m, "AclCreation", **creation("ok")),
            build(m, "AclCreation", **(creation() | {field: 0}))))
        assert (reply.response, reply.close) == (None, True)
        assert front.bindings == set()  # nothing of the request was applied

    run(tmp_path, scenario)


# ---- DescribeAcls ----

TOPIC_T = creation("t")
BOB_T = creation("t", principal="User:bob", operation=Op.WRITE)
PREFIX_T = creation("t", pattern=P.PREFIXED)
WILDCARD = creation("*")
GROUP_T = creation("t", resource=R.GROUP)
TOPIC_X = creation("x", host="10.0.0.1")
ALL = [TOPIC_T, BOB_T, PREFIX_T, WILDCARD, GROUP_T, TOPIC_X]


def described(response: Any) -> set[AclBinding]:
    assert (response.error_code, response.error_message) == OK
    found = set()
    for r in response.resources:
        assert r.acls, "a resource is listed only with its ACLs"
        for a in r.acls:
            found.add(AclBinding(R(r.resource_type), r.resource_name, P(r.pattern_type),
                                 a.principal, a.host, Op(a.operation), A(a.permission_type)))
    return found


@pytest.mark.parametrize("version", VERSIONS)
def test_describe_filters_as_kafka(tmp_path: Path, version: int) -> None:
    async def scenario(front: AclFront) -> None:
        assert await front.create(version, *ALL) == [OK] * len(ALL)
        everything = await front.describe(version)
        assert described(everything) == {binding(c) for c in ALL}
        # ANY: the exact name, any pattern type.
        assert described(await front.describe(
            version, resource_type_filter=R.TOPIC, resource_name_filter="t")) == {
            binding(TOPIC_T), binding(BOB_T), binding(PREFIX_T)}
        # MATCH: everything that applies to the literal name (exact, "*", prefixes).
        assert described(await front.describe(
            version, resource_type_filter=R.TOPIC, resource_name_filter="tx",
            pattern_type_filter=P.MATCH)) == {binding(WILDCARD), binding(PREFIX_T)}
        # A specific pattern type; entry fields narrow it.
        assert described(await front.describe(
            version, resource_type_filter=R.TOPIC, resource_name_filter="t",
            pattern_type_filter=P.LITERAL, principal_filter="User:bob")) == {binding(BOB_T)}
        assert described(await front.describe(version, host_filter="10.0.0.1")) == {
            binding(TOPIC_X)}
        assert described(await front.describe(version, operation=Op.ALTER)) == set()
        # A code Kafka does not know reads as UNKNOWN, which matches nothing.
        assert described(await front.describe(version, resource_type_filter=99)) == set()

    run(tmp_path, scenario)


def test_describe_groups_the_bindings_by_resource_pattern(tmp_path: Path) -> None:
    async def scenario(front: AclFront) -> None:
        await front.create(3, *ALL)
        response = await front.describe(3)
        assert sorted((r.resource_type, r.resource_name, r.pattern_type, len(r.acls))
                      for r in response.resources) == [
            (R.TOPIC, "*", P.LITERAL, 1), (R.TOPIC, "t", P.LITERAL, 2),
            (R.TOPIC, "t", P.PREFIXED, 1), (R.TOPIC, "x", P.LITERAL, 1),
            (R.GROUP, "t", P.LITERAL, 1)]

    run(tmp_path, scenario)


@pytest.mark.parametrize("field", ["resource_type_filter", "pattern_type_filter", "operation",
                                   "permission_type"])
def test_a_raw_zero_in_the_describe_filter_closes_the_connection(tmp_path: Path,
                                                                 field: str) -> None:
    async def scenario(front: AclFront) -> None:
        reply = await front.reply(ApiKey.DESCRIBE_ACLS, 1, **(ANY_FILTER | {field: 0}))
        assert (reply.response, reply.close) == (None, True)

    run(tmp_path, scenario)


# ---- DeleteAcls ----

def deletions(results: Any) -> list[tuple[int, set[AclBinding]]]:
    out = []
    for r in results:
        assert all((m.error_code, m.error_message) == OK for m in r.matching_acls)
        out.append((r.error_code, {
            AclBinding(R(m.resource_type), m.resource_name, P(m.pattern_type), m.principal,
                       m.host, Op(m.operation), A(m.permission_type))
            for m in r.matching_acls}))
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_delete_answers_per_filter_what_it_deleted(tmp_path: Path, version: int) -> None:
    async def scenario(front: AclFront) -> None:
        await front.create(version, *ALL)
        results = await front.delete(
            version,
            {"resource_type_filter": R.TOPIC, "resource_name_filter": "t",
             "pattern_type_filter": P.LITERAL},
            {"principal_filter": "User:bob"},  # bob's binding again: reported, removed once
            {"resource_type_filter": R.TOPIC, "resource_name_filter": "nothing"},
            {"resource_type_filter": R.TOPIC, "resource_name_filter": "tx",
             "pattern_type_filter": P.MATCH},
            {"resource_type_filter": 99})
        assert deletions(results[:4]) == [
            (0, {binding(TOPIC_T), binding(BOB_T)}), (0, {binding(BOB_T)}), (0, set()),
            (0, {binding(WILDCARD), binding(PREFIX_T)})]
        assert (results[4].error_code, results[4].error_message, results[4].matching_acls) == (
            Errors.INVALID_REQUEST, "Unknown patternFilter.", ())
        assert front.bindings == {binding(GROUP_T), binding(TOPIC_X)}

    run(tmp_path, scenario)


@pytest.mark.parametrize("field", ["resource_type_filter", "pattern_type_filter", "operation",
                                   "permission_type"])
def test_a_raw_zero_in_a_delete_filter_closes_the_connection(tmp_path: Path,
                                                             field: str) -> None:
    async def scenario(front: AclFront) -> None:
        await front.create(2, TOPIC_T)
        m = request_module(ApiKey.DELETE_ACLS, 2)
        reply = await front.reply(ApiKey.DELETE_ACLS, 2, filters=(
            build(m, "DeleteAclsFilter", **ANY_FILTER),
            build(m, "DeleteAclsFilter", **(ANY_FILTER | {field: 0}))))
        assert (reply.response, reply.close) == (None, True)
        assert front.bindings == {binding(TOPIC_T)}

    run(tmp_path, scenario)


# ---- whole-request refusals ----

@pytest.mark.parametrize("version", VERSIONS)
def test_without_an_authorizer_every_answer_is_security_disabled(tmp_path: Path,
                                                                version: int) -> None:
    async def scenario(front: AclFront) -> None:
        response = await front.describe(version)
        assert (response.error_code, response.error_message, response.resources) == (
            Errors.SECURITY_DISABLED, "No Authorizer is configured on the broker", ())
        assert await front.create(version, TOPIC_T, BOB_T) == [
            (Errors.SECURITY_DISABLED, "No Authorizer is configured.")] * 2
        results = await front.delete(version, {}, {"principal_filter": "User:bob"})
        assert [(r.error_code, r.error_message, r.matching_acls) for r in results] == [
            (Errors.SECURITY_DISABLED, "No Authorizer is configured.", ())] * 2
        assert front.bindings == set()

    run(tmp_path, scenario, acls_enabled=False)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_caller_without_the_cluster_operation_is_refused_everywhere(tmp_path: Path,
                                                                     version: int) -> None:
    async def scenario(front: AclFront) -> None:
        await front.create(version, TOPIC_T)
        front.admin = Refusing()
        response = await front.describe(version)
        assert (response.error_code, response.error_message, response.resources) == (
            Errors.CLUSTER_AUTHORIZATION_FAILED, "refused", ())
        assert await front.create(version, BOB_T, WILDCARD) == [
            (Errors.CLUSTER_AUTHORIZATION_FAILED, "refused")] * 2
        results = await front.delete(version, {}, {})
        assert [(r.error_code, r.matching_acls) for r in results] == [
            (Errors.CLUSTER_AUTHORIZATION_FAILED, ())] * 2
        assert front.bindings == {binding(TOPIC_T)}

    run(tmp_path, scenario)


def test_empty_requests_get_empty_answers(tmp_path: Path) -> None:
    async def scenario(front: AclFront) -> None:
        assert await front.create(3) == []
        assert list(await front.delete(3)) == []
        assert described(await front.describe(3)) == set()

    run(tmp_path, scenario)
