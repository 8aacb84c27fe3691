"""Knowing which cluster answered (chaos seed 32: a CreateTopics acknowledged that no node of
the cluster logged, and "does not exist" for a topic every node held: answers no node of the
cluster gave; the likely source, another cluster's process on the port of a node that was down).

A node's gRPC listener owns its port (no SO_REUSEPORT), every Admin answer carries the node's
cluster id, and an AdminClient given a cluster id refuses any other answer; the chaos writers
journal which endpoint answered each write."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import grpc
import pytest

from harness.cluster import wait_for
from kraft.errors import Errors as E
from kraft.security.tls import new_server
from metadata.admin_service import AdminServicer, add_admin_service
from metadata.rpc import admin_pb2 as pb
from server.admin_client import AdminClient, CommandError
from tests.chaos.writers import Writer, config_topic, create_topic
from tests.unit.test_admin_service import CLUSTER_ID, AdminHarness, TwoControllers


async def _bind_twice(make_first: Callable[[], grpc.aio.Server],
                      make_second: Callable[[], grpc.aio.Server]) -> int:
    """The port a second server got when asked for the one a first listens on (0: refused)."""
    first, second = make_first(), make_second()
    port = first.add_insecure_port("127.0.0.1:0")
    await first.start()
    try:
        return second.add_insecure_port(f"127.0.0.1:{port}")
    except RuntimeError:
        return 0
    finally:
        await first.stop(0)


def test_a_node_listener_shares_its_port_with_no_other_process() -> None:
    # grpc's default (SO_REUSEPORT) lets both bind, and the kernel splits connections.
    def node() -> grpc.aio.Server:
        return new_server([])

    assert asyncio.run(_bind_twice(grpc.aio.server, node)) == 0
    assert asyncio.run(_bind_twice(node, grpc.aio.server)) == 0


class Harness(AdminHarness):
    """The Admin service of cluster CLUSTER_ID, and the same controller's Admin service
    as another cluster's node would answer (its cluster id differs)."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.run(self._start_foreign())

    async def _start_foreign(self) -> None:
        self.foreign = grpc.aio.server()
        port = self.foreign.add_insecure_port("127.0.0.1:0")
        self.foreign_endpoint = f"127.0.0.1:{port}"
        self.foreign_servicer = AdminServicer(self.controller, "another-cluster",
                                              {1: self.foreign_endpoint})
        add_admin_service(self.foreign, self.foreign_servicer)
        await self.foreign.start()

    def close(self) -> None:
        async def stop() -> None:
            await self.foreign.stop(0)
            await self.foreign_servicer.close()

        self.run(stop())
        super().close()


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    harness = Harness(tmp_path_factory.mktemp("identity"))
    yield harness
    harness.close()


def test_a_client_of_one_cluster_takes_answers_of_its_nodes_only(admin: Harness) -> None:
    ours = AdminClient([admin.endpoint], cluster_id=CLUSTER_ID)
    create_topic(ours, "identity-ours")
    assert ours.answered == admin.endpoint

    other = AdminClient([admin.foreign_endpoint], cluster_id=CLUSTER_ID)
    with pytest.raises(CommandError, match="answered for cluster another-cluster, not "
                                           f"{CLUSTER_ID}"):
        create_topic(other, "identity-foreign")
    assert other.answered == admin.foreign_endpoint
    # Without a cluster id (kraft-admin), any node's answer is taken, as before.
    create_topic(AdminClient([admin.foreign_endpoint]), "identity-any")


def test_the_chaos_writers_journal_who_answered(admin: Harness) -> None:
    create_topic(AdminClient([admin.endpoint]), config_topic("identity", 1))  # as at set-up
    stop = threading.Event()
    # A writer starts on server `writer % len(servers)`: writer 1 on the foreign one.
    writer = Writer(1, "identity", [admin.endpoint, admin.foreign_endpoint], 0.0, stop, 0.0,
                    cluster_id=CLUSTER_ID)
    writer.start()
    try:
        wait_for(lambda: sum(w.end_s is not None for w in writer.writes) >= 3, 20,
                 "three writes")
    finally:
        stop.set()
        writer.join(20)
    assert writer.error is None
    first, second, third = writer.writes[:3]
    assert (first.acked, first.answered) == (False, admin.foreign_endpoint)
    assert "another-cluster" in first.error
    # After a failure the writer starts from the next server: one of this cluster.
    assert (second.acked, second.answered) == (True, admin.endpoint)
    assert (third.acked, third.answered) == (True, admin.endpoint)
    assert first.to_json()["answered"] == admin.foreign_endpoint


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoControllers]:
    controllers = TwoControllers(tmp_path_factory.mktemp("pair"))
    yield controllers
    controllers.close()


def test_a_standby_relays_no_answer_of_another_cluster(pair: TwoControllers) -> None:
    """The active controller's endpoint answered by a node of another cluster: the standby
    refuses the answer (NOT_CONTROLLER, naming the cluster) instead of relaying it."""
    async def serve_foreign() -> tuple[grpc.aio.Server, AdminServicer, str]:
        server = grpc.aio.server()
        port = server.add_insecure_port("127.0.0.1:0")
        # The active controller's own image behind another cluster's id: it would answer.
        servicer = AdminServicer(pair.controllers[pair.active], "another-cluster",
                                 pair.endpoints)
        add_admin_service(server, servicer)
        await server.start()
        return server, servicer, f"127.0.0.1:{port}"

    foreign, foreign_servicer, foreign_endpoint = pair.run(serve_foreign())
    standby = AdminServicer(pair.controllers[pair.standby], CLUSTER_ID,
                            {pair.active: foreign_endpoint})
    # Refused by whoever applies it (replication factor 3 with one broker): no side effect.
    request = pb.CreateTopicsRequest(topics=[pb.CreatableTopic(
        name="relayed", num_partitions=1, replication_factor=3)])
    try:
        response = pair.run(standby.ops.call("CreateTopics", request))
        assert response.status.error_code == E.NOT_CONTROLLER, response.status
        assert f"answered for cluster another-cluster, not {CLUSTER_ID}" in \
            response.status.error_message
        # The same forward to this cluster's active controller is relayed as it answered.
        relayed = AdminServicer(pair.controllers[pair.standby], CLUSTER_ID, pair.endpoints)
        response = pair.run(relayed.ops.call("CreateTopics", request))
        assert response.topics[0].error_code == E.INVALID_REPLICATION_FACTOR, response
        pair.run(relayed.close())
    finally:
        pair.run(foreign.stop(0))
        pair.run(foreign_servicer.close())
        pair.run(standby.close())
