"""kraft-admin's Admin commands against a real controller: Kafka-style tables and lines,
the exact --json shapes, one-line errors with Kafka's error names, bounded retries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from kraft.node.raft_node import RaftNode
from kraft.node.service import QuorumServicer
from kraft.rpc import raft_pb2_grpc as raft_rpc
from metadata.admin_service import AdminServicer, add_admin_service
from server import admin_cli, admin_client
from tests.unit.test_admin_service import CLUSTER_ID, AdminHarness, dead_endpoint, until


class QuorumAdminHarness(AdminHarness):
    """The Admin harness whose server also serves the Quorum service, as a controller's
    listener does (features describe reads kraft.version from DescribeQuorum)."""

    async def _start(self, root: Path) -> None:
        await super()._start(root)
        await self.server.stop(0)
        await self.servicer.close()
        self.server = grpc.aio.server()
        self.server.add_insecure_port(self.endpoint)
        self.servicer = AdminServicer(self.controller, CLUSTER_ID, {1: self.endpoint})
        add_admin_service(self.server, self.servicer)
        node = self.controller.client
        assert isinstance(node, RaftNode)
        raft_rpc.add_QuorumServicer_to_server(
            QuorumServicer(node, CLUSTER_ID, "CONTROLLER"), self.server)
        await self.server.start()


@pytest.fixture(scope="module")
def admin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminHarness]:
    harness = QuorumAdminHarness(tmp_path_factory.mktemp("admin-cli"))
    yield harness
    harness.close()


def cli(admin: AdminHarness | str, capsys: pytest.CaptureFixture[str], *args: str
        ) -> tuple[int, str, str]:
    server = admin if isinstance(admin, str) else admin.endpoint
    code = admin_cli.main(["--bootstrap-server", server, *args])
    out, err = capsys.readouterr()
    return code, out, err


def ok(admin: AdminHarness, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = cli(admin, capsys, *args)
    assert (code, err) == (0, ""), err
    return out


def fails(admin: AdminHarness | str, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, _, err = cli(admin, capsys, *args)
    assert code == 1
    assert err.count("\n") == 1, err  # one line
    return err.removeprefix("kraft-admin: ").rstrip("\n")


# ---- topics ----

def test_topics_create_describe_list_delete(admin: AdminHarness,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert ok(admin, capsys, "topics", "create", "--topic", "orders", "--partitions", "2",
              "--replication-factor", "2", "--config", "retention.ms=1000") == \
        "Created topic orders.\n"
    topic = admin.image.topic("orders")
    assert topic is not None
    p0, p1 = topic.partitions[0], topic.partitions[1]
    assert ok(admin, capsys, "topics", "describe", "--topic", "orders") == (
        f"Topic: orders\tTopicId: {topic.topic_id}\tPartitionCount: 2\tReplicationFactor: 2"
        "\tConfigs: retention.ms=1000\n"
        f"\tTopic: orders\tPartition: 0\tLeader: {p0.leader}\tReplicas: {p0.replicas[0]},"
        f"{p0.replicas[1]}\tIsr: {p0.isr[0]},{p0.isr[1]}\tElr: N/A\tLastKnownElr: N/A\n"
        f"\tTopic: orders\tPartition: 1\tLeader: {p1.leader}\tReplicas: {p1.replicas[0]},"
        f"{p1.replicas[1]}\tIsr: {p1.isr[0]},{p1.isr[1]}\tElr: N/A\tLastKnownElr: N/A\n")
    described = json.loads(ok(admin, capsys, "topics", "describe", "--topic", "orders",
                              "--json"))
    assert described == {
        "name": "orders", "topicId": topic.topic_id, "configs": {"retention.ms": "1000"},
        "partitions": [{"partition": i, "leader": p.leader, "replicas": list(p.replicas),
                        "isr": list(p.isr), "leaderEpoch": 0, "partitionEpoch": 0,
                        "leaderRecoveryState": "RECOVERED"} for i, p in ((0, p0), (1, p1))]}
    everything = json.loads(ok(admin, capsys, "topics", "describe", "--json"))
    assert described in everything
    assert "orders\n" in ok(admin, capsys, "topics", "list")
    # --bootstrap-server may also follow the command, as with Kafka's tools.
    assert admin_cli.main(["topics", "list", "--bootstrap-server", admin.endpoint]) == 0
    assert "orders\n" in capsys.readouterr().out
    listed = json.loads(ok(admin, capsys, "topics", "list", "--json"))
    assert {"name": "orders", "topicId": topic.topic_id, "partitionCount": 2,
            "replicationFactor": 2} in listed
    assert ok(admin, capsys, "topics", "delete", "--topic", "orders") == "Deleted topic orders.\n"
    assert fails(admin, capsys, "topics", "describe", "--topic", "orders") == \
        "UNKNOWN_TOPIC_OR_PARTITION: The topic 'orders' does not exist."
    assert ok(admin, capsys, "topics", "delete", "--topic", "orders", "--if-exists") == "\n"


def test_topics_create_errors_are_one_line(admin: AdminHarness,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    ok(admin, capsys, "topics", "create", "--topic", "twice")
    assert fails(admin, capsys, "topics", "create", "--topic", "twice") == \
        "TOPIC_ALREADY_EXISTS: Topic 'twice' already exists."
    ok(admin, capsys, "topics", "create", "--topic", "twice", "--if-not-exists")
    assert fails(admin, capsys, "topics", "create", "--topic", "wide",
                 "--replication-factor", "9") == (
        "INVALID_REPLICATION_FACTOR: Unable to replicate the partition 9 time(s): The target "
        "replication factor of 9 cannot be reached because only 4 broker(s) are registered.")
    assert fails(admin, capsys, "topics", "create", "--topic", "c",
                 "--config", "cleanup.policy=zip") == (
        "INVALID_CONFIG: Invalid value zip for configuration cleanup.policy: String must be "
        "one of: compact, delete")
    assert fails(admin, capsys, "topics", "create", "--topic", "c", "--config", "novalue") == \
        "invalid config 'novalue': expected KEY=VALUE"
    assert fails(admin, capsys, "topics", "create", "--topic", "m",
                 "--replica-assignment", "1:2,x") .startswith("invalid --replica-assignment")
    created = json.loads(ok(admin, capsys, "topics", "create", "--topic", "manual",
                            "--replica-assignment", "1:2,2:3", "--json"))
    assert (created["partitions"], created["replicationFactor"]) == (2, 2)
    assert admin.image.topic("manual").partitions[1].replicas == (2, 3)  # type: ignore[union-attr]


def test_partitions_add(admin: AdminHarness, capsys: pytest.CaptureFixture[str]) -> None:
    ok(admin, capsys, "topics", "create", "--topic", "grow")
    assert ok(admin, capsys, "partitions", "add", "--topic", "grow", "--partitions", "3") == \
        "Topic grow now has 3 partition(s).\n"
    assert fails(admin, capsys, "partitions", "add", "--topic", "grow", "--partitions", "2") == \
        "INVALID_PARTITIONS: The topic grow currently has 3 partition(s); 2 would not be an " \
        "increase."


# ---- brokers, cluster, features ----

def test_brokers_list_table_and_json(admin: AdminHarness,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    lines = ok(admin, capsys, "brokers", "list").splitlines()
    assert lines[0].split() == ["Id", "Epoch", "State", "Rack", "Endpoints"]
    assert lines[1].split() == ["1", "101", "unfenced", "r2", "PLAINTEXT://localhost:9091"]
    assert all(line.endswith("\t") for line in lines)  # Kafka's prettyPrintTable
    brokers = json.loads(ok(admin, capsys, "brokers", "list", "--json"))
    assert brokers[0] == {"id": 1, "epoch": 101, "fenced": False, "inControlledShutdown": False,
                          "rack": "r2", "endpoints": ["PLAINTEXT://localhost:9091"]}
    assert [b["id"] for b in brokers][:4] == [1, 2, 3, 4]


def test_brokers_describe_and_unregister(admin: AdminHarness,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.test_admin_service import broker_record

    admin.write(lambda _image: broker_record(8))
    text = ok(admin, capsys, "brokers", "describe", "--broker-id", "8")
    assert "BrokerId:               8\n" in text and "State:                  unfenced\n" in text
    described = json.loads(ok(admin, capsys, "brokers", "describe", "--broker-id", "8",
                              "--json"))
    assert (described["id"], described["leaderCount"], described["configs"]) == (8, 0, {})
    assert ok(admin, capsys, "brokers", "unregister", "--broker-id", "8") == \
        "Broker 8 is no longer registered.\n"
    assert fails(admin, capsys, "brokers", "unregister", "--broker-id", "8") == \
        "BROKER_ID_NOT_REGISTERED: Broker ID 8 is not currently registered"


def test_cluster_and_features(admin: AdminHarness, capsys: pytest.CaptureFixture[str]) -> None:
    text = ok(admin, capsys, "cluster", "describe")
    assert text.startswith("ClusterId:              admin-test-cluster\n")
    assert f"ActiveController:       1 ({admin.endpoint})\n" in text
    facts = json.loads(ok(admin, capsys, "cluster", "describe", "--json"))
    assert (facts["clusterId"], facts["controllerId"], facts["controllers"]) == (
        "admin-test-cluster", 1, [{"id": 1, "endpoint": admin.endpoint}])
    assert set(facts) == {"clusterId", "controllerId", "controllerEndpoint", "controllers",
                          "brokers", "metadataOffset"}
    features = ok(admin, capsys, "features", "describe").splitlines()
    # kraft.version comes from the Raft layer: this harness's static voter runs level 0.
    assert features[0].startswith("Feature: kraft.version\tSupportedMinVersion: 0\t"
                                  "SupportedMaxVersion: 1\tFinalizedVersionLevel: 0\tEpoch: ")
    assert features[1].startswith("Feature: metadata.version\tSupportedMinVersion: 3.3-IV3\t"
                                  "SupportedMaxVersion: 3.9-IV0\tFinalizedVersionLevel: 3.9-IV0"
                                  "\tEpoch: ")
    assert json.loads(ok(admin, capsys, "features", "describe", "--json"))["features"] == [
        {"name": "kraft.version", "supportedMinVersion": 0, "supportedMaxVersion": 1,
         "finalizedVersionLevel": 0},
        {"name": "metadata.version", "supportedMinVersion": 7, "supportedMaxVersion": 21,
         "finalizedVersionLevel": 21}]
    # --bootstrap-controller reaches the Admin service on the controller listener too.
    assert admin_cli.main(["--bootstrap-controller", admin.endpoint, "features",
                           "describe"]) == 0
    assert "Feature: kraft.version" in capsys.readouterr().out


# ---- leaders and reassignments ----

def test_leaders_elect(admin: AdminHarness, capsys: pytest.CaptureFixture[str]) -> None:
    ok(admin, capsys, "topics", "create", "--topic", "lead", "--partitions", "2",
       "--replication-factor", "2")
    assert ok(admin, capsys, "leaders", "elect", "--election-type", "preferred", "--topic",
              "lead") == "Valid replica already elected for partitions lead-0, lead-1\n"
    results = json.loads(ok(admin, capsys, "leaders", "elect", "--election-type", "UNCLEAN",
                            "--topic", "lead", "--partition", "1", "--json"))
    assert results == [{"topic": "lead", "partition": 1, "error": "ELECTION_NOT_NEEDED",
                        "message": "Leader election not needed for topic partition."}]
    code, out, err = cli(admin, capsys, "leaders", "elect", "--election-type", "preferred",
                         "--topic", "lead", "--partition", "5")
    assert code == 1
    assert out == ("Error completing leader election (PREFERRED) for partition: lead-5: "
                   "UNKNOWN_TOPIC_OR_PARTITION: No such partition as lead-5\n")
    assert err == ("kraft-admin: 1 replica election(s) failed; first: lead-5: "
                   "UNKNOWN_TOPIC_OR_PARTITION: No such partition as lead-5\n")
    assert fails(admin, capsys, "leaders", "elect", "--election-type", "preferred",
                 "--topic", "nope") == \
        "UNKNOWN_TOPIC_OR_PARTITION: The topic 'nope' does not exist."
    assert "leader election" in ok(admin, capsys, "leaders", "elect", "--election-type",
                                   "preferred", "--all-topic-partitions")


def test_reassign_execute_list_cancel(admin: AdminHarness, capsys: pytest.CaptureFixture[str],
                                      tmp_path: Path) -> None:
    ok(admin, capsys, "topics", "create", "--topic", "re", "--replica-assignment", "1:2,1:2")
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "re", "partition": 0, "replicas": [2, 3], "log_dirs": ["any", "any"]},
        {"topic": "re", "partition": 1, "replicas": [2, 4]}]}))
    assert ok(admin, capsys, "reassign", "execute", "--reassignment-json-file", str(plan)) == \
        "Successfully started partition reassignments for re-0,re-1\n"
    assert ok(admin, capsys, "reassign", "list", "--topic", "re") == (
        "Current partition reassignments:\n"
        "re-0: replicas: 2,3,1. adding: 3. removing: 1.\n"
        "re-1: replicas: 2,4,1. adding: 4. removing: 1.\n")
    listed = json.loads(ok(admin, capsys, "reassign", "list", "--json"))
    assert {"topic": "re", "partition": 0, "replicas": [2, 3, 1], "addingReplicas": [3],
            "removingReplicas": [1]} in listed
    admin.report_isr("re", 0, [1, 2, 3])  # the leader reports the new replica in sync
    assert ok(admin, capsys, "reassign", "cancel", "--topic", "re", "--partition", "1") == \
        "Successfully cancelled partition reassignment for: re-1\n"
    assert ok(admin, capsys, "reassign", "list", "--topic", "re") == \
        "No partition reassignments found.\n"
    assert fails(admin, capsys, "reassign", "cancel", "--topic", "re", "--partition", "1") == \
        "re-1: NO_REASSIGNMENT_IN_PROGRESS: No partition reassignment is in progress."
    assert fails(admin, capsys, "reassign", "execute", "--topic", "re", "--partition", "0",
                 "--replicas", "3,99") == (
        "re-0: INVALID_REPLICA_ASSIGNMENT: The manual partition assignment includes broker 99, "
        "but no such broker is registered.")
    assert fails(admin, capsys, "reassign", "execute", "--topic", "re") == \
        "give --reassignment-json-file, or --topic and --partition"


# ---- configs ----

def test_configs_alter_and_describe(admin: AdminHarness,
                                    capsys: pytest.CaptureFixture[str]) -> None:
    ok(admin, capsys, "topics", "create", "--topic", "conf")
    assert ok(admin, capsys, "configs", "alter", "--entity-type", "topics", "--entity-name",
              "conf", "--add-config", "retention.ms=1000,cleanup.policy=[compact,delete]") == \
        "Completed updating config for topic conf.\n"
    assert ok(admin, capsys, "configs", "describe", "--entity-type", "topics", "--entity-name",
              "conf") == (
        "Dynamic configs for topic conf are:\n"
        "  cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:"
        "cleanup.policy=compact,delete, DEFAULT_CONFIG:log.cleanup.policy=delete}\n"
        "  retention.ms=1000 sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:retention.ms=1000, "
        "DEFAULT_CONFIG:log.retention.ms=604800000}\n")
    everything = ok(admin, capsys, "configs", "describe", "--entity-type", "topics",
                    "--entity-name", "conf", "--all")
    assert everything.startswith("All configs for topic conf are:\n")
    assert "  segment.bytes=1073741824 sensitive=false" in everything
    [described] = json.loads(ok(admin, capsys, "configs", "describe", "--entity-type",
                                "topics", "--entity-name", "conf", "--json"))
    assert described["entityName"] == "conf"
    assert described["configs"][1] == {
        "name": "retention.ms", "value": "1000", "source": "DYNAMIC_TOPIC_CONFIG",
        "isDefault": False, "isSensitive": False, "readOnly": False, "type": "LONG",
        "synonyms": [
            {"name": "retention.ms", "value": "1000", "source": "DYNAMIC_TOPIC_CONFIG"},
            {"name": "log.retention.ms", "value": "604800000", "source": "DEFAULT_CONFIG"}]}
    ok(admin, capsys, "configs", "alter", "--entity-type", "topics", "--entity-name", "conf",
       "--delete-config", "retention.ms,cleanup.policy")
    assert ok(admin, capsys, "configs", "describe", "--entity-type", "topics", "--entity-name",
              "conf") == "Dynamic configs for topic conf are:\n"
    assert fails(admin, capsys, "configs", "alter", "--entity-type", "topics", "--entity-name",
                 "conf", "--add-config", "retention.ms=soon") == (
        "INVALID_CONFIG: Invalid value soon for configuration retention.ms: Not a number of "
        "type LONG")
    assert fails(admin, capsys, "configs", "alter", "--entity-type", "topics", "--entity-name",
                 "ghost", "--add-config", "retention.ms=1") == \
        "UNKNOWN_TOPIC_OR_PARTITION: The topic 'ghost' does not exist."


def test_broker_configs_and_the_cluster_default(admin: AdminHarness,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert ok(admin, capsys, "configs", "alter", "--entity-type", "brokers", "--entity-default",
              "--add-config", "auto.leader.rebalance.enable=false") == \
        "Completed updating default config for brokers in the cluster.\n"
    assert ok(admin, capsys, "configs", "alter", "--entity-type", "brokers", "--entity-name",
              "3", "--add-config", "leader.imbalance.per.broker.percentage=20") == \
        "Completed updating config for broker 3.\n"
    assert ok(admin, capsys, "configs", "describe", "--entity-type", "brokers",
              "--entity-default") == (
        "Default configs for brokers in the cluster are:\n"
        "  auto.leader.rebalance.enable=false sensitive=false synonyms={"
        "DYNAMIC_DEFAULT_BROKER_CONFIG:auto.leader.rebalance.enable=false, "
        "DEFAULT_CONFIG:auto.leader.rebalance.enable=true}\n")
    every_broker = ok(admin, capsys, "configs", "describe", "--entity-type", "brokers")
    assert "Dynamic configs for broker 3 are:\n  leader.imbalance.per.broker.percentage=20" \
        in every_broker
    assert every_broker.rstrip("\n").endswith("DEFAULT_CONFIG:auto.leader.rebalance.enable=true}")
    assert fails(admin, capsys, "configs", "alter", "--entity-type", "brokers",
                 "--entity-default", "--add-config", "num.partitions=0") == (
        "INVALID_CONFIG: Invalid value 0 for configuration num.partitions: Value must be at "
        "least 1")
    assert fails(admin, capsys, "configs", "alter", "--entity-type", "brokers",
                 "--entity-default", "--add-config", "oops") == \
        'Invalid entity config: all configs to be added must be in the format "key=val".'
    ok(admin, capsys, "configs", "alter", "--entity-type", "brokers", "--entity-default",
       "--delete-config", "auto.leader.rebalance.enable")


# ---- reaching a controller ----

def test_unreachable_servers_are_skipped_and_bad_addresses_refused(
    admin: AdminHarness, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(admin_client, "RETRY_FOR_S", 5.0)
    servers = f"{dead_endpoint()},{admin.endpoint}"
    assert "Id" in ok(servers, capsys, "brokers", "list")  # type: ignore[arg-type]
    monkeypatch.setattr(admin_client, "RETRY_FOR_S", 0.3)
    assert fails(dead_endpoint(), capsys, "topics", "list").startswith(
        "gave up after 0.3 s: 127.0.0.1:")
    assert fails("no-port", capsys, "topics", "list") == \
        "invalid address 'no-port': expected HOST:PORT"


def test_not_controller_is_retried_then_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    harness = AdminHarness(tmp_path, brokers=(1,))
    try:
        async def resign() -> None:
            core = harness.controller.client.core
            assert core is not None
            core.begin_shutdown(0)
            harness.controller.client._process()
            await until(lambda: not harness.controller.is_active)

        harness.run(resign())
        monkeypatch.setattr(admin_client, "RETRY_FOR_S", 0.3)
        # It resigned: no leader is known, so nothing to forward to or follow.
        assert fails(harness, capsys, "topics", "create", "--topic", "t") == \
            "gave up after 0.3 s: NOT_CONTROLLER: This is not the active controller"
        assert "1" in ok(harness, capsys, "brokers", "list")  # reads need no controller
    finally:
        harness.close()
