"""`make demo`'s security part: a secured one-node cluster (config/secure-1.properties: mutual
TLS on every listener, Kafka's StandardAuthorizer, ACLs in the metadata log).

Makes throwaway certificates (kraft-storage make-test-certs), formats and starts the node,
creates a topic as the super user `admin`, then has `alice` (a CA-signed certificate with no
grant) produce with confluent-kafka: refused with TOPIC_AUTHORIZATION_FAILED, as Kafka refuses
it. The operator grants WRITE with `kraft-admin acls --add` (shaped like kafka-acls.sh); the same
produce then succeeds. A read by alice is still refused (READ was not granted), the ACLs are
listed, and `kraft-snapshot acls --check` answers from the log who could write the topic.
Then a SCRAM login: the operator adds the user `bob` (`kraft-admin users --alter`, a
UserScramCredentialRecord), grants him WRITE, and a confluent-kafka producer configured the
usual way (SASL_SSL, SCRAM-SHA-512, a user and password) writes on the CLIENTS listener; the
same with a wrong password is the client's authentication error. Returns the node's exit
code.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kraft.log.meta_properties import random_uuid
from metadata.topics import METADATA_PARTITION_DIR

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "demo-data"
CERTS = DATA / "certs"
NODE_CONFIG = "config/secure-1.properties"
ADMIN_CONFIG = "config/secure-admin.properties"
ALICE = "User:CN=alice,O=kraft-test"
BOOTSTRAP = "127.0.0.1:9391"
SASL_BOOTSTRAP = "127.0.0.1:9392"
BOB = "bob"
ADMIN_BOOTSTRAP = "127.0.0.1:39191"
TOPIC = "payments"
TOOLS = {"kraft-storage": "server.storage_cli", "kraft-admin": "server.admin_cli",
         "kraft-snapshot": "snapshots.cli"}


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def shell(tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    print(f"$ {tool} {shlex.join(args)}", flush=True)
    out = subprocess.run([sys.executable, "-m", TOOLS[tool], *args], cwd=ROOT,
                         capture_output=True, text=True)
    print(out.stdout, end="")
    print(out.stderr, end="", file=sys.stderr if out.returncode and check else sys.stdout,
          flush=True)
    if check and out.returncode != 0:
        raise SystemExit(f"{tool} failed; see {DATA / 'logs' / 'secure-1.log'}")
    return out


def client(who: str) -> dict[str, str]:
    """librdkafka's settings for an mTLS client holding `who`'s certificate."""
    return {"bootstrap.servers": BOOTSTRAP, "security.protocol": "SSL",
            "ssl.ca.location": str(CERTS / "ca.pem"),
            "ssl.certificate.location": str(CERTS / f"{who}.pem"),
            "ssl.key.location": str(CERTS / f"{who}.pem")}


def scram_client(user: str, password: str) -> dict[str, str]:
    """librdkafka's settings for a SCRAM-SHA-512 login over TLS (no client certificate)."""
    return {"bootstrap.servers": SASL_BOOTSTRAP, "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user,
            "sasl.password": password, "ssl.ca.location": str(CERTS / "ca.pem")}


def produce_as(who: str | dict[str, str], count: int) -> KafkaError | None:
    """Produce `count` records with acks=all as `who` (a certificate's name, or a client's
    settings); the first delivery error, or None."""
    settings = client(who) if isinstance(who, str) else who
    errors: list[KafkaError] = []
    producer = Producer({**settings, "acks": "all", "message.timeout.ms": 15000,
                         "error_cb": lambda err: err.code() == KafkaError._AUTHENTICATION
                         and errors.append(err)})
    for i in range(count):
        producer.produce(TOPIC, value=f"payment {i}".encode(),
                         on_delivery=lambda err, _m: err is not None and errors.append(err))
    deadline = time.monotonic() + 30
    while len(producer) and not errors and time.monotonic() < deadline:
        producer.poll(0.2)  # until delivered, or the first error (a failed login: at once)
    return errors[0] if errors else None


