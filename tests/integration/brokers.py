"""A minimal broker for controller tests: it registers with the active controller and sends
heartbeats from a thread, following NOT_CONTROLLER hints. (The full broker role, an observer of
the metadata log with its own cache, is a separate component.)"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import grpc

from kraft.rpc import broker_pb2 as pb
from kraft.rpc import broker_pb2_grpc as rpc
from metadata.records import random_uuid

NOT_CONTROLLER = 41
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
            if reply.error_code == NOT_CONTROLLER:  # type: ignore[attr-defined]
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
