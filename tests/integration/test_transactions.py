"""confluent-kafka's transactional producer against a real broker process: init_transactions()
finds the coordinator (FindCoordinator key type 1, __transaction_state created on first use),
gets a producer id and epoch 0 from the coordinator (InitProducerId), and a second producer
with the same transactional.id fences the first (epoch 1). begin/produce/commit need the
partition side (markers, issue 30 item 2): not tested here yet."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException, Producer

from harness.cluster import ProcessCluster, kafka_cluster

SETTINGS = {
    "internal.test.hooks.enable": "false",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "5",
}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    with kafka_cluster(tmp_path_factory.mktemp("txn"), [2], SETTINGS) as running:
        yield running


def producer(cluster: ProcessCluster, txn_id: str) -> Producer:
    return Producer({"bootstrap.servers": cluster.bootstrap_servers(),
                     "transactional.id": txn_id, "transaction.timeout.ms": 30000})


def test_init_transactions_and_a_second_producer_fences_the_first(
        cluster: ProcessCluster) -> None:
    first = producer(cluster, "txn-it")
    first.init_transactions(30)
    second = producer(cluster, "txn-it")
    second.init_transactions(30)  # bumps the epoch: the first producer is a zombie now
    first.begin_transaction()
    first.produce("orders", b"from a zombie")
    with pytest.raises(KafkaException) as failure:
        first.commit_transaction(10)
    error = failure.value.args[0]
    assert error.fatal(), error  # fenced: PRODUCER_FENCED / INVALID_PRODUCER_EPOCH
    assert "fenced" in str(error).lower() or "epoch" in str(error).lower(), error
