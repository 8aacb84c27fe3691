"""The three attacks of issue 27, with real processes over mTLS and real clients: a client whose
certificate the cluster CA signed, but that holds no grant (allow.everyone.if.no.acl.found is
false), can

1. not pose as a follower: a Fetch (and a ListOffsets) naming a follower's replica id is refused
   on every partition, so the leader's high watermark does not move for an acks=all write while
   both real followers are frozen (it moved before: acks=all was acknowledged by no follower);
2. not create topics through Metadata's auto-creation (TOPIC_AUTHORIZATION_FAILED, no topic);
3. not overwrite another group's committed offset with OffsetCommit, nor kick a live consumer
   out of its group with LeaveGroup (GROUP_AUTHORIZATION_FAILED, offset and member intact).

The nodes and the `admin` certificate are super users; no ACL is needed (nor created) here."""

from __future__ import annotations

import asyncio
import json
import signal
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.api import FetchParams, FetchPartition, ListOffsetsPartition
from broker.kafka.client import KafkaClient
from broker.kafka.codec import build, request_module
from broker.kafka.tls import client_ssl_context
from broker.kafka.versions import ApiKey
from harness.cluster import ProcessCluster, run_cli, wait_for
from kraft.errors import Errors
from kraft.security.certs import make_test_certs, principal_of
from kraft.security.tls import TlsConfig

BROKERS = [2, 3, 4]
WAIT_S = 60
LATEST = -1


class Secured:
    def __init__(self, cluster: ProcessCluster, certs: Path, root: Path) -> None:
        self.cluster = cluster
        self.certs = certs
        self.admin_config = root / "admin.properties"
        self.admin_config.write_text(
            "security.protocol=SSL\n"
            f"ssl.keystore.location={certs / 'admin.pem'}\n"
            f"ssl.truststore.location={certs / 'ca.pem'}\n")

    def admin(self, *args: str) -> str:
        out = run_cli("server.admin_cli", "--bootstrap-server", self.cluster.nodes[1].endpoint,
                      "--command-config", str(self.admin_config), *args)
        assert out.returncode == 0, out.stderr
        return out.stdout

    def partitions(self, topic: str) -> list[dict[str, Any]]:
        out = run_cli("server.admin_cli", "--bootstrap-server", self.cluster.nodes[1].endpoint,
                      "--command-config", str(self.admin_config),
                      "topics", "describe", "--topic", topic, "--json")
        if out.returncode != 0:
            return []
        found = json.loads(out.stdout)
        found = found[0] if isinstance(found, list) and found else found
        return list(found.get("partitions", [])) if isinstance(found, dict) else []

    def topics(self) -> list[str]:
        return self.admin("topics", "list").split()

    def create_topic(self, topic: str, rf: int, *configs: str) -> dict[str, Any]:
        args = ["topics", "create", "--topic", topic, "--partitions", "1",
                "--replication-factor", str(rf)]
        for config in configs:
            args += ["--config", config]
        self.admin(*args)
        return wait_for(lambda: next((p for p in self.partitions(topic)
                                      if p["leader"] >= 0 and len(p["isr"]) == rf), None),
                        WAIT_S, f"{topic} to have a leader and a full ISR")

    def client_config(self, name: str) -> dict[str, object]:
        """confluent-kafka settings for the holder of `name`'s certificate."""
        keystore = str(self.certs / f"{name}.pem")
        return {"bootstrap.servers": self.cluster.bootstrap_servers(), "security.protocol": "SSL",
                "ssl.ca.location": str(self.certs / "ca.pem"),
                "ssl.certificate.location": keystore, "ssl.key.location": keystore,
                "ssl.endpoint.identification.algorithm": "none"}

    def kafka_python_config(self, name: str) -> dict[str, object]:
        keystore = str(self.certs / f"{name}.pem")
        return {"bootstrap_servers": self.cluster.bootstrap_servers().split(","),
                "security_protocol": "SSL", "ssl_cafile": str(self.certs / "ca.pem"),
                "ssl_certfile": keystore, "ssl_keyfile": keystore, "ssl_check_hostname": False}

    def kafka_client(self, name: str, broker: int) -> KafkaClient:
        """The project's own Kafka client, which can name a replica id, as `name`."""
        tls = TlsConfig(str(self.certs / f"{name}.pem"), str(self.certs / "ca.pem"))
        return KafkaClient("127.0.0.1", self.cluster.nodes[broker].kafka_port,
                           client_ssl_context(tls), client_id=name, request_timeout_s=15)


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    yield from secured_cluster(tmp_path_factory)


