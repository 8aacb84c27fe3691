"""DescribeUserScramCredentials (50), AlterUserScramCredentials (51), DescribeClientQuotas (48)
and AlterClientQuotas (49) on the Kafka front (broker/kafka/scram_api.py, quotas_api.py): real
requests encoded with kio and decoded as the server decodes them, handled over the admin
operations of a live one-voter controller, and the answers decoded back — every per-user and
per-entity error of kafka-security.md §3 and §5, and whole-request refusals."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from broker.kafka.admin_common import AdminBackend
from broker.kafka.codec import (
    build,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    request_module,
)
from broker.kafka.quotas_api import handle_alter_client_quotas, handle_describe_client_quotas
from broker.kafka.scram_api import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from broker.kafka.versions import SUPPORTED, ApiKey
from kraft.core.config import RaftConfig
from kraft.errors import Errors
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import RaftNode
from metadata.admin_ops import AdminOperations
from metadata.controller import QuorumController
from metadata.scram import ScramMechanism, credential_from_password, salted_password
from tests.unit.controller_harness import attach_controller
from tests.unit.test_admin_service import until
from tests.unit.test_kafka_acls_api import Refusing

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qg"
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
HANDLERS: dict[int, tuple[str, Callable[[AdminBackend, int, Any], Awaitable[Any]]]] = {
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: ("DescribeUserScramCredentialsRequest",
                                             handle_describe_user_scram_credentials),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: ("AlterUserScramCredentialsRequest",
                                          handle_alter_user_scram_credentials),
    ApiKey.DESCRIBE_CLIENT_QUOTAS: ("DescribeClientQuotasRequest",
                                    handle_describe_client_quotas),
    ApiKey.ALTER_CLIENT_QUOTAS: ("AlterClientQuotasRequest", handle_alter_client_quotas),
}


class Front:
    def __init__(self, root: Path) -> None:
        self.root = root

    async def start(self) -> None:
        self.node = RaftNode(RaftConfig(CLUSTER_ID, 1, {1: "127.0.0.1:1"}),
                             SegmentedLog(self.root / "log"),
                             QuorumStateStore(self.root / "quorum-state"), rng=random.Random(1))
        self.controller: QuorumController = attach_controller(self.node, noop_interval_ms=0)
        await self.node.start()
        await until(lambda: self.controller.is_active
                    and "metadata.version" in self.controller.committed_image.features)
        self.ops = AdminOperations(self.controller, CLUSTER_ID, {1: "127.0.0.1:1"})
        self.admin: AdminBackend = self.ops

    async def close(self) -> None:
        await self.ops.close()
        await self.controller.close()
        await self.node.stop()

    async def call(self, api_key: int, version: int, **fields: Any) -> Any:
        name, handler = HANDLERS[api_key]
        frame = encode_request(7, "test", build(request_module(api_key, version), name,
                                                **fields))
        request = decode_request(frame[4:])
        reply = await handler(self.admin, request.api_version, request.body)
        assert reply.response is not None and not reply.close
        correlation_id, response = decode_response(
            api_key, version, encode_response(7, reply.response)[4:])
        assert correlation_id == 7
        return response

    async def alter_scram(self, deletions: list[tuple[str, int]] = (),  # type: ignore[assignment]
                          upsertions: list[tuple[str, int, int, str]] = ()  # type: ignore[assignment]
                          ) -> dict[str, tuple[int, str | None]]:
        m = request_module(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0)
        ups = []
        for name, mechanism, iterations, password in upsertions:
            known = ScramMechanism.of_code(mechanism)
            salted = (b"x" * 64 if known is ScramMechanism.UNKNOWN
                      else salted_password(known, password.encode(), b"salt", iterations))
            ups.append(build(m, "ScramCredentialUpsertion", name=name, mechanism=mechanism,
                             iterations=iterations, salt=b"salt", salted_password=salted))
        response = await self.call(
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, deletions=tuple(
                build(m, "ScramCredentialDeletion", name=n, mechanism=mech)
                for n, mech in deletions), upsertions=tuple(ups))
        return {r.user: (r.error_code, r.error_message) for r in response.results}

    async def describe_scram(self, users: list[str] | None) -> Any:
        m = request_module(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0)
        return await self.call(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, users=None
                               if users is None else tuple(build(m, "UserName", name=u)
                                                           for u in users))

    async def alter_quotas(self, version: int, *entries: tuple[dict[str, str | None],
                                                               dict[str, float | None]],
                           validate_only: bool = False) -> list[tuple[Any, int, str | None]]:
        m = request_module(ApiKey.ALTER_CLIENT_QUOTAS, version)
        response = await self.call(ApiKey.ALTER_CLIENT_QUOTAS, version, entries=tuple(
            build(m, "EntryData", entity=tuple(
                build(m, "EntityData", entity_type=t, entity_name=n) for t, n in entity.items()),
                ops=tuple(build(m, "OpData", key=k, value=0.0 if v is None else v,
                                remove=v is None) for k, v in ops.items()))
            for entity, ops in entries), validate_only=validate_only)
        return [({e.entity_type: e.entity_name for e in r.entity}, r.error_code,
                 r.error_message) for r in response.entries]

    async def describe_quotas(self, version: int, *components: tuple[str, int, str | None],
                              strict: bool = False) -> Any:
        m = request_module(ApiKey.DESCRIBE_CLIENT_QUOTAS, version)
        return await self.call(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, components=tuple(
            build(m, "ComponentData", entity_type=t, match_type=mt, match=match)
            for t, mt, match in components), strict=strict)


def run(tmp_path: Path, scenario: Callable[[Front], Awaitable[None]]) -> None:
    async def main() -> None:
        front = Front(tmp_path)
        await front.start()
        try:
            await scenario(front)
        finally:
            await front.close()

    asyncio.run(main())


def test_the_four_apis_are_served_at_kafka_4_ranges() -> None:
    assert {k: SUPPORTED[k] for k in HANDLERS} == {
        ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1), ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0)}


def test_scram_credentials_are_altered_and_described_with_kafkas_errors(tmp_path: Path) -> None:
    async def scenario(front: Front) -> None:
        assert await front.alter_scram(upsertions=[("alice", SHA512, 8192, "pw"),
                                                   ("bob", SHA256, 4096, "pw2")]) == {
            "alice": (0, None), "bob": (0, None)}
        image = front.controller.committed_image
        assert image.scram["alice"][SHA512] == credential_from_password(
            SHA512, "pw", b"salt", 8192)
        everyone = await front.describe_scram(None)
        assert everyone.error_code == 0
        assert [(r.user, r.error_code, [(c.mechanism, c.iterations) for c in r.credential_infos])
                for r in everyone.results] == [("alice", 0, [(2, 8192)]), ("bob", 0, [(1, 4096)])]
        assert (await front.describe_scram([])).results == everyone.results
        named = await front.describe_scram(["bob", "nobody", "bob"])
        assert [(r.user, r.error_code) for r in named.results] == [
            ("bob", Errors.DUPLICATE_RESOURCE), ("nobody", Errors.RESOURCE_NOT_FOUND)]
        answers = await front.alter_scram(
            deletions=[("bob", SHA512), ("", SHA512)],
            upsertions=[("carol", 3, 4096, "pw"), ("dave", SHA512, 100, "pw"),
                        ("erin", SHA512, 20000, "pw"), ("alice", SHA256, 4096, "a"),
                        ("alice", SHA512, 4096, "b"), ("frank", SHA256, 4096, "f")])
        assert answers == {
            "bob": (Errors.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist"),
            "": (Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
            "carol": (Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
            "dave": (Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
            "erin": (Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
            "alice": (Errors.DUPLICATE_RESOURCE,
                      "A user credential cannot be altered twice in the same request"),
            "frank": (0, None)}
        image = front.controller.committed_image
        assert set(image.scram) == {"alice", "bob", "frank"}
        assert set(image.scram["alice"]) == {SHA512}  # the duplicated user is untouched
        assert await front.alter_scram(deletions=[("bob", SHA256)]) == {"bob": (0, None)}
        assert "bob" not in front.controller.committed_image.scram
        assert await front.alter_scram() == {}

    run(tmp_path, scenario)


def test_client_quotas_are_altered_and_described_with_kafkas_errors(tmp_path: Path) -> None:
    async def scenario(front: Front) -> None:
        for version in (0, 1):
            results = await front.alter_quotas(
                version, ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": 1024.0}),
                ({"user": None}, {"consumer_byte_rate": 2048.0, "request_percentage": 50.0}),
                ({"user": "bob"}, {"producer_byte_rate": 1.5}),
                ({"ip": "10.0.0.1", "user": "x"}, {"connection_creation_rate": 1.0}),
                ({"group": "g"}, {"producer_byte_rate": 1.0}))
            assert results == [
                ({"user": "alice", "client-id": "app"}, 0, None), ({"user": None}, 0, None),
                ({"user": "bob"}, Errors.INVALID_REQUEST,
                 "producer_byte_rate cannot be a fractional value."),
                ({"ip": "10.0.0.1", "user": "x"}, Errors.INVALID_REQUEST,
                 "Invalid quota entity combination, IP entity should not be combined with "
                 "User or ClientId"),
                ({"group": "g"}, Errors.INVALID_REQUEST,
                 "Unhandled client quota entity type: group")]
            described = await front.describe_quotas(version, ("user", 2, None))
            assert described.error_code == 0
            assert [({e.entity_type: e.entity_name for e in entry.entity},
                     {v.key: v.value for v in entry.values}) for entry in described.entries] == [
                ({"client-id": "app", "user": "alice"}, {"producer_byte_rate": 1024.0}),
                ({"user": None}, {"consumer_byte_rate": 2048.0, "request_percentage": 50.0})]
            strict = await front.describe_quotas(version, ("user", 0, "alice"), strict=True)
            assert strict.entries == ()
            bad = await front.describe_quotas(version, ("user", 0, None))
            assert (bad.error_code, bad.error_message, bad.entries) == (
                Errors.INVALID_REQUEST,
                "Request specified MATCH_TYPE_EXACT, but set match string to null.", None)
            unsupported = await front.describe_quotas(version, ("group", 2, None))
            assert unsupported.error_code == Errors.UNSUPPORTED_VERSION
            # remove what this round set, so the next version starts empty
            assert [r[1] for r in await front.alter_quotas(
                version, ({"user": "alice", "client-id": "app"}, {"producer_byte_rate": None}),
                ({"user": None}, {"consumer_byte_rate": None, "request_percentage": None}))] \
                == [0, 0]
            assert dict(front.controller.committed_image.client_quotas) == {}
        await front.alter_quotas(1, ({"user": "z"}, {"producer_byte_rate": 5.0}),
                                 validate_only=True)
        assert dict(front.controller.committed_image.client_quotas) == {}

    run(tmp_path, scenario)


@pytest.mark.parametrize("api_key", list(HANDLERS))
def test_a_refused_request_fails_whole_with_the_refusal(tmp_path: Path, api_key: int) -> None:
    async def scenario(front: Front) -> None:
        front.admin = Refusing()
        denied = Errors.CLUSTER_AUTHORIZATION_FAILED
        if api_key == ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
            assert await front.alter_scram(deletions=[("a", SHA512)], upsertions=[
                ("b", SHA512, 4096, "p"), ("a", SHA256, 4096, "p")]) == {
                "a": (denied, "refused"), "b": (denied, "refused")}
        elif api_key == ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
            response = await front.describe_scram(["a"])
            assert (response.error_code, response.error_message, response.results) == (
                denied, "refused", ())
        elif api_key == ApiKey.ALTER_CLIENT_QUOTAS:
            assert await front.alter_quotas(1, ({"user": "a"}, {"producer_byte_rate": 1.0})) \
                == [({"user": "a"}, denied, "refused")]
        else:
            response = await front.describe_quotas(1)
            assert (response.error_code, response.entries) == (denied, None)

    run(tmp_path, scenario)
