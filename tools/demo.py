"""`make demo`: a cluster from config/ — three controllers and three brokers — through a
controller failover and a broker's controlled shutdown, with a real Kafka client producing to
and consuming from the brokers.

Formats ./demo-data for config/controller-{1,2,3}.properties and
config/broker-{4,5,6}.properties, starts them as real processes, shows `kraft-admin quorum
describe`, writes a cluster config and creates a topic (6 partitions, RF 3) through the Admin
API, produces and consumes it with confluent-kafka (librdkafka) over the brokers' Kafka
listeners, freezes broker 6 (SIGSTOP) so the ISRs it follows shrink by replica lag and grow back
after SIGCONT, kills the active controller with SIGKILL, shows the new leader, how long the
election took and that it holds the metadata, restarts the old leader, stops broker 5 with
SIGTERM (controlled shutdown: its leaderships move first), restarts it and restores the
preferred leaders, runs a consumer group of two librdkafka consumers over the topic while the
broker coordinating the group is killed (SIGKILL) and restarted (the group keeps reading, its
committed offsets survive in __consumer_offsets), shows the stopped group's lag with
`kraft-admin groups describe` and resets its offsets to the earliest with `groups
reset-offsets`, commits one transaction and aborts another with a transactional producer and
reads them with both isolation levels (tools/txn_demo.py), inspects a controller's metadata
log and snapshots with `kraft-snapshot`, and stops everything with SIGTERM. Then a dynamic
quorum (KIP-853) from config/dynamic-controller-{1,2,3}.properties, bootstrap servers only:
controller 1 formatted --standalone, 2 and 3 with --no-initial-controllers, grown 1 -> 3 with
`kraft-admin quorum add-controller`, its leader removed with `remove-controller` (3 -> 2) and
added back (2 -> 3), a metadata write made on the one-voter quorum read back at the end. Last,
security (tools/security_demo.py): a node with mutual TLS and Kafka's StandardAuthorizer refuses
a produce by a client with no ACL (TOPIC_AUTHORIZATION_FAILED), and accepts it once `kraft-admin
acls --add` grants WRITE; a user added with `kraft-admin users` logs in with SCRAM-SHA-512 over
SASL_SSL and produces, and a wrong password is refused. The demo fails unless every node exits
0. Node logs are in ./demo-data/logs.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from security_demo import security_demo  # tools/ is the script directory
from txn_demo import transactions_demo

from kraft.log.meta_properties import random_uuid
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from metadata.topics import METADATA_PARTITION_DIR
from server.config import load_config

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [ROOT / "config" / f"controller-{i}.properties" for i in (1, 2, 3)]
DYNAMIC_CONFIGS = {i: f"config/dynamic-controller-{i}.properties" for i in (1, 2, 3)}
BROKER_CONFIGS = [ROOT / "config" / f"broker-{i}.properties" for i in (4, 5, 6)]
DATA = ROOT / "demo-data"


def banner(text: str) -> None:
    print(f"\n=== {text}", flush=True)


def admin(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "server.admin_cli", *args], check=True, cwd=ROOT)


def admin_json(*args: str) -> object:
    out = subprocess.run([sys.executable, "-m", "server.admin_cli", *args, "--json"],
                         check=True, cwd=ROOT, capture_output=True, text=True)
    return json.loads(out.stdout)


def wait_until(condition, what: str, timeout_s: float = 30):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            value = condition()
        except subprocess.CalledProcessError:
            value = None
        if value:
            return value
        time.sleep(0.1)  # poll interval of a bounded condition wait
    raise SystemExit(f"timed out waiting for {what}; see {DATA / 'logs'}")


KAFKA_BOOTSTRAP = "127.0.0.1:9094,127.0.0.1:9095,127.0.0.1:9096"


def produce(topic: str, count: int, start: int = 0, partitions: list[int] | None = None) -> None:
    """`count` records with acks=all from an idempotent librdkafka producer (to `partitions`
    in turn, or by key)."""
    producer = Producer({"bootstrap.servers": KAFKA_BOOTSTRAP, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 5})
    failed: list[object] = []
    for i in range(start, start + count):
        where = {} if partitions is None else {"partition": partitions[i % len(partitions)]}
        producer.produce(topic, key=f"key-{i % 60}".encode(), value=f"order {i}".encode(),
                         on_delivery=lambda err, _msg: err is not None and failed.append(err),
                         **where)
        producer.poll(0)
    if producer.flush(60) or failed:
        raise SystemExit(f"produce failed: {failed[:3]}")
    print(f"produced {count} records to {topic} (acks=all, idempotent), all acknowledged")


class GroupReader(threading.Thread):
    """One consumer of a group: subscribes, counts what it reads, commits after each poll."""

    def __init__(self, group: str, topic: str) -> None:
        super().__init__(daemon=True)
        self.consumer = Consumer({"bootstrap.servers": KAFKA_BOOTSTRAP, "group.id": group,
                                  "enable.auto.commit": False, "auto.offset.reset": "earliest",
                                  "session.timeout.ms": 10000})
        self.consumer.subscribe([topic])
        self.read = 0
        self.stop = threading.Event()

    def run(self) -> None:
        dirty = False
        try:
            while not self.stop.is_set():
                got = [m for m in self.consumer.consume(200, timeout=0.2) if m.error() is None]
                self.read += len(got)
                dirty = dirty or bool(got)
                if dirty:
                    try:
                        self.consumer.commit(asynchronous=False)
                        dirty = False
                    except Exception:  # the coordinator moving: commit again next round
                        pass
        finally:
            self.consumer.close()


def group_admin() -> AdminClient:
    """A new AdminClient per question: librdkafka's keeps waiting on a killed coordinator's
    connection for group calls, where a new one asks FindCoordinator again
    (docs/consumer-groups.md)."""
    return AdminClient({"bootstrap.servers": KAFKA_BOOTSTRAP})


def describe_group(group: str) -> object:
    admin = group_admin()  # held until the answer: a dropped client abandons its requests
    return admin.describe_consumer_groups([group])[group].result(timeout=30)


def group_demo(start: object, processes: dict[int, subprocess.Popen[bytes]],
               all_unfenced: object) -> None:
    """A consumer group reading `orders` while its coordinator's broker is killed and
    restarted: it keeps reading, and what it committed survives."""
    group, topic = "demo-group", "orders"
    readers = [GroupReader(group, topic) for _ in range(2)]
    for reader in readers:
        reader.start()
    total = 3600
    wait_until(lambda: sum(r.read for r in readers) >= total, "the group to read the topic", 90)
    description = describe_group(group)
    coordinator = description.coordinator.id  # type: ignore[attr-defined]
    print(f"group {group}: {description.state.name}, {len(description.members)} members, "  # type: ignore[attr-defined]
          f"coordinator broker {coordinator}; read {sum(r.read for r in readers)} records")
    banner(f"kill -9 of broker {coordinator}, the group's coordinator, while 1,200 more "
           "records arrive")
    processes[coordinator].send_signal(signal.SIGKILL)
    processes[coordinator].wait()
    killed_at = time.monotonic()
    produce(topic, 1200, start=total)
    wait_until(lambda: sum(r.read for r in readers) >= total + 1200,
               "the group to read the new records", 90)
    print(f"the group read all {total + 1200} records "
          f"{time.monotonic() - killed_at:.1f} s after the kill (producing included)")
    description = describe_group(group)
    print(f"group {group}: {description.state.name}, coordinator now broker "  # type: ignore[attr-defined]
          f"{description.coordinator.id}")  # type: ignore[attr-defined]
    banner(f"Broker {coordinator} restarts and rejoins")
    start(coordinator)  # type: ignore[operator]
    wait_until(all_unfenced, f"broker {coordinator} to be unfenced", 60)
    for reader in readers:
        reader.stop.set()
    for reader in readers:
        reader.join(timeout=30)
    admin = group_admin()
    committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        group, [TopicPartition(topic, p) for p in range(6)])])[group].result(timeout=30)
    offsets = {tp.partition: tp.offset for tp in committed.topic_partitions}
    print(f"committed offsets per partition: {offsets} (sum {sum(offsets.values())}: "
          f"every record read and committed)")
    group_lag_and_reset(group, topic, end=total + 1200)


def group_lag_and_reset(group: str, topic: str, end: int) -> None:
    """`kraft-admin groups` on the stopped group: its lag, then its offsets reset."""
    more = 300
    produce(topic, more, start=end)
    banner(f"kraft-admin groups describe: the stopped group is {more} records behind")
    groups = ("--bootstrap-server", KAFKA_BOOTSTRAP, "groups")
    admin(*groups, "describe", "--group", group)
    banner("kraft-admin groups reset-offsets --to-earliest --execute: it will read it all again")
    admin(*groups, "reset-offsets", "--group", group, "--topic", topic, "--to-earliest",
          "--execute")
    admin(*groups, "describe", "--group", group)
    (described,) = admin_json(*groups, "describe", "--group", group)  # type: ignore[misc]
    lag = sum(row["lag"] for row in described["offsets"])
    if lag != end + more:
        raise SystemExit(f"after the reset the group's lag is {lag}, not {end + more}")


def consume_counts(topic: str, partitions: int) -> dict[int, int]:
    """Records per partition, read from the beginning by a librdkafka consumer (assign)."""
    consumer = Consumer({"bootstrap.servers": KAFKA_BOOTSTRAP, "group.id": "demo-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    counts = dict.fromkeys(range(partitions), 0)
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    while len(at_end) < partitions and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is None:
            continue
        if message.error() is not None:
            at_end.add(message.partition())  # _PARTITION_EOF: caught up with the HW
            continue
        counts[message.partition()] += 1
    consumer.close()
    return counts


def topic_partitions(any_node: str, topic: str) -> list[dict]:  # type: ignore[type-arg]
    described = admin_json("--bootstrap-server", any_node, "topics", "describe", "--topic", topic)
    if isinstance(described, list):
        described = described[0]
    return list(described["partitions"])  # type: ignore[index]


def isr_line(any_node: str, topic: str) -> str:
    return "  ".join(f"p{p['partition']}:{p['isr']}" for p in topic_partitions(any_node, topic))


def snapshot_cli(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "snapshots.cli", *args], check=True, cwd=ROOT)


def leader_of(endpoints: list[str]) -> tuple[int, int] | None:
    """(leader id, epoch) when every reachable node agrees on a leader that says it leads."""
    views = []
    for endpoint in endpoints:
        try:
            with grpc.insecure_channel(endpoint) as channel:
                views.append(rpc.QuorumStub(channel).NodeStatus(pb.NodeStatusRequest(), timeout=1))
        except grpc.RpcError:
            continue
    if not views or len({(v.leader_id, v.epoch) for v in views}) != 1:
        return None
    leader = views[0].leader_id
    if leader < 0 or not any(v.node_id == leader and v.state == "Leader" for v in views):
        return None
    return leader, views[0].epoch


def wait_leader(endpoints: list[str], timeout_s: float = 20) -> tuple[int, int]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = leader_of(endpoints)
        if found:
            return found
        time.sleep(0.01)  # poll interval of a bounded condition wait
    raise SystemExit(f"no leader within {timeout_s} s; see {DATA / 'logs'}")


# -- a dynamic quorum (KIP-853): grow, remove the leader, add it back -------------------------


TOOLS = {"kraft-storage": "server.storage_cli", "kraft-admin": "server.admin_cli"}


def shell(tool: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Print the command as an operator types it (from the project root), run it, show its
    output; `check`: stop the demo if it fails."""
    print(f"$ {tool} {' '.join(args)}", flush=True)
    out = subprocess.run([sys.executable, "-m", TOOLS[tool], *args], cwd=ROOT,
                         capture_output=True, text=True)
    print(out.stdout, end="")
    print(out.stderr, end="", file=sys.stderr if out.returncode else sys.stdout, flush=True)
    if check and out.returncode != 0:
        raise SystemExit(f"{tool} failed; see {DATA / 'logs'}")
    return out


