"""SASL on the Kafka listener with the real clients, in real processes (issue 29 items 1, 5).

One controller and one broker. The broker's clients connect to a SASL_SSL listener (SECURE,
SCRAM-SHA-512, the users bootstrapped into the metadata log by `kraft-storage format
--add-scram`) and a SASL_PLAINTEXT one (PLAINAUTH, PLAIN, the users of the listener's JAAS
config); replication, the controllers and the admin CLI stay on PLAINTEXT. The
StandardAuthorizer is on: alice and bob may use the `sasl-` topics and groups, carol nothing,
so the principal a login establishes is the one the ACLs judge. confluent-kafka and
kafka-python each produce, consume in a group and commit over both listeners; a wrong
password is refused with each client's own authentication error."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.cluster import ProcessCluster, free_ports, run_cli, set_node_config, wait_for
from kraft.security.certs import make_test_certs

WAIT_S = 60
ALICE, BOB, CAROL = ("alice", "alice-secret"), ("bob", "bob-secret"), ("carol", "carol-secret")
WRONG = "Wr0ng-passw0rd"
JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
        f'user_{BOB[0]}="{BOB[1]}" user_{CAROL[0]}="{CAROL[1]}";')


class SaslCluster:
    def __init__(self, cluster: ProcessCluster, ports: dict[str, int], ca: Path) -> None:
        self.cluster = cluster
        self.ports = ports
        self.ca = ca
        self.committed: list[tuple[str, str]] = []  # (topic, group): 20 records read, committed

    def confluent(self, listener: str, user: tuple[str, str], **extra: Any) -> dict[str, Any]:
        secure = listener == "SECURE"
        config: dict[str, Any] = {
            "bootstrap.servers": f"127.0.0.1:{self.ports[listener]}",
            "security.protocol": "SASL_SSL" if secure else "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512" if secure else "PLAIN",
            "sasl.username": user[0], "sasl.password": user[1], **extra}
        if secure:
            config["ssl.ca.location"] = str(self.ca)
        return config

    def kafka_python(self, listener: str, user: tuple[str, str]) -> dict[str, Any]:
        secure = listener == "SECURE"
        config: dict[str, Any] = {
            "bootstrap_servers": f"127.0.0.1:{self.ports[listener]}",
            "security_protocol": "SASL_SSL" if secure else "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512" if secure else "PLAIN",
            "sasl_plain_username": user[0], "sasl_plain_password": user[1]}
        if secure:
            config["ssl_cafile"] = str(self.ca)
        return config


@pytest.fixture(scope="module")
def sasl(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SaslCluster]:
    root = tmp_path_factory.mktemp("sasl")
    certs = make_test_certs(root / "certs", ["broker-2"])
    cluster = ProcessCluster(root, 1, {
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT node-to-node traffic and the CLI
        "internal.test.hooks.enable": "false"})
    (broker,) = cluster.add_brokers([2]).values()
    secure, plain = free_ports(2)
    set_node_config(broker.config_path, {
        "listeners": f"PLAINTEXT://127.0.0.1:{broker.kafka_port},ADMIN://127.0.0.1:"
                     f"{broker.port},SECURE://127.0.0.1:{secure},PLAINAUTH://127.0.0.1:{plain}",
        "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,"
                                          "ADMIN:PLAINTEXT,SECURE:SASL_SSL,"
                                          "PLAINAUTH:SASL_PLAINTEXT",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.plainauth.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plainauth.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.location": str(certs["broker-2"]),
        "ssl.truststore.location": str(certs["ca"]),
        "offsets.topic.replication.factor": "1",
        "group.initial.rebalance.delay.ms": "0",
    })
    out = run_cli("server.storage_cli", "random-uuid")
    cluster.cluster_id = out.stdout.strip()
    cluster.format_node(1, cluster.cluster_id,
                        "--add-scram", f"SCRAM-SHA-512=[name={ALICE[0]},password={ALICE[1]}]")
    cluster.format_node(2, cluster.cluster_id)
    try:
        cluster.start_all()
        cluster.wait_brokers_unfenced([2], WAIT_S)
        admin = ["server.admin_cli", "--bootstrap-server", cluster.nodes[1].endpoint]
        out = run_cli(*admin, "acls", "--add", "--allow-principal", "User:alice",
                      "--allow-principal", "User:bob", "--operation", "All", "--topic", "sasl-",
                      "--group", "sasl-", "--resource-pattern-type", "prefixed")
        assert out.returncode == 0, out.stderr
        yield SaslCluster(cluster, {"SECURE": secure, "PLAINAUTH": plain}, certs["ca"])
    finally:
        cluster.stop_all()


def confluent_round_trip(sasl: SaslCluster, listener: str, user: tuple[str, str]) -> None:
    from confluent_kafka import Consumer, Producer

    topic, group = f"sasl-{uuid.uuid4().hex[:8]}", f"sasl-{uuid.uuid4().hex[:8]}"
    producer = Producer(sasl.confluent(listener, user, **{"acks": "all"}))
    failures: list[Any] = []
    for i in range(20):
        producer.produce(topic, f"v{i}".encode(),
                         on_delivery=lambda err, _: err is not None and failures.append(err))
    assert producer.flush(WAIT_S) == 0 and failures == []
    consumer = Consumer(sasl.confluent(listener, user, **{
        "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.subscribe([topic])
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < 20 and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            values.append(message.value())
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(20))
    consumer.commit(asynchronous=False)  # the group's coordinator, as this user
    assert consumer.assignment()  # joined the group and was assigned the partition
    consumer.close()
    sasl.committed.append((topic, group))


def kafka_python_round_trip(sasl: SaslCluster, listener: str, user: tuple[str, str]) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic, group = f"sasl-{uuid.uuid4().hex[:8]}", f"sasl-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(acks="all", **sasl.kafka_python(listener, user))
    for i in range(20):
        producer.send(topic, f"v{i}".encode()).get(timeout=WAIT_S)
    producer.close()
    consumer = KafkaConsumer(topic, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=WAIT_S * 1000,
                             **sasl.kafka_python(listener, user))
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 20:
            break
    assert sorted(values) == sorted(f"v{i}".encode() for i in range(20))
    consumer.commit()
    assert consumer.assignment()
    consumer.close()


@pytest.mark.parametrize("listener, user", [("SECURE", ALICE), ("PLAINAUTH", BOB)])
def test_confluent_kafka_produces_consumes_and_joins_a_group(
        sasl: SaslCluster, listener: str, user: tuple[str, str]) -> None:
    confluent_round_trip(sasl, listener, user)


@pytest.mark.parametrize("listener, user", [("SECURE", ALICE), ("PLAINAUTH", BOB)])
def test_kafka_python_produces_consumes_and_joins_a_group(
        sasl: SaslCluster, listener: str, user: tuple[str, str]) -> None:
    kafka_python_round_trip(sasl, listener, user)


@pytest.mark.parametrize("listener", ["SECURE", "PLAINAUTH"])
def test_a_wrong_password_is_the_clients_authentication_error(
        sasl: SaslCluster, listener: str, caplog: pytest.LogCaptureFixture) -> None:
    from confluent_kafka import KafkaError, Producer
    from kafka import KafkaProducer
    from kafka.errors import KafkaTimeoutError

    user = ALICE if listener == "SECURE" else BOB
    message = ("Authentication failed during authentication due to invalid credentials with "
               "SASL mechanism SCRAM-SHA-512" if listener == "SECURE"
               else "Authentication failed: Invalid username or password")
    errors: list[Any] = []
    producer = Producer(sasl.confluent(listener, (user[0], WRONG),
                                       **{"error_cb": errors.append}))
    wait_for(lambda: producer.poll(0.2) >= 0 and errors, WAIT_S, "librdkafka's error callback")
    assert errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert message in errors[0].str()
    # kafka-python 3.0 records SaslAuthenticationFailedError per attempt and keeps trying
    # until its bootstrap timeout.
    with caplog.at_level(logging.WARNING, logger="kafka"), \
            pytest.raises(KafkaTimeoutError, match="Unable to bootstrap"):
        KafkaProducer(bootstrap_timeout_ms=3000, **sasl.kafka_python(listener, (user[0], WRONG)))
    assert f"SaslAuthenticationFailedError: {message}" in caplog.text
    log = sasl.cluster.logs(2)
    assert f"Kafka listener {listener}: failed authentication: 127.0.0.1:" in log
    assert WRONG not in log  # no password in the broker's log


def test_the_sasl_principal_is_what_the_acls_judge(sasl: SaslCluster) -> None:
    from confluent_kafka import KafkaError, Producer

    outcomes: list[Any] = []
    producer = Producer(sasl.confluent("PLAINAUTH", CAROL, **{"acks": "all"}))
    producer.produce("sasl-not-for-carol", b"x",
                     on_delivery=lambda err, _: outcomes.append(err))
    producer.flush(WAIT_S)
    assert outcomes and outcomes[0] is not None
    assert outcomes[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, outcomes
    assert "Principal = User:carol is Denied operation" in sasl.cluster.logs(2)


def test_kraft_admin_groups_logs_in_with_scram_and_plain(
        sasl: SaslCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--command-config with Kafka's sasl.jaas.config (SCRAM-SHA-512 over SASL_SSL) and
    librdkafka's sasl.username/password (PLAIN over SASL_PLAINTEXT) (issue 31)."""
    from server import admin_cli

    if not sasl.committed:
        confluent_round_trip(sasl, "SECURE", ALICE)
    topic, group = sasl.committed[0]

    def groups(listener: str, config: str, *command: str) -> tuple[int, str, str]:
        path = tmp_path / f"{listener}.properties"
        path.write_text(config)
        code = admin_cli.main(["--bootstrap-server", f"127.0.0.1:{sasl.ports[listener]}",
                               "--command-config", str(path), "groups", *command])
        out, err = capsys.readouterr()
        return code, out, err

    scram = ("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
             f"ssl.truststore.location={sasl.ca}\n"
             "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule "
             f'required username="{ALICE[0]}" password="{ALICE[1]}";\n')
    code, out, err = groups("SECURE", scram, "describe", "--group", group, "--json")
    assert (code, err) == (0, ""), err
    (row,) = json.loads(out)[0]["offsets"]
    assert (row["topic"], row["currentOffset"], row["logEndOffset"], row["lag"]) == (
        topic, 20, 20, 0)

    plain = (f"security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
             f"sasl.username={BOB[0]}\nsasl.password={BOB[1]}\n")
    code, out, err = groups("PLAINAUTH", plain, "list")
    assert (code, err) == (0, "") and group in out.split(), err

    code, out, err = groups("PLAINAUTH", plain.replace(BOB[1], WRONG), "list")
    assert (code, out) == (1, "")
    assert err == (f"kraft-admin: SASL authentication (PLAIN) failed at 127.0.0.1:"
                   f"{sasl.ports['PLAINAUTH']}: Authentication failed: Invalid username or "
                   "password\n")
    code, out, err = groups("PLAINAUTH", scram.replace("SASL_SSL", "SASL_PLAINTEXT"), "list")
    assert err == (f"kraft-admin: 127.0.0.1:{sasl.ports['PLAINAUTH']} does not accept SASL "
                   "mechanism SCRAM-SHA-512 (enabled: PLAIN)\n")
