"""SCRAM credentials and client quotas as metadata, with real clients against one controller
and two brokers as real processes (authorizer on; PLAINTEXT clients are User:ANONYMOUS, a super
user): a user bootstrapped by `kraft-storage format --add-scram`; confluent-kafka's AdminClient
alters and describes credentials (librdkafka, v0) and kafka-python describes them; kafka-python
sends AlterClientQuotas / DescribeClientQuotas (v1). Alterations reach the active controller
through a broker and are answered once committed; every broker then describes them from its
own metadata; the keys the controller derived from librdkafka's salted password are the ones
RFC 5802 gives for the password; a user created through one broker logs in with SCRAM-SHA-512 on
the other broker's SASL_PLAINTEXT listener (and a wrong password does not); and everything is
still there, the logins too, after every node restarts."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from harness.cluster import ProcessCluster, free_ports, set_node_config, wait_for
from metadata.scram import ScramMechanism as Mechanism
from metadata.scram import credential_from_password, scram_credential
from metadata.topics import METADATA_PARTITION_DIR
from snapshots.source import build_image, open_source

BROKERS = [2, 3]
WAIT_S = 60
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "broker.session.timeout.ms": "1500",
    "broker.heartbeat.interval.ms": "150",
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": "User:ANONYMOUS",
}
BOOTSTRAP_USER = "SCRAM-SHA-512=[name=admin,password=admin-secret]"


def add_sasl_listeners(cluster: ProcessCluster) -> dict[int, int]:
    """A SASL_PLAINTEXT listener with SCRAM-SHA-512 beside each broker's PLAINTEXT one."""
    ports = dict(zip(BROKERS, free_ports(len(BROKERS)), strict=True))
    for broker, port in ports.items():
        node = cluster.nodes[broker]
        set_node_config(node.config_path, {
            "listeners": f"PLAINTEXT://127.0.0.1:{node.kafka_port},ADMIN://127.0.0.1:"
                         f"{node.port},SASL://127.0.0.1:{port}",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                              "ADMIN:PLAINTEXT,SASL:SASL_PLAINTEXT",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.name.sasl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        })
    return ports


def start(cluster: ProcessCluster) -> None:
    cluster.start_all()
    wait_for(lambda: cluster.leader(among={1}), WAIT_S, "an active controller")
    cluster.wait_brokers_unfenced(BROKERS, WAIT_S)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    cluster = ProcessCluster(tmp_path_factory.mktemp("kafka-scram"), 1, dict(SETTINGS))
    try:
        cluster.add_brokers(BROKERS)
        cluster.sasl_ports = add_sasl_listeners(cluster)  # type: ignore[attr-defined]
        cluster.cluster_id = "MkU3OEVBNTcwNTJENDM2Qg"
        for node_id in cluster.nodes:
            flags = ("--add-scram", BOOTSTRAP_USER) if node_id == 1 else ()
            cluster.format_node(node_id, cluster.cluster_id, *flags)
        start(cluster)
        yield cluster
    finally:
        cluster.stop_all()


def admin_of(cluster: ProcessCluster, broker: int) -> AdminClient:
    return AdminClient({"bootstrap.servers":
                        cluster.bootstrap_servers().split(",")[BROKERS.index(broker)]})


# librdkafka's own connection errors while brokers (re)start: the request never reached one.
CLIENT_CONNECTION_ERRORS = {KafkaError._DESTROY_BROKER, KafkaError._TRANSPORT,
                            KafkaError._ALL_BROKERS_DOWN, KafkaError._TIMED_OUT}


def users(admin: AdminClient) -> dict[str, list[tuple[str, int]]] | None:
    """The described users; None when the client lost its connection on the way (callers wait
    for a value, so the next poll asks again), any other error raises."""
    try:
        described = admin.describe_user_scram_credentials().result(timeout=WAIT_S)
    except KafkaException as exc:
        if exc.args[0].code() in CLIENT_CONNECTION_ERRORS:
            return None
        raise
    return {user: sorted((i.mechanism.name, i.iterations) for i in d.scram_credential_infos)
            for user, d in described.items()}