def secured_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    """One controller and three brokers over mTLS with the authorizer, started; stopped after."""
    root = tmp_path_factory.mktemp("authorization")
    certs = root / "certs"
    nodes = ["controller-1", *(f"broker-{b}" for b in BROKERS)]
    make_test_certs(certs, [*nodes, "admin", "attacker", "alice"])
    cluster = ProcessCluster(root / "cluster", 1, {"internal.test.hooks.enable": "false"})
    cluster.add_brokers(BROKERS)
    for node_id, node in cluster.nodes.items():
        name = "controller-1" if node_id == 1 else f"broker-{node_id}"
        with node.config_path.open("a") as config:
            config.write(
                f"ssl.keystore.location={certs / f'{name}.pem'}\n"
                f"ssl.truststore.location={certs / 'ca.pem'}\n"
                "listener.security.protocol.map=CONTROLLER:SSL,PLAINTEXT:SSL,ADMIN:SSL\n"
                "ssl.client.auth=required\n"
                "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n"
                f"super.users={';'.join(principal_of(n) for n in [*nodes, 'admin'])}\n"
                # The attack must happen while the frozen followers are still in the ISR.
                "broker.session.timeout.ms=60000\nreplica.lag.time.max.ms=60000\n")
    secured = Secured(cluster, certs, root)
    try:
        cluster.format()
        cluster.start_all()

        def unfenced() -> bool:
            out = run_cli("server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint,
                          "--command-config", str(secured.admin_config), "brokers", "list",
                          "--json")
            return out.returncode == 0 and sorted(
                b["id"] for b in json.loads(out.stdout) if not b["fenced"]) == BROKERS
        wait_for(unfenced, WAIT_S, "the brokers to register over mTLS and be unfenced")
        yield secured
    finally:
        for node_id in BROKERS:  # a test that failed midway may leave one stopped
            if cluster.nodes[node_id].alive:
                cluster.signal(node_id, signal.SIGCONT)
        cluster.stop_all()


def test_a_client_cannot_pose_as_a_follower_to_move_the_high_watermark(secured: Secured) -> None:
    from confluent_kafka import Producer

    partition = secured.create_topic("acks", 3, "min.insync.replicas=3")
    leader = partition["leader"]
    followers = [b for b in BROKERS if b != leader]
    delivered: list[Any] = []
    producer = Producer({**secured.client_config("admin"), "acks": "all",
                         "message.timeout.ms": 120000})
    for follower in followers:
        secured.cluster.signal(follower, signal.SIGSTOP)
    try:
        producer.produce("acks", value=b"held by the leader alone",
                         on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0)

        async def attack() -> tuple[list[Any], list[Any], int]:
            admin = secured.kafka_client("admin", leader)
            attacker = secured.kafka_client("attacker", leader)
            await admin.connect()
            await attacker.connect()
            try:
                log_end = ListOffsetsPartition("acks", 0, LATEST)

                async def appended() -> int:  # the leader's log end, as a super user sees it
                    return (await admin.list_offsets(followers[0], [log_end]))[0].offset

                while await appended() < 1:  # until the write reached the leader's log
                    await asyncio.sleep(0.05)  # polling interval, bounded by the wait below
                # What the attacker did to learn the log end: a ListOffsets as a replica.
                learned = await attacker.list_offsets(followers[0], [log_end])
                # Then a Fetch at the log end as each frozen follower.
                fetched = [(await attacker.fetch(FetchParams(
                    [FetchPartition("acks", 0, fetch_offset=1, partition_max_bytes=1 << 20)],
                    max_wait_ms=0, replica_id=follower)))[0] for follower in followers]
                high_watermark = (await admin.list_offsets(-1, [log_end]))[0].offset
                return learned, fetched, high_watermark
            finally:
                await admin.close()
                await attacker.close()

        learned, fetched, high_watermark = asyncio.run(asyncio.wait_for(attack(), WAIT_S))
        assert high_watermark == 0  # no follower holds the record: nothing is committed
        producer.poll(0)
        assert delivered == []  # acks=all is not acknowledged
        assert [r.error for r in learned] == [Errors.TOPIC_AUTHORIZATION_FAILED]
        assert [r.error for r in fetched] == [Errors.TOPIC_AUTHORIZATION_FAILED] * 2
    finally:
        for follower in followers:
            secured.cluster.signal(follower, signal.SIGCONT)
    # The real followers catch up and the write is acknowledged as it should be.
    assert producer.flush(WAIT_S) == 0 and delivered == [None]
    logs = secured.cluster.logs(leader)
    assert (f"Principal = {principal_of('attacker')} is Denied operation = CLUSTER_ACTION"
            in logs)