def quorum_json(bootstrap: str, *args: str) -> Any:
    return admin_json("--bootstrap-controller", bootstrap, "quorum", "describe", *args)


def add_controller(bootstrap: str, node_id: int, directory_id: str) -> None:
    """Once the leader has seen `node_id` reach its end (describe --replication), add it; on
    REQUEST_TIMED_OUT or NOT_LEADER_OR_FOLLOWER look before retrying, as docs/operations.md
    says: the add may have committed anyway."""
    key = (node_id, directory_id)

    def caught_up() -> bool:
        return any((r["nodeId"], r["directoryId"]) == key and r["status"] == "Observer"
                   and r["lastCaughtUpTimestamp"] >= 0 and 0 <= r["lag"] < 10
                   for r in quorum_json(bootstrap, "--replication"))

    for _ in range(3):
        wait_until(caught_up, f"controller {node_id} to catch up as an observer")
        out = shell("kraft-admin", "--bootstrap-controller", bootstrap, "quorum",
                    "add-controller", "--command-config", DYNAMIC_CONFIGS[node_id], check=False)
        if out.returncode == 0:
            return
        if "REQUEST_TIMED_OUT" not in out.stderr and "NOT_LEADER" not in out.stderr:
            raise SystemExit(f"add-controller {node_id} failed; see {DATA / 'logs'}")
        voters = quorum_json(bootstrap, "--status")["currentVoters"]
        if key in [(v["id"], v["directoryId"]) for v in voters]:
            print(f"(describe --status: controller {node_id} is a voter, the add committed)")
            return
    raise SystemExit(f"add-controller {node_id} failed three times; see {DATA / 'logs'}")


