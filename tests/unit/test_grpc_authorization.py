"""The gRPC side of authorization (kraft/security/authorizer.py): every RPC of every service is
classified with a Kafka operation, and the interceptor, a real grpc.aio server and the Admin
service together refuse, filter and answer per resource as Kafka does."""

from __future__ import annotations

import asyncio
import importlib
import pathlib
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import grpc
import pytest

from kraft.errors import Errors
from kraft.security.authorizer import (
    METHOD_OPERATIONS,
    NO_CHECK,
    PER_RESOURCE,
    AuthorizingInterceptor,
    peer_address,
)
from metadata.admin_service import AdminServicer, add_admin_service
from metadata.authorizer import admin_checks
from metadata.authorizer.model import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.authorizer.standard import StandardAuthorizer
from metadata.errors import ControllerResult
from metadata.image import MetadataImage, PartitionRegistration
from metadata.records import Endpoint
from metadata.rpc import admin_pb2 as pb
from metadata.rpc import admin_pb2_grpc as rpc
from tests.unit.test_kafka_fakes import make_image

T = TypeVar("T")
ROOT = pathlib.Path(__file__).resolve().parents[2]
# Served only with test hooks enabled, to super users alone (left unlisted on purpose).
TEST_ONLY_SERVICES = {"kraft.raft.v1.TestHooks"}


def every_rpc() -> Iterator[str]:
    """"/package.Service/Method" of every service any generated module of the product has."""
    for package in ("kraft/rpc", "metadata/rpc", "broker/rpc"):
        for path in sorted((ROOT / package).glob("*_pb2.py")):
            module = importlib.import_module(f"{package.replace('/', '.')}.{path.stem}")
            for service in module.DESCRIPTOR.services_by_name.values():
                if service.full_name in TEST_ONLY_SERVICES:
                    continue
                for method in service.methods:
                    yield f"/{service.full_name}/{method.name}"


def test_every_rpc_of_every_service_is_classified() -> None:
    rpcs = list(every_rpc())
    assert len(rpcs) > 30  # the discovery found the services
    assert [m for m in rpcs if m not in METHOD_OPERATIONS] == []
    known = {op.name for op in AclOperation} | {PER_RESOURCE, NO_CHECK}
    assert {m: op for m, op in METHOD_OPERATIONS.items() if op not in known} == {}


def test_every_per_resource_admin_rpc_has_its_checks() -> None:
    per_resource = {m.rsplit("/", 1)[1] for m, op in METHOD_OPERATIONS.items()
                    if op == PER_RESOURCE and m.startswith("/kraft.admin.v1.Admin/")}
    assert per_resource == set(admin_checks._CHECKS)


@pytest.mark.parametrize(("peer", "address"), [
    ("ipv4:127.0.0.1:47936", "127.0.0.1"), ("ipv6:[::1]:5000", "::1"),
    ("ipv6:[fe80::1%eth0]:5000", "fe80::1%eth0"), ("unix:/tmp/s", "/tmp/s")])
def test_peer_address(peer: str, address: str) -> None:
    assert peer_address(peer) == address


# ---- the interceptor and the Admin service on a real server ----


class FakeController:
    """An active controller whose writes answer from the image without changing it."""

    is_active = True
    leader_id = 1
    node_id = 1

    def __init__(self, image: MetadataImage) -> None:
        self.committed_image = image

    async def write(self, rule: Callable[[MetadataImage], ControllerResult[T]]) -> T:
        return rule(self.committed_image).response


def run_admin(authorizer: StandardAuthorizer | None,
              body: Callable[[rpc.AdminStub], Any]) -> Any:
    partitions = {0: PartitionRegistration((1,), (1,), leader=1)}
    image = make_image({1: [Endpoint("PLAINTEXT", "h1", 9092)]},
                       {"orders": partitions, "secret": partitions})

    async def main() -> Any:
        interceptors = [] if authorizer is None else [AuthorizingInterceptor(authorizer)]
        server = grpc.aio.server(interceptors=interceptors)
        add_admin_service(server, AdminServicer(FakeController(image), "c", {}))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                return await body(rpc.AdminStub(channel))
        finally:
            await server.stop(None)

    return asyncio.run(main())


def anonymous_may(*grants: tuple[ResourceType, str, AclOperation]) -> StandardAuthorizer:
    authorizer = StandardAuthorizer(["User:admin"])
    authorizer.load([AclBinding(t, n, PatternType.LITERAL, "User:ANONYMOUS", "127.0.0.1", op,
                                AclPermissionType.ALLOW) for t, n, op in grants])
    return authorizer


async def admin_calls(stub: rpc.AdminStub) -> dict[str, Any]:
    return {
        "create": await stub.CreateTopics(pb.CreateTopicsRequest(validate_only=True, topics=[
            pb.CreatableTopic(name="new-a", num_partitions=1, replication_factor=1),
            pb.CreatableTopic(name="new-b", num_partitions=1, replication_factor=1)])),
        "list": await stub.ListTopics(pb.ListTopicsRequest()),
        "elect": await stub.ElectLeaders(pb.ElectLeadersRequest(all_partitions=True)),
        "cluster": await stub.DescribeCluster(pb.DescribeClusterRequest()),
    }


def test_the_admin_service_authorizes_per_resource_behind_the_interceptor() -> None:
    # The host is part of the grant: the client calls from 127.0.0.1.
    answers = run_admin(anonymous_may((ResourceType.TOPIC, "new-a", AclOperation.CREATE),
                                      (ResourceType.TOPIC, "orders", AclOperation.DESCRIBE)),
                        admin_calls)
    assert {t.name: t.error_code for t in answers["create"].topics} == {
        "new-a": 0, "new-b": Errors.TOPIC_AUTHORIZATION_FAILED}
    assert [t.name for t in answers["list"].topics] == ["orders"]
    assert answers["elect"].status.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert "User:ANONYMOUS may not ALTER on the cluster (ElectLeaders)" in \
        answers["elect"].status.error_message
    assert answers["cluster"].status.error_code == 0  # Kafka checks nothing there


def test_a_grant_for_another_host_does_not_apply() -> None:
    authorizer = StandardAuthorizer()
    authorizer.load([AclBinding(ResourceType.TOPIC, "new-a", PatternType.LITERAL,
                                "User:ANONYMOUS", "10.9.9.9", AclOperation.CREATE,
                                AclPermissionType.ALLOW)])
    answers = run_admin(authorizer, admin_calls)
    assert [t.error_code for t in answers["create"].topics] == \
        [Errors.TOPIC_AUTHORIZATION_FAILED] * 2


def test_without_an_authorizer_everything_is_allowed() -> None:
    answers = run_admin(None, admin_calls)
    assert [t.error_code for t in answers["create"].topics] == [0, 0]
    assert [t.name for t in answers["list"].topics] == ["orders", "secret"]