def test_a_client_cannot_create_topics_through_metadata(secured: Secured) -> None:
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import TopicAuthorizationFailedError

    errors: list[Any] = []
    producer = Producer({**secured.client_config("attacker"), "message.timeout.ms": 10000})
    producer.produce("auto-by-confluent", value=b"x",
                     on_delivery=lambda err, msg: errors.append(err))
    producer.flush(WAIT_S)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    python_producer = KafkaProducer(**secured.kafka_python_config("attacker"),
                                    max_block_ms=10000)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            python_producer.send("auto-by-kafka-python", b"x").get(timeout=WAIT_S)
    finally:
        python_producer.close(timeout=5)
    # A super user's auto-creation goes through the same brokers after the attacker's: once
    # its topic exists, the attacker's would too if they had been created.
    control = Producer({**secured.client_config("admin"), "message.timeout.ms": 30000})
    control.produce("auto-by-admin", value=b"x")
    assert control.flush(WAIT_S) == 0

    def created() -> list[str] | None:
        topics = secured.topics()
        return topics if "auto-by-admin" in topics else None

    topics = wait_for(created, WAIT_S, "the super user's auto-created topic")
    assert "auto-by-confluent" not in topics and "auto-by-kafka-python" not in topics


def test_a_client_cannot_overwrite_offsets_or_evict_members_of_another_group(
        secured: Secured) -> None:
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import KafkaConsumer
    from kafka import TopicPartition as PyTopicPartition
    from kafka.errors import GroupAuthorizationFailedError
    from kafka.structs import OffsetAndMetadata

    secured.create_topic("events", 1)
    group = f"victims-{uuid.uuid4().hex[:6]}"
    victim = Consumer({**secured.client_config("admin"), "group.id": group,
                       "enable.auto.commit": False, "session.timeout.ms": 45000})
    victim.subscribe(["events"])

    def joined() -> str | None:
        victim.poll(0.2)  # the consumer joins while it polls
        return victim.memberid() if victim.assignment() else None

    member = wait_for(joined, WAIT_S, "the victim to join its group")
    victim.commit(offsets=[TopicPartition("events", 0, 2)], asynchronous=False)
    admin = AdminClient(secured.client_config("admin"))

    def committed() -> int:
        (request,) = admin.list_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group)]).values()
        return int(request.result(WAIT_S).topic_partitions[0].offset)

    def members() -> list[str]:
        described = admin.describe_consumer_groups([group])[group].result(WAIT_S)
        return [m.member_id for m in described.members]

    assert committed() == 2
    async def leave() -> list[int]:
        """A LeaveGroup naming the victim, sent to every broker (one is its coordinator)."""
        codes = []
        for broker in BROKERS:
            client = secured.kafka_client("attacker", broker)
            await client.connect()
            try:
                module = request_module(ApiKey.LEAVE_GROUP, 5)
                answer = await client.request(build(
                    module, "LeaveGroupRequest", group_id=group, members=(build(
                        module, "MemberIdentity", member_id=member, group_instance_id=None,
                        reason="evicted"),)))
                codes.append(int(answer.error_code))
            finally:
                await client.close()
        return codes

    # The attacks of issue 27: the live consumer kicked out with LeaveGroup, then, once the
    # group is empty, its committed offset overwritten (2 -> 999999) by kafka-python.
    assert asyncio.run(leave()) == [Errors.GROUP_AUTHORIZATION_FAILED] * len(BROKERS)
    victim.poll(0.2)
    assert members() == [member]
    victim.close()
    attacker = KafkaConsumer(**secured.kafka_python_config("attacker"), group_id=group,
                             enable_auto_commit=False)
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            attacker.commit({PyTopicPartition("events", 0): OffsetAndMetadata(999999, "", -1)})
    finally:
        attacker.close()
    assert committed() == 2
