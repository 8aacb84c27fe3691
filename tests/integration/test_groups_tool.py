"""`kraft-admin groups` against a real broker, beside clients this project did not write: one
controller and one broker as processes (one cluster for the module); confluent-kafka produces
and consumes in a group, the tool's LAG is what was produced minus what was committed, a reset
is refused while the group has a member and moves the stopped group (the next consumer reads
from there), OffsetDelete and DeleteGroups go through the tool, and confluent-kafka's
AdminClient (list/describe/alter/delete) sees what the tool sees and the reverse; the broker's
metrics port exports the same lag."""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, KafkaError, Producer
from confluent_kafka import TopicPartition as TP
from confluent_kafka.admin import AdminClient, NewTopic

from harness.cluster import ProcessCluster, kafka_cluster, wait_for
from server import admin_cli

WAIT_S = 60
TOPIC = "lagging"
PER_PARTITION = 10
SETTINGS = {
    "internal.test.hooks.enable": "false",
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.num.partitions": "3",
    "offsets.topic.replication.factor": "1",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("groups-tool"), [2], SETTINGS, WAIT_S) as c:
        admin = AdminClient({"bootstrap.servers": c.bootstrap_servers()})
        admin.create_topics([NewTopic(TOPIC, 3, 1)])[TOPIC].result(timeout=WAIT_S)
        wait_for(lambda: all(p.leader >= 0 for p in admin.list_topics(TOPIC, timeout=10)
                             .topics[TOPIC].partitions.values()), WAIT_S, "leaders")
        producer = Producer({"bootstrap.servers": c.bootstrap_servers(), "acks": "all"})
        for i in range(3 * PER_PARTITION):
            producer.produce(TOPIC, value=f"v{i}".encode(), partition=i % 3)
        assert producer.flush(WAIT_S) == 0
        yield c


@pytest.fixture(scope="module")
def admin(cluster: ProcessCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_servers()})


def tool(cluster: ProcessCluster, capsys: pytest.CaptureFixture[str], *argv: str
         ) -> tuple[int, str, str]:
    code = admin_cli.main(["--bootstrap-server", cluster.bootstrap_servers(), "groups", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def described(cluster: ProcessCluster, capsys: pytest.CaptureFixture[str],
              group: str) -> dict[str, Any]:
    code, out, err = tool(cluster, capsys, "describe", "--group", group, "--json")
    assert code == 0, err
    (entry,) = json.loads(out)
    return dict(entry)


def consumer(cluster: ProcessCluster, group: str) -> Consumer:
    return Consumer({"bootstrap.servers": cluster.bootstrap_servers(), "group.id": group,
                     "enable.auto.commit": False, "auto.offset.reset": "earliest",
                     "client.id": f"{group}-client"})


def first_offsets(c: Consumer, partitions: int) -> dict[int, int]:
    """The offset of the first record read from each of `partitions` partitions."""
    seen: dict[int, int] = {}
    deadline = time.monotonic() + WAIT_S
    while len(seen) < partitions and time.monotonic() < deadline:
        message = c.poll(0.5)
        if message is None or message.error() is not None:
            assert message is None or message.error().code() == KafkaError._PARTITION_EOF
            continue
        seen.setdefault(message.partition(), message.offset())
    assert len(seen) == partitions, seen
    return seen


def test_lag_is_produced_minus_committed_and_a_reset_needs_a_stopped_group(
        cluster: ProcessCluster, admin: AdminClient, capsys: pytest.CaptureFixture[str]) -> None:
    member = consumer(cluster, "billing")
    member.subscribe([TOPIC])
    first_offsets(member, 3)
    member.commit(offsets=[TP(TOPIC, 0, 4), TP(TOPIC, 1, 7), TP(TOPIC, 2, 10)],
                  asynchronous=False)
    group = described(cluster, capsys, "billing")
    assert group["state"] == "Stable"
    lags = {o["partition"]: (o["currentOffset"], o["logEndOffset"], o["lag"])
            for o in group["offsets"]}
    assert lags == {0: (4, 10, 6), 1: (7, 10, 3), 2: (10, 10, 0)}
    (m,) = group["members"]
    assert m["clientId"] == "billing-client" and len(m["assignment"]) == 3
    assert {o["consumerId"] for o in group["offsets"]} == {m["consumerId"]}
    # The coordinator's metrics port has the same lag, and the group's state.
    scrape = urllib.request.urlopen(
        f"http://127.0.0.1:{cluster.nodes[2].metrics_port}/metrics", timeout=5).read().decode()
    for partition, behind in ((0, 6), (1, 3), (2, 0)):
        assert (f'kraft_broker_group_lag{{group="billing",partition="{partition}",'
                f'topic="{TOPIC}"}} {behind}.0') in scrape
    assert 'kraft_broker_group_state{group="billing",state="Stable"} 1.0' in scrape

    code, out, _ = tool(cluster, capsys, "describe", "--group", "billing")
    header, *rows = out.strip().splitlines()
    assert header.split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                              "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert [r.split()[2:6] for r in rows] == [["0", "4", "10", "6"], ["1", "7", "10", "3"],
                                              ["2", "10", "10", "0"]]
    # confluent-kafka's AdminClient agrees.
    listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions("billing")])
    offsets = listed["billing"].result(timeout=WAIT_S).topic_partitions
    assert {tp.partition: tp.offset for tp in offsets} == {0: 4, 1: 7, 2: 10}
    description = admin.describe_consumer_groups(["billing"])["billing"].result(WAIT_S)
    assert [x.member_id for x in description.members] == [m["consumerId"]]
    assert str(description.state).endswith("STABLE")

    code, _, err = tool(cluster, capsys, "reset-offsets", "--group", "billing", "--topic",
                        TOPIC, "--to-earliest", "--execute")
    assert code == 1
    assert "Assignments can only be reset if the group 'billing' is inactive, but the " \
           "current state is Stable." in err
    member.close()

    code, out, err = tool(cluster, capsys, "reset-offsets", "--group", "billing", "--topic",
                          f"{TOPIC}:0,1", "--to-offset", "99", "--dry-run")
    assert code == 0 and "Value will be set to 10" in err
    assert [r.split() for r in out.strip().splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], ["billing", TOPIC, "0", "10"],
        ["billing", TOPIC, "1", "10"]]
    assert {o["partition"]: o["currentOffset"]
            for o in described(cluster, capsys, "billing")["offsets"]} == {0: 4, 1: 7, 2: 10}
    code, _, err = tool(cluster, capsys, "reset-offsets", "--group", "billing", "--topic",
                        f"{TOPIC}:0", "--shift-by", "-3", "--execute")
    assert code == 0, err
    code, _, err = tool(cluster, capsys, "reset-offsets", "--group", "billing", "--topic",
                        f"{TOPIC}:2", "--by-duration", "P1D", "--execute")
    assert code == 0, err  # a day back: before every record, so the log start
    group = described(cluster, capsys, "billing")
    assert group["state"] == "Empty" and group["members"] == []
    assert {o["partition"]: o["lag"] for o in group["offsets"]} == {0: 9, 1: 3, 2: 10}

    again = consumer(cluster, "billing")
    again.subscribe([TOPIC])
    assert first_offsets(again, 3) == {0: 1, 1: 7, 2: 0}, "the next consumer reads from there"
    again.close()