def membership_demo() -> dict[int, int]:
    """A dynamic quorum grown from one controller, its leader removed and added back; the
    exit code of each controller."""
    endpoints = {i: str(load_config(ROOT / path).controller_listener.endpoint)
                 for i, path in DYNAMIC_CONFIGS.items()}
    bootstrap = endpoints[1]
    cluster_id = random_uuid()
    banner("A dynamic quorum (KIP-853): no controller.quorum.voters, only "
           "controller.quorum.bootstrap.servers; controller 1 starts alone")
    shell("kraft-storage", "format", "-t", cluster_id, "-c", DYNAMIC_CONFIGS[1], "--standalone")
    for node_id in (2, 3):
        shell("kraft-storage", "format", "-t", cluster_id, "-c", DYNAMIC_CONFIGS[node_id],
              "--no-initial-controllers")
    processes: dict[int, subprocess.Popen[bytes]] = {}

    def start(node_id: int) -> None:
        log = (DATA / "logs" / f"dynamic-controller-{node_id}.log").open("ab")
        processes[node_id] = subprocess.Popen(
            [sys.executable, "-m", "server.main", DYNAMIC_CONFIGS[node_id]],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)

    exits: dict[int, int] = {}
    try:
        start(1)
        wait_leader([bootstrap])
        shell("kraft-admin", "--bootstrap-controller", bootstrap, "configs", "alter",
              "--entity-type", "brokers", "--entity-default", "--add-config", "num.partitions=5")
        banner("Controllers 2 and 3 (formatted -N) start as observers and catch up")
        for node_id in (2, 3):
            start(node_id)
        wait_until(lambda: len(quorum_json(bootstrap, "--status")["currentObservers"]) == 2,
                   "controllers 2 and 3 to fetch as observers")
        shell("kraft-admin", "--bootstrap-controller", bootstrap, "quorum", "describe",
              "--status")
        banner("Grow 1 -> 3: add-controller reads the new controller's id, directory id and "
               "endpoint from its own config and meta.properties")
        for node_id in (2, 3):
            directory_id = next(o["directoryId"] for o in
                                quorum_json(bootstrap, "--status")["currentObservers"]
                                if o["id"] == node_id)
            add_controller(bootstrap, node_id, directory_id)
        shell("kraft-admin", "--bootstrap-controller", bootstrap, "quorum", "describe",
              "--replication")
        shell("kraft-admin", "--bootstrap-controller", bootstrap, "features", "describe")

        facts = quorum_json(bootstrap, "--status")
        leader = facts["leaderId"]
        leader_dir = next(v["directoryId"] for v in facts["currentVoters"] if v["id"] == leader)
        others = [ep for nid, ep in endpoints.items() if nid != leader]
        banner(f"Remove the leader, controller {leader} (3 -> 2): it leads until the removal "
               "commits, then resigns and carries on as an observer")
        removed_at = time.monotonic()
        shell("kraft-admin", "--bootstrap-controller", bootstrap, "quorum", "remove-controller",
              "--controller-id", str(leader), "--controller-directory-id", leader_dir)
        new_leader, epoch = wait_leader(others)
        print(f"new leader: controller {new_leader} in epoch {epoch}, "
              f"{(time.monotonic() - removed_at) * 1000:.0f} ms after the command")
        shell("kraft-admin", "--bootstrap-controller", others[0], "quorum", "describe",
              "--status")
        print("(written on the one-voter quorum, read from the new leader:)")
        shell("kraft-admin", "--bootstrap-controller", endpoints[new_leader], "configs",
              "describe", "--entity-type", "brokers", "--entity-default")
        banner(f"Add controller {leader} back (2 -> 3): the same key, caught up as an observer")
        add_controller(others[0], leader, leader_dir)
        shell("kraft-admin", "--bootstrap-controller", others[0], "quorum", "describe",
              "--status")
    finally:
        banner("Stopping the dynamic quorum with SIGTERM")
        for proc in processes.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for node_id, proc in sorted(processes.items()):
            try:
                exits[node_id] = proc.wait(timeout=45)
            except subprocess.TimeoutExpired:
                proc.kill()
                exits[node_id] = proc.wait()
            print(f"dynamic controller {node_id} exited with {exits[node_id]}")
    return exits