def login(cluster: ProcessCluster, broker: int, user: str, password: str) -> str:
    """Log in with SCRAM-SHA-512 on a broker's SASL listener and ask for metadata: "ok", or
    the first error librdkafka's error callback reports (served by poll)."""
    from confluent_kafka import Producer

    errors: list[KafkaError] = []
    client = Producer({
        "bootstrap.servers": f"127.0.0.1:{cluster.sasl_ports[broker]}",  # type: ignore[attr-defined]
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": user, "sasl.password": password, "error_cb": errors.append})
    try:
        client.list_topics(timeout=5)
        return "ok"
    except KafkaException:
        wait_for(lambda: client.poll(0.1) >= 0 and errors, WAIT_S, "librdkafka's error callback")
        return errors[0].name()


def error_of(future: Any) -> int | None:
    try:
        future.result(timeout=WAIT_S)
    except KafkaException as exc:
        return int(exc.args[0].code())
    return None


def quota_call(client: Any, request: Any) -> Any:
    """kafka-python 3.0 has the quota APIs' messages but no AdminClient method: send one."""
    async def send() -> Any:
        return await client._manager.send(request)

    return client._manager.run(send)


def quotas_of(client: Any) -> dict[tuple[tuple[str, str | None], ...], dict[str, float]]:
    from kafka.protocol.admin import DescribeClientQuotasRequest
    response = quota_call(client, DescribeClientQuotasRequest(components=[], strict=False))
    assert response.error_code == 0, response.error_message
    return {tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
            {v.key: v.value for v in entry.values} for entry in response.entries}


def test_credentials_and_quotas_through_real_clients_survive_a_restart(
    cluster: ProcessCluster,
) -> None:
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import AlterClientQuotasRequest

    admins = {broker: admin_of(cluster, broker) for broker in BROKERS}
    admin = admins[2]
    # The bootstrapped user, in the log since the controller's first batch.
    wait_for(lambda: (users(admin) or {}).get("admin") == [("SCRAM_SHA_512", 4096)], WAIT_S,
             "the bootstrapped user")
    alice = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"alice-secret",
        b"alice-salt")
    bob = UserScramCredentialUpsertion(
        "bob", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096), b"bob-secret")
    nobody = UserScramCredentialDeletion("nobody", ScramMechanism.SCRAM_SHA_256)
    futures = admin.alter_user_scram_credentials([alice, bob, nobody])
    assert {user: error_of(f) for user, f in futures.items()} == {
        "alice": None, "bob": None, "nobody": 91}  # RESOURCE_NOT_FOUND
    expected = {"admin": [("SCRAM_SHA_512", 4096)], "alice": [("SCRAM_SHA_512", 8192)],
                "bob": [("SCRAM_SHA_256", 4096)]}
    for broker in BROKERS:
        wait_for(lambda broker=broker: users(admins[broker]) == expected, WAIT_S,
                 f"broker {broker} to describe the users")
    # Created through broker 2, alice logs in on broker 3 once its metadata has the credential
    # (8,192 iterations, librdkafka's salt); a wrong password is an authentication failure.
    wait_for(lambda: login(cluster, 3, "alice", "alice-secret") == "ok", WAIT_S,
             "alice's login on broker 3")
    assert login(cluster, 3, "alice", "not-alice-secret") == "_AUTHENTICATION"
    named = admin.describe_user_scram_credentials(["alice", "carol"])
    assert error_of(named["carol"]) == 91
    # The controller derived the keys from librdkafka's salted password as RFC 5802 does.
    image = build_image(open_source(str(cluster.data_dir(1) / METADATA_PARTITION_DIR)), None,
                        lambda _: None).image
    assert scram_credential(image, "alice", Mechanism.SCRAM_SHA_512) == credential_from_password(
        Mechanism.SCRAM_SHA_512, "alice-secret", b"alice-salt", 8192)

    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers(),
                              request_timeout_ms=30000)
    try:
        assert {u: [(m.name, c["iterations"]) for c in d["credential_infos"]
                    for m in [c["mechanism"]]]
                for u, d in client.describe_user_scram_credentials(["bob"]).items()} == {
            "bob": [("SCRAM_SHA_256", 4096)]}
        Entry, Entity, Op = (AlterClientQuotasRequest.EntryData,
                             AlterClientQuotasRequest.EntryData.EntityData,
                             AlterClientQuotasRequest.EntryData.OpData)
        response = quota_call(client, AlterClientQuotasRequest(entries=[
            Entry(entity=[Entity(entity_type="user", entity_name="alice")],
                  ops=[Op(key="producer_byte_rate", value=1048576.0, remove=False)]),
            Entry(entity=[Entity(entity_type="client-id", entity_name=None)],
                  ops=[Op(key="consumer_byte_rate", value=2097152.0, remove=False)]),
            Entry(entity=[Entity(entity_type="user", entity_name="bob")],
                  ops=[Op(key="producer_byte_rate", value=10.5, remove=False)]),
        ], validate_only=False))
        assert [(e.error_code, e.error_message) for e in response.entries] == [
            (0, None), (0, None), (42, "producer_byte_rate cannot be a fractional value.")]
        wanted_quotas = {(("user", "alice"),): {"producer_byte_rate": 1048576.0},
                         (("client-id", None),): {"consumer_byte_rate": 2097152.0}}
        wait_for(lambda: quotas_of(client) == wanted_quotas, WAIT_S, "the quotas described")
    finally:
        client.close()

    # Every node restarts: the users and quotas come back from the log.
    cluster.stop_all()
    start(cluster)
    # New clients: a librdkafka client from before the restart may keep waiting for the
    # controller it learned then (seen here: "Failed while waiting for controller").
    admins = {broker: admin_of(cluster, broker) for broker in BROKERS}
    for broker in BROKERS:
        wait_for(lambda broker=broker: users(admins[broker]) == expected, WAIT_S,
                 f"broker {broker} to describe the users after the restart")
    client = KafkaAdminClient(bootstrap_servers=cluster.bootstrap_servers(),
                              request_timeout_ms=30000)
    try:
        wait_for(lambda: quotas_of(client) == wanted_quotas, WAIT_S,
                 "the quotas after the restart")
    finally:
        client.close()
    for broker in BROKERS:  # the credentials came back from the log: a login still works
        assert login(cluster, broker, "alice", "alice-secret") == "ok"
        assert login(cluster, broker, "admin", "admin-secret") == "ok"