def test_the_admin_client_and_the_tool_agree_on_alter_delete_offsets_and_delete(
        cluster: ProcessCluster, admin: AdminClient, capsys: pytest.CaptureFixture[str]) -> None:
    altered = admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "audit", [TP(TOPIC, 0, 2), TP(TOPIC, 1, 5)])])
    altered["audit"].result(timeout=WAIT_S)
    group = described(cluster, capsys, "audit")
    assert {o["partition"]: (o["currentOffset"], o["lag"]) for o in group["offsets"]} == {
        0: (2, 8), 1: (5, 5)}
    code, out, _ = tool(cluster, capsys, "list", "--state")
    assert code == 0 and ["audit", "Empty"] in [line.split() for line in out.splitlines()]
    listed = admin.list_consumer_groups().result(timeout=WAIT_S).valid
    assert "audit" in {g.group_id for g in listed}

    code, out, err = tool(cluster, capsys, "delete-offsets", "--group", "audit", "--topic",
                          f"{TOPIC}:1")
    assert code == 0, err
    assert out.startswith(f"Request succeed for deleting offsets with topic {TOPIC} group audit")
    assert [TOPIC, "1", "Successful"] in [line.split() for line in out.splitlines()]
    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "audit", [TP(TOPIC, 0), TP(TOPIC, 1)])])["audit"].result(timeout=WAIT_S)
    assert [tp.offset for tp in offsets.topic_partitions] == [2, -1001]

    code, out, err = tool(cluster, capsys, "delete", "--group", "audit")
    assert (code, out.strip()) == (0, "Deletion of requested consumer groups ('audit') was "
                                      "successful."), err
    assert "audit" not in {g.group_id for g in
                           admin.list_consumer_groups().result(timeout=WAIT_S).valid}
    code, _, err = tool(cluster, capsys, "describe", "--group", "audit")
    assert code == 1 and "Consumer group 'audit' does not exist." in err

    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        "gone", [TP(TOPIC, 0, 1)])])["gone"].result(timeout=WAIT_S)
    admin.delete_consumer_groups(["gone"])["gone"].result(timeout=WAIT_S)
    code, out, _ = tool(cluster, capsys, "list", "--json")
    assert code == 0 and "gone" not in {g["group"] for g in json.loads(out)}