def main() -> int:
    configs = {load_config(path).node_id: (path, load_config(path)) for path in CONFIGS}
    brokers = {load_config(path).node_id: path for path in BROKER_CONFIGS}
    endpoints = {nid: str(cfg.controller_listener.endpoint) for nid, (_, cfg) in configs.items()}
    shutil.rmtree(DATA, ignore_errors=True)
    (DATA / "logs").mkdir(parents=True)
    cluster_id = random_uuid()
    banner(f"Formatting storage for cluster {cluster_id}")
    for path in [*CONFIGS, *BROKER_CONFIGS]:
        subprocess.run([sys.executable, "-m", "server.storage_cli", "format", "-t",
                        cluster_id, "-c", str(path)], check=True, cwd=ROOT)

    processes: dict[int, subprocess.Popen[bytes]] = {}
    exits: dict[str, int] = {}

    def start(node_id: int) -> None:
        role, path = (("controller", configs[node_id][0]) if node_id in configs
                      else ("broker", brokers[node_id]))
        log = (DATA / "logs" / f"{role}-{node_id}.log").open("ab")
        processes[node_id] = subprocess.Popen(
            [sys.executable, "-m", "server.main", str(path)],
            stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
        )

    try:
        banner("Starting three controllers")
        for node_id in sorted(configs):
            start(node_id)
            print(f"controller {node_id} on {endpoints[node_id]} (pid {processes[node_id].pid})")
        leader, epoch = wait_leader(list(endpoints.values()))
        print(f"leader: controller {leader} in epoch {epoch}")
        any_node = endpoints[min(endpoints)]
        banner(f"kraft-admin --bootstrap-server {any_node} quorum describe --status")
        admin("--bootstrap-server", any_node, "quorum", "describe", "--status")
        banner(f"kraft-admin --bootstrap-server {any_node} quorum describe --replication")
        admin("--bootstrap-server", any_node, "quorum", "describe", "--replication",
              "--human-readable")
        banner("The metadata layer: a config write through any controller, read back")
        admin("--bootstrap-server", any_node, "configs", "alter", "--entity-type", "brokers",
              "--entity-default", "--add-config", "num.partitions=3")
        admin("--bootstrap-server", any_node, "configs", "describe", "--entity-type",
              "brokers", "--entity-default")
        admin("--bootstrap-server", any_node, "features", "describe")

        banner("Starting brokers 4, 5 and 6: Raft observers that register and heartbeat")
        for node_id in sorted(brokers):
            start(node_id)

        def all_unfenced() -> bool:
            listed = admin_json("--bootstrap-server", any_node, "brokers", "list")
            return sorted(b["id"] for b in listed if not b["fenced"]) == sorted(brokers)

        wait_until(all_unfenced, "the brokers to register and be unfenced")
        admin("--bootstrap-server", any_node, "brokers", "list")
        admin("--bootstrap-server", any_node, "topics", "create", "--topic", "orders",
              "--partitions", "6", "--replication-factor", "3")
        broker_listener = "127.0.0.1:19094"
        banner(f"The topic as broker 4 serves it from its metadata cache ({broker_listener})")
        wait_until(lambda: admin_json("--bootstrap-server", broker_listener, "topics",
                                      "describe", "--topic", "orders"), "broker 4's cache")
        admin("--bootstrap-server", broker_listener, "topics", "describe", "--topic", "orders")

        banner(f"A Kafka client: confluent-kafka produces to {KAFKA_BOOTSTRAP} and reads back")
        produce("orders", 3000)
        counts = consume_counts("orders", 6)
        print(f"consumed {sum(counts.values())} records, per partition {counts}")
        print("kcat shows the same: kcat -L -b 127.0.0.1:9094 (Debian's kcat)")

        banner("SIGSTOP to broker 6: alive but silent, its follower replicas fall behind and "
               "leave the ISRs after replica.lag.time.max.ms")
        print("ISRs:", isr_line(any_node, "orders"))
        processes[6].send_signal(signal.SIGSTOP)
        # Writes to the partitions 4 and 5 lead: broker 6 misses them and falls behind there.
        followed = [p["partition"] for p in topic_partitions(any_node, "orders")
                    if p["leader"] != 6]
        started = time.monotonic()
        produce("orders", 600, start=3000, partitions=followed)
        print(f"(took {time.monotonic() - started:.1f} s: acks=all waits for every ISR member, "
              "so the frozen follower held the high watermark until it left the ISR)")
        wait_until(lambda: all(6 not in p["isr"] for p in topic_partitions(any_node, "orders")
                               if p["partition"] in followed),
                   "broker 6 to leave the ISRs by lag")
        print("ISRs:", isr_line(any_node, "orders"))
        banner("SIGCONT to broker 6: it fetches what it missed and rejoins every ISR")
        processes[6].send_signal(signal.SIGCONT)
        wait_until(lambda: all(6 in p["isr"] for p in topic_partitions(any_node, "orders")),
                   "broker 6 back in the ISRs")
        print("ISRs:", isr_line(any_node, "orders"))

        banner(f"kill -9 of the leader, controller {leader}")
        killed_at = time.monotonic()
        processes[leader].send_signal(signal.SIGKILL)
        processes[leader].wait()
        survivors = [ep for nid, ep in endpoints.items() if nid != leader]
        new_leader, new_epoch = wait_leader(survivors)
        print(f"new leader: controller {new_leader} in epoch {new_epoch}, elected "
              f"{(time.monotonic() - killed_at) * 1000:.0f} ms after the kill")
        admin("--bootstrap-server", survivors[0], "quorum", "describe", "--status")
        # The new active controller holds the committed metadata: no reload.
        admin("--bootstrap-server", survivors[0], "configs", "describe", "--entity-type",
              "brokers", "--entity-default")

        banner(f"Restarting controller {leader}: it rejoins as a follower")
        start(leader)
        deadline = time.monotonic() + 20
        while leader_of(list(endpoints.values())) is None and time.monotonic() < deadline:
            time.sleep(0.05)  # poll interval of a bounded condition wait
        admin("--bootstrap-server", any_node, "quorum", "describe", "--replication")

        banner("SIGTERM to broker 5: a controlled shutdown moves its leaderships first")
        processes[5].send_signal(signal.SIGTERM)
        processes[5].wait(timeout=60)
        admin("--bootstrap-server", any_node, "topics", "describe", "--topic", "orders")
        banner("Broker 5 restarts, catches up, is unfenced; a preferred election restores "
               "its leaderships")
        start(5)
        wait_until(all_unfenced, "broker 5 to be unfenced")

        def preferred_restored() -> bool:
            admin_json("--bootstrap-server", any_node, "leaders", "elect", "--election-type",
                       "preferred", "--all-topic-partitions")
            topic = admin_json("--bootstrap-server", any_node, "topics", "describe",
                               "--topic", "orders")
            parts = topic[0]["partitions"] if isinstance(topic, list) else topic["partitions"]
            return all(p["leader"] == p["replicas"][0] for p in parts)

        wait_until(preferred_restored, "the preferred leaders (broker 5 back in the ISRs)")
        admin("--bootstrap-server", any_node, "topics", "describe", "--topic", "orders")
        counts = consume_counts("orders", 6)
        print(f"after it all, the topic still holds {sum(counts.values())} records "
              f"(3,600 produced, acks=all): per partition {counts}")

        banner("A consumer group: two librdkafka consumers subscribe to orders (the first "
               "FindCoordinator creates __consumer_offsets)")
        group_demo(start, processes, all_unfenced)
        transactions_demo(KAFKA_BOOTSTRAP, any_node)

        log_dir = DATA / "controller-1" / METADATA_PARTITION_DIR
        banner(f"kraft-snapshot verify {log_dir.relative_to(ROOT)}")
        snapshot_cli("verify", str(log_dir))
        banner(f"kraft-snapshot tree {log_dir.relative_to(ROOT)} /topics/orders")
        snapshot_cli("tree", str(log_dir), "/topics/orders")
    finally:
        banner("Stopping every node with SIGTERM: brokers first (controlled shutdown needs "
               "the controllers), then the controllers")
        for group in (sorted(brokers), sorted(configs)):
            for node_id in group:
                proc = processes.get(node_id)
                if proc is not None and proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
            for node_id in group:
                proc = processes.get(node_id)
                if proc is None:
                    continue
                try:
                    code = proc.wait(timeout=45)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    code = proc.wait()
                role = "controller" if node_id in configs else "broker"
                print(f"{role} {node_id} exited with {code}")
                exits[f"{role} {node_id}"] = code
    exits.update((f"dynamic controller {n}", code) for n, code in membership_demo().items())
    exits["secure node 1"] = security_demo()
    failed = {name: code for name, code in exits.items() if code != 0}
    if failed:
        print(f"these nodes did not exit 0: {failed}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
