"""A minimal broker for controller tests: it registers with the active controller and sends
heartbeats from a thread, following NOT_CONTROLLER hints (the real broker role is broker/, run
as a process by tests/integration/test_brokers.py). Also clients of a real broker's
BrokerMetadata service."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc

from broker.rpc import broker_metadata_pb2 as bmpb
from broker.rpc import broker_metadata_pb2_grpc as bmrpc
from kraft.errors import Errors
from kraft.log.meta_properties import random_uuid
from kraft.security.tls import MESSAGE_SIZE_OPTIONS
from metadata.rpc import broker_pb2 as pb
from metadata.rpc import broker_pb2_grpc as rpc

RETRY_FOR_S = 15.0


class TestBroker:
    __test__ = False  # not a pytest test class

    def __init__(
        self,
        broker_id: int,
        cluster_id: str,
        controllers: list[str],
        metadata_offset: Callable[[], int],
        interval_s: float = 0.1,
    ) -> None:
        self.broker_id = broker_id
        self.cluster_id = cluster_id
        self.controllers = controllers
        self.metadata_offset = metadata_offset
        self.interval_s = interval_s
        self.epoch = -1
        self.last_reply: pb.BrokerHeartbeatResponse | None = None
        self._target = controllers[0]
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _call(self, method: str, request: object) -> object:
        """Call the active controller, following its hint or trying the next controller, for
        up to RETRY_FOR_S (a real broker retries registration for a minute)."""
        deadline = time.monotonic() + RETRY_FOR_S
        while time.monotonic() < deadline and not self._stop.is_set():
            try:
                with grpc.insecure_channel(self._target) as channel:
                    reply = getattr(rpc.BrokerLifecycleStub(channel), method)(request, timeout=2)
            except grpc.RpcError:
                self._target = self.controllers[
                    (self.controllers.index(self._target) + 1) % len(self.controllers)]
                self._stop.wait(0.02)  # a retry pause; returns early when stopped
                continue
            if reply.error_code == Errors.NOT_CONTROLLER:  # type: ignore[attr-defined]
                hint = reply.controller.controller_endpoint  # type: ignore[attr-defined]
                self._target = hint or self.controllers[
                    (self.controllers.index(self._target) + 1) % len(self.controllers)]
                self._stop.wait(0.05)  # a retry pause; returns early when stopped
                continue
            return reply
        raise RuntimeError(f"broker {self.broker_id}: no active controller answered {method}")

    def start(self) -> None:
        """Register with a new incarnation, then heartbeat until stopped."""
        self._stop.clear()
        reply = self._call("RegisterBroker", pb.BrokerRegistrationRequest(
            broker_id=self.broker_id, cluster_id=self.cluster_id, incarnation_id=random_uuid(),
            listeners=[pb.Listener(name="PLAINTEXT", host="127.0.0.1",
                                   port=9092 + self.broker_id)],
        ))
        assert reply.error_code == 0, reply  # type: ignore[attr-defined]
        self.epoch = reply.broker_epoch  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.is_set():
            try:
                self.last_reply = self._call("BrokerHeartbeat", pb.BrokerHeartbeatRequest(  # type: ignore[assignment]
                    broker_id=self.broker_id, broker_epoch=self.epoch,
                    current_metadata_offset=self.metadata_offset(),
                    want_fence=False, want_shut_down=False))
            except (RuntimeError, grpc.RpcError):
                pass  # keep trying: the controller may be failing over
            self._stop.wait(self.interval_s)  # the heartbeat interval

    def stop(self) -> None:
        """Stop heartbeating (as if the process died)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def alter_partition(
        self, topic_id: str, partition: int, leader_epoch: int, partition_epoch: int,
        isr: list[tuple[int, int]],
    ) -> pb.AlterPartitionResponse:
        request = pb.AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self.epoch,
            topics=[pb.AlterPartitionRequest.TopicData(topic_id=topic_id, partitions=[
                pb.AlterPartitionRequest.PartitionData(
                    partition_index=partition, leader_epoch=leader_epoch,
                    partition_epoch=partition_epoch,
                    new_isr=[pb.BrokerEpoch(broker_id=b, broker_epoch=e) for b, e in isr],
                )])])
        return self._call("AlterPartition", request)  # type: ignore[return-value]


# -- clients of a real broker's client-facing services ---------------------------------------


def broker_cluster(
    endpoint: str, min_offset: int = -1, wait_ms: int = 0, include_fenced: bool = True
) -> bmpb.DescribeClusterResponse:
    """BrokerMetadata.DescribeCluster; with wait_ms it answers once the broker's image reaches
    min_offset (or at the deadline). UNAVAILABLE (grpc.RpcError) until the broker runs."""
    with grpc.insecure_channel(endpoint) as channel:
        return bmrpc.BrokerMetadataStub(channel).DescribeCluster(
            bmpb.DescribeClusterRequest(include_fenced_brokers=include_fenced,
                                        min_offset=min_offset, wait_ms=wait_ms),
            timeout=wait_ms / 1000 + 5)


def broker_topics(
    endpoint: str, names: list[str] | None = None, wait_ms: int = 0
) -> bmpb.DescribeTopicsResponse:
    with grpc.insecure_channel(endpoint, options=MESSAGE_SIZE_OPTIONS) as channel:
        return bmrpc.BrokerMetadataStub(channel).DescribeTopics(
            bmpb.DescribeTopicsRequest(names=names or [], wait_ms=wait_ms),
            timeout=wait_ms / 1000 + 10)


def partition_view(topics: list[bmpb.TopicInfo]) -> dict[tuple[str, int], tuple]:
    """(topic, partition) -> (leader, replicas, isr, leader epoch, partition epoch)."""
    return {
        (t.name, p.partition_index): (p.leader, tuple(p.replicas), tuple(p.isr),
                                      p.leader_epoch, p.partition_epoch)
        for t in topics for p in t.partitions
    }
