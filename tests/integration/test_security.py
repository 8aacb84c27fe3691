"""mTLS and authorization in real processes: controllers and a broker talk over mutual TLS
with certificates from one CA; a client without a certificate, or with one from another CA,
cannot connect; admin writes need a super user or a grant, refusals say
CLUSTER_AUTHORIZATION_FAILED and are logged with the principal and the operation."""

from __future__ import annotations

import json
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
    acl_file = tmp_path / "acls.json"
    acl_file.write_text(json.dumps({"acls": [
        {"principal": principal_of("ops"), "operations": ["AlterConfigs"]},
    ]}))
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
        "authorizer.acl.file": str(acl_file),
        "allow.everyone.if.no.acl.found": "true",
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

    # A super user writes; a grant allows exactly what it names; reads are open.
    out = admin(cluster, as_admin, "topics", "create", "--topic", "secure-orders",
                "--partitions", "1", "--replication-factor", "1")
    assert out.returncode == 0, out.stderr
    out = admin(cluster, as_ops, "configs", "alter", "--entity-type", "topics",
                "--entity-name", "secure-orders", "--add-config", "retention.ms=1000")
    assert out.returncode == 0, out.stderr
    out = admin(cluster, as_ops, "topics", "create", "--topic", "not-allowed")
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        f"kraft-admin: CLUSTER_AUTHORIZATION_FAILED: {principal_of('ops')} may not Create "
        "(CreateTopics); ask an operator to add it to super.users or grant the operation in "
        "authorizer.acl.file"
    ]
    out = admin(cluster, as_reader, "topics", "list")
    assert out.returncode == 0 and "secure-orders" in out.stdout, out.stderr
    out = admin(cluster, as_reader, "topics", "delete", "--topic", "secure-orders")
    assert out.returncode == 1 and "CLUSTER_AUTHORIZATION_FAILED" in out.stderr
    logs = "".join(cluster.logs(i) for i in (1, 2, 3))
    assert f"denied Delete on /kraft.admin.v1.Admin/DeleteTopics to {principal_of('reader')}" \
        in logs

    # Raft traffic is ClusterAction: a principal outside super.users has every Fetch on the
    # stream refused, each with its own answer.
    endpoint = cluster.nodes[1].endpoint
    with sync_channel(endpoint, TlsConfig(str(certs / "reader.pem"), str(certs / "ca.pem"))) \
            as channel:
        fetch = raft_pb2.FetchRequest(replica_id=99, fetch_offset=0, max_bytes=1024)
        replies = list(raft_pb2_grpc.RaftStub(channel).Fetch(iter([fetch, fetch]), timeout=5))
    assert [r.error_code for r in replies] == [31, 31]
    assert f"denied ClusterAction on /kraft.raft.v1.Raft/Fetch to {principal_of('reader')}" \
        in "".join(cluster.logs(i) for i in (1, 2, 3))

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
            assert exc.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED", exc
        else:
            raise AssertionError("the reader deleted a topic over the Kafka listener")
    assert f"denied Delete on Kafka DeleteTopics to {principal_of('reader')}" \
        in cluster.logs(4)
    created = admin_client.create_topics([NewTopic("kafka-created", 1, 1)])
    created["kafka-created"].result(WAIT_S)  # a super user may