def read_as(who: str) -> KafkaError | None:
    consumer = Consumer({**client(who), "group.id": f"{who}-readers",
                         "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        message = consumer.poll(15)
        if message is None:
            return None
        return message.error()
    except KafkaException as exc:
        return exc.args[0]  # type: ignore[no-any-return]
    finally:
        consumer.close()


def security_demo() -> int:
    log_path = DATA / "logs" / "secure-1.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    banner("Security: mutual TLS on every listener, Kafka's StandardAuthorizer, ACLs as "
           "metadata records (config/secure-1.properties)")
    shell("kraft-storage", "make-test-certs", "--out", str(CERTS.relative_to(ROOT)),
          "--name", "secure-1", "--name", "admin", "--name", "alice")
    shell("kraft-storage", "format", "-t", random_uuid(), "-c", NODE_CONFIG)
    node = subprocess.Popen([sys.executable, "-m", "server.main", NODE_CONFIG], cwd=ROOT,
                            stdout=log_path.open("ab"), stderr=subprocess.STDOUT)
    try:
        admin = ("--bootstrap-server", ADMIN_BOOTSTRAP, "--command-config", ADMIN_CONFIG)
        shell("kraft-admin", *admin, "topics", "create", "--topic", TOPIC, "--partitions", "1",
              "--replication-factor", "1")
        banner(f"{ALICE} (a certificate the CA signed, no ACL) produces to {TOPIC}")
        error = produce_as("alice", 5)
        print(f"confluent-kafka: {error.name() if error else 'delivered'}")
        if error is None or error.code() != KafkaError.TOPIC_AUTHORIZATION_FAILED:
            raise SystemExit(f"expected TOPIC_AUTHORIZATION_FAILED, got {error}")
        banner("The operator grants WRITE on the topic (kafka-acls.sh's options)")
        shell("kraft-admin", *admin, "acls", "--add", "--allow-principal", ALICE,
              "--operation", "Write", "--topic", TOPIC)
        error = produce_as("alice", 5)
        print(f"confluent-kafka: {error.name() if error else '5 records delivered (acks=all)'}")
        if error is not None:
            raise SystemExit(f"produce after the grant failed: {error}")
        banner("Reading needs READ, which alice was not granted")
        error = read_as("alice")
        print(f"confluent-kafka: {error.name() if error else 'read'}")
        if error is None or error.code() not in (KafkaError.TOPIC_AUTHORIZATION_FAILED,
                                                 KafkaError.GROUP_AUTHORIZATION_FAILED):
            raise SystemExit(f"expected an authorization failure, got {error}")
        shell("kraft-admin", *admin, "acls", "--list", "--topic", TOPIC)
        banner("Who could write the topic, answered from the metadata log")
        log_dir = DATA / "secure-1" / METADATA_PARTITION_DIR
        shell("kraft-snapshot", "acls", str(log_dir.relative_to(ROOT)), "--who-can", "Write",
              "--topic", TOPIC, "--super-users",
              "User:CN=secure-1,O=kraft-test;User:CN=admin,O=kraft-test")
        scram_login(admin)
    finally:
        if node.poll() is None:
            node.send_signal(signal.SIGTERM)
        try:
            code = node.wait(timeout=45)
        except subprocess.TimeoutExpired:
            node.kill()
            code = node.wait()
        print(f"secure node 1 exited with {code}")
    return code


def scram_login(admin: tuple[str, ...]) -> None:
    banner(f"A SCRAM login: the operator adds the user {BOB}, grants him WRITE; he produces "
           f"over SASL_SSL ({SASL_BOOTSTRAP})")
    shell("kraft-admin", *admin, "users", "--alter", "--entity-name", BOB, "--add-config",
          "SCRAM-SHA-512=[password=bob-secret]")
    shell("kraft-admin", *admin, "acls", "--add", "--allow-principal", f"User:{BOB}",
          "--operation", "Write", "--topic", TOPIC)
    error = produce_as(scram_client(BOB, "bob-secret"), 5)
    print(f"confluent-kafka (sasl.mechanism=SCRAM-SHA-512, user {BOB}): "
          f"{error.name() if error else '5 records delivered (acks=all)'}")
    if error is not None:
        raise SystemExit(f"produce as {BOB} failed: {error}")
    banner("The same with a wrong password")
    error = produce_as(scram_client(BOB, "not-his-password"), 1)
    print(f"confluent-kafka: {error.name() if error else 'delivered'}")
    if error is None or error.code() != KafkaError._AUTHENTICATION:
        raise SystemExit(f"expected an authentication failure, got {error}")


if __name__ == "__main__":
    sys.exit(security_demo())
