"""mTLS and authorization in real processes: controllers and a broker talk over mutual TLS
with certificates from one CA; a client without a certificate, or with one from another CA,
cannot connect; admin writes need a super user or an ACL, refusals carry Kafka's codes and are
logged with the principal, the operation and the resource."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path

import grpc

from harness.cluster import ProcessCluster, run_cli, wait_for
from kraft.rpc import raft_pb2, raft_pb2_grpc
from kraft.security.certs import make_test_certs, principal_of
from kraft.security.tls import TlsConfig, sync_channel
from metadata.rpc import admin_pb2 as pb
from metadata.rpc import admin_pb2_grpc as rpc

WAIT_S = 20


def client_config(root: Path, certs: Path, name: str) -> Path:
    path = root / f"client-{name}.properties"
    path.write_text(
        "security.protocol=SSL\n"
        f"ssl.keystore.location={certs / f'{name}.pem'}\n"
        f"ssl.truststore.location={certs / 'ca.pem'}\n"
    )
    return path


def admin(cluster: ProcessCluster, config: Path | None, *args: str):  # type: ignore[no-untyped-def]
    servers = ",".join(n.endpoint for i, n in cluster.nodes.items() if i <= 3)
    extra = ["--command-config", str(config)] if config is not None else []
    return run_cli("server.admin_cli", "--bootstrap-server", servers, *extra, *args)


def secure(cluster: ProcessCluster, certs: Path, extra: dict[str, str]) -> None:
    """Give every node its own keystore and the cluster CA, TLS on every listener."""
    for node_id, node in cluster.nodes.items():
        name = f"controller-{node_id}" if node_id <= 3 else f"broker-{node_id}"
        # Broker 5 holds a certificate from another CA: it must not get in.
        keystore = (certs.parent / "other-ca" / "intruder.pem" if node_id == 5
                    else certs / f"{name}.pem")
        with node.config_path.open("a") as config:
            config.write(f"ssl.keystore.location={keystore}\n")
            config.write(f"ssl.truststore.location={certs / 'ca.pem'}\n")
            for key, value in extra.items():
                config.write(f"{key}={value}\n")


def test_mutual_tls_and_authorization(make_cluster, tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    make_test_certs(certs, ["controller-1", "controller-2", "controller-3", "broker-4",
                            "admin", "ops", "reader"])
    make_test_certs(tmp_path / "other-ca", ["intruder"])
    super_users = ";".join(principal_of(n) for n in (
        "controller-1", "controller-2", "controller-3", "broker-4", "admin"))
    cluster = make_cluster(**{"internal.test.hooks.enable": "false"})
    cluster.add_brokers([4])
    cluster.add_brokers([5], {"initial.broker.registration.timeout.ms": "3000"})
    security = {
        "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:SSL,ADMIN:SSL",
        "ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": super_users,
    }
    secure(cluster, certs, security)
    cluster.format()
    cluster.start_all()
    as_admin = client_config(tmp_path, certs, "admin")
    as_ops = client_config(tmp_path, certs, "ops")
    as_reader = client_config(tmp_path, certs, "reader")

    # The quorum forms over mTLS and the broker registers and is unfenced over it.
    def broker_running() -> bool:
        out = admin(cluster, as_admin, "brokers", "list", "--json")
        return out.returncode == 0 and any(
            b["id"] == 4 and not b["fenced"] for b in json.loads(out.stdout))
    wait_for(broker_running, WAIT_S * 2, "broker 4 to register over mTLS and be unfenced")

    # A super user writes and grants (ACLs in the metadata log); a grant allows exactly what
    # it names, on the resources it names.
    out = admin(cluster, as_admin, "topics", "create", "--topic", "secure-orders",
                "--partitions", "1", "--replication-factor", "1")
    assert out.returncode == 0, out.stderr
    for principal, operation, topic in ((principal_of("ops"), "AlterConfigs", "secure-orders"),
                                        (principal_of("reader"), "Describe", "*")):
        out = admin(cluster, as_admin, "acls", "--add", "--allow-principal", principal,
                    "--operation", operation, "--topic", topic)
        assert out.returncode == 0, out.stderr

    def altered() -> bool:  # every node replays the ACLs; the CLI may ask any controller
        out = admin(cluster, as_ops, "configs", "alter", "--entity-type", "topics",
                    "--entity-name", "secure-orders", "--add-config", "retention.ms=1000")
        return out.returncode == 0
    wait_for(altered, WAIT_S, "ops's grant to reach the controllers")
    out = admin(cluster, as_ops, "topics", "create", "--topic", "not-allowed")
    assert out.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in out.stderr, out
    wait_for(lambda: "secure-orders" in admin(cluster, as_reader, "topics", "list").stdout,
             WAIT_S, "the reader's grant to reach the controllers")
    out = admin(cluster, as_reader, "topics", "delete", "--topic", "secure-orders")
    assert out.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in out.stderr, out
    logs = "".join(cluster.logs(i) for i in (1, 2, 3))
    assert (f"Principal = {principal_of('reader')} is Denied operation = DELETE from host = "
            "127.0.0.1 on resource = TOPIC:secure-orders") in logs

    # Raft traffic is ClusterAction: a principal outside super.users has every Fetch on the
    # stream refused, each with its own answer.
    endpoint = cluster.nodes[1].endpoint
    with sync_channel(endpoint, TlsConfig(str(certs / "reader.pem"), str(certs / "ca.pem"))) \
            as channel:
        fetch = raft_pb2.FetchRequest(replica_id=99, fetch_offset=0, max_bytes=1024)
        replies = list(raft_pb2_grpc.RaftStub(channel).Fetch(iter([fetch, fetch]), timeout=5))
    assert [r.error_code for r in replies] == [31, 31]
    assert (f"Principal = {principal_of('reader')} is Denied operation = CLUSTER_ACTION from "
            "host = 127.0.0.1 on resource = CLUSTER:kafka-cluster") in cluster.logs(1)

    # No certificate, or one from another CA: the handshake fails, nothing is served.
    request = pb.ListTopicsRequest()
    for tls in (None, TlsConfig(str(tmp_path / "other-ca" / "intruder.pem"),
                                str(certs / "ca.pem"))):
        with sync_channel(endpoint, tls) as channel:
            try:
                rpc.AdminStub(channel).ListTopics(request, timeout=3)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAVAILABLE  # type: ignore[attr-defined]
            else:
                raise AssertionError(f"a client with {tls} was served")

    # A node whose certificate the cluster CA did not sign cannot join: broker 5 never
    # registers, gives up after its registration timeout and exits with one line.
    assert cluster.wait_exit(5, WAIT_S) != 0
    assert "could not register" in cluster.logs(5)
    listed = json.loads(admin(cluster, as_admin, "brokers", "list", "--json").stdout)
    assert [b["id"] for b in listed] == [4]

    # The same rules on the broker's Kafka listener (mTLS): a Kafka AdminClient under the
    # reader's certificate may list but not delete; the refusal names its principal.
    check_kafka_listener(cluster, certs)

    # The topic survives: the refused deletes changed nothing.
    out = admin(cluster, as_reader, "topics", "describe", "--topic", "secure-orders")
    assert out.returncode == 0, out.stderr
    assert all(cluster.nodes[i].alive for i in (1, 2, 3, 4))


def check_kafka_listener(cluster: ProcessCluster, certs: Path) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    def client(name: str) -> AdminClient:
        return AdminClient({
            "bootstrap.servers": cluster.nodes[4].kafka_endpoint,
            "security.protocol": "SSL", "ssl.ca.location": str(certs / "ca.pem"),
            "ssl.certificate.location": str(certs / f"{name}.pem"),
            "ssl.key.location": str(certs / f"{name}.pem"),
            "ssl.endpoint.identification.algorithm": "none",
        })

    reader, admin_client = client("reader"), client("admin")
    assert "secure-orders" in reader.list_topics(timeout=WAIT_S).topics
    for future in reader.delete_topics(["secure-orders"], operation_timeout=10).values():
        try:
            future.result(WAIT_S)
        except KafkaException as exc:
            assert exc.args[0].name() == "TOPIC_AUTHORIZATION_FAILED", exc
        else:
            raise AssertionError("the reader deleted a topic over the Kafka listener")
    assert (f"Principal = {principal_of('reader')} is Denied operation = DELETE from host = "
            "127.0.0.1 on resource = TOPIC:secure-orders") in cluster.logs(4)
    created = admin_client.create_topics([NewTopic("kafka-created", 1, 1)])
    created["kafka-created"].result(WAIT_S)  # a super user may


def test_a_comma_in_a_common_name_is_no_super_user_and_mapping_rules_reach_every_listener(
    make_cluster, tmp_path: Path
) -> None:
    """A certificate whose CN is `admin,O=kraft-test` is the principal
    `User:CN=admin\\,O\\=kraft-test` on the gRPC and the Kafka listeners, not the super user
    `User:CN=admin,O=kraft-test` (the Kafka listener read it as that before). Then, with
    ssl.principal.mapping.rules, every listener names callers by the rules, and one no rule
    names is refused on each."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    from tests.unit.test_kafka_server import api_versions_frame
    from tests.unit.test_principal import client_keystore

    certs = tmp_path / "certs"
    make_test_certs(certs, ["controller-1", "admin"])
    attacker = client_keystore(certs, "attacker.pem", x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, "admin,O=kraft-test")]))
    cluster = make_cluster(size=1, **{"internal.test.hooks.enable": "false"})
    grpc_endpoints = [cluster.nodes[1].endpoint,  # the controller listener
                      cluster.make_combined()[1].endpoint]  # the broker's gRPC listener
    secure(cluster, certs, {
        "listener.security.protocol.map": "CONTROLLER:SSL,PLAINTEXT:SSL,ADMIN:SSL",
        "ssl.client.auth": "required",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"{principal_of('controller-1')};{principal_of('admin')}",
    })
    cluster.format()
    cluster.start(1)
    kafka = cluster.nodes[1].kafka_endpoint

    def kafka_admin(keystore: Path) -> AdminClient:
        return AdminClient({
            "bootstrap.servers": kafka, "security.protocol": "SSL",
            "ssl.ca.location": str(certs / "ca.pem"),
            "ssl.certificate.location": str(keystore), "ssl.key.location": str(keystore),
            "ssl.endpoint.identification.algorithm": "none",
        })

    def kafka_create(keystore: Path, topic: str) -> str | None:
        """None when created, else the error's name."""
        client = kafka_admin(keystore)  # held: a collected client fails its futures
        try:
            client.create_topics([NewTopic(topic, 1, 1)])[topic].result(WAIT_S)
        except KafkaException as exc:
            return str(exc.args[0].name())
        return None

    def grpc_create(keystore: Path, endpoint: str, topic: str) -> int:
        with sync_channel(endpoint, TlsConfig(str(keystore), str(certs / "ca.pem"))) as ch:
            reply = rpc.AdminStub(ch).CreateTopics(pb.CreateTopicsRequest(topics=[
                pb.CreatableTopic(name=topic, num_partitions=1, replication_factor=1)]),
                timeout=WAIT_S)
        return reply.status.error_code or reply.topics[0].error_code

    # The super user may; the look-alike may not, on either listener kind.
    wait_for(lambda: kafka_create(certs / "admin.pem", "by-admin") is None, WAIT_S * 2,
             "the super user to create a topic over the Kafka listener")
    # Kafka answers a CreateTopics it refuses per topic; cluster-level refusals also count.
    assert kafka_create(attacker, "by-attacker") in ("TOPIC_AUTHORIZATION_FAILED",
                                                     "CLUSTER_AUTHORIZATION_FAILED")
    for endpoint in grpc_endpoints:
        assert grpc_create(attacker, endpoint, "by-attacker") in (29, 31)
    assert "User:CN=admin\\,O\\=kraft-test" in cluster.logs(1)

    # Rules: this CA's names become short names; the look-alike matches none and is refused.
    cluster.kill(1)
    with cluster.nodes[1].config_path.open("a") as config:
        config.write("ssl.principal.mapping.rules=RULE:^CN=([a-z0-9-]+),O=kraft-test$/$1/\n"
                     "super.users=User:controller-1;User:admin\n")
    cluster.start(1)
    wait_for(lambda: kafka_create(certs / "admin.pem", "by-admin-2") is None, WAIT_S * 2,
             "User:admin to create a topic over the Kafka listener")
    for number, endpoint in enumerate(grpc_endpoints):
        wait_for(lambda e=endpoint, t=f"by-admin-grpc-{number}":  # type: ignore[misc]
                 grpc_create(certs / "admin.pem", e, t) in (0, 36),  # 36: created already
                 WAIT_S * 2, f"User:admin to create a topic on {endpoint}")
        try:
            grpc_create(attacker, endpoint, "by-attacker")
        except grpc.RpcError as exc:
            assert exc.code() == grpc.StatusCode.UNAUTHENTICATED  # type: ignore[attr-defined]
        else:
            raise AssertionError(f"{endpoint} served a certificate no rule names")
    context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
    context.load_cert_chain(str(attacker))
    host, port = kafka.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=WAIT_S) as raw, \
            context.wrap_socket(raw, server_hostname=host) as tls:
        tls.sendall(api_versions_frame(1, "probe"))
        try:
            answer = tls.recv(4)
        except ConnectionResetError:
            answer = b""
    assert answer == b"", "the Kafka listener answered a certificate no rule names"
    assert "refusing" in cluster.logs(1) and "no ssl.principal.mapping.rules rule matches" \
        in cluster.logs(1)
