"""The BrokerLifecycle gRPC service on every controller: RegisterBroker, BrokerHeartbeat,
AlterPartition and AllocateProducerIds, answered by the active controller, and BrokerLiveness,
the stream whose break tells the active controller a broker's process is gone
(metadata/broker_liveness.py). A standby answers NOT_CONTROLLER with the active controller's
address; brokers follow it (they must talk to the active one anyway). Fields are validated
here, before a rule sees them."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, TypeVar

import grpc

from kraft.errors import Errors
from metadata.brokers import BrokerHeartbeatRequest, BrokerRegistrationRequest
from metadata.controller import NotControllerError, QuorumController
from metadata.errors import ControllerApiError
from metadata.producer_ids import ProducerIdsBlock
from metadata.records import Endpoint, is_valid_uuid
from metadata.replication import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    alter_partition,
)
from metadata.rpc import broker_pb2 as pb
from metadata.rpc import broker_pb2_grpc as rpc

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")  # the RPC's response message
MAX_NAME = 255
MAX_PARTITIONS_PER_REQUEST = 100_000


class _Invalid(Exception):
    """A request field out of range: INVALID_REQUEST, nothing attempted."""


class BrokerLifecycleServicer(rpc.BrokerLifecycleServicer):
    def __init__(
        self, controller: QuorumController, cluster_id: str, endpoints: Mapping[int, str]
    ) -> None:
        self.controller = controller
        self.cluster_id = cluster_id
        self.endpoints = endpoints  # a live view in a dynamic quorum: read at each use

    def _hint(self, leader_id: int) -> pb.ControllerHint:
        return pb.ControllerHint(
            controller_id=leader_id, controller_endpoint=self.endpoints.get(leader_id, "")
        )

    async def _answer(
        self,
        call: Callable[[], Awaitable[T]],
        ok: Callable[[T], R],
        failed: Callable[[int, str, pb.ControllerHint], R],
    ) -> R:
        try:
            return ok(await call())
        except _Invalid as exc:
            return failed(Errors.INVALID_REQUEST, str(exc), self._hint(-1))
        except NotControllerError as exc:
            return failed(exc.code, exc.message, self._hint(exc.leader_id))
        except ControllerApiError as exc:
            return failed(exc.code, exc.message, self._hint(-1))
        except Exception as exc:  # never let a bad request take the node down
            log.exception("broker lifecycle call failed")
            return failed(Errors.UNKNOWN_SERVER_ERROR, f"unexpected error: {exc}",
                          self._hint(-1))

    async def RegisterBroker(
        self, request: pb.BrokerRegistrationRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.BrokerRegistrationResponse:
        def parse() -> BrokerRegistrationRequest:
            _check_id("broker_id", request.broker_id)
            if not is_valid_uuid(request.incarnation_id):
                raise _Invalid(f"incarnation_id {request.incarnation_id!r} is not a base64 uuid")
            listeners = []
            for listener in request.listeners:
                _check_name("listener name", listener.name)
                _check_name("listener host", listener.host)
                if not 0 < listener.port < 65536:
                    raise _Invalid(f"listener port {listener.port} is out of range")
                listeners.append(Endpoint(listener.name, listener.host, listener.port))
            rack = request.rack if request.HasField("rack") else None
            if rack is not None:
                _check_name("rack", rack)
            return BrokerRegistrationRequest(request.broker_id, request.cluster_id,
                                             request.incarnation_id, tuple(listeners), rack)

        async def call() -> int:
            return await self.controller.register_broker(parse(), self.cluster_id)

        return await self._answer(
            call,
            lambda epoch: pb.BrokerRegistrationResponse(broker_epoch=epoch),
            lambda code, message, hint: pb.BrokerRegistrationResponse(
                error_code=code, error_message=message, broker_epoch=-1, controller=hint),
        )

    async def BrokerHeartbeat(
        self, request: pb.BrokerHeartbeatRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.BrokerHeartbeatResponse:
        async def call():  # type: ignore[no-untyped-def]
            _check_id("broker_id", request.broker_id)
            return await self.controller.broker_heartbeat(BrokerHeartbeatRequest(
                request.broker_id, request.broker_epoch, request.current_metadata_offset,
                request.want_fence, request.want_shut_down))

        return await self._answer(
            call,
            lambda reply: pb.BrokerHeartbeatResponse(
                is_caught_up=reply.is_caught_up, is_fenced=reply.is_fenced,
                in_controlled_shutdown=reply.in_controlled_shutdown,
                should_shut_down=reply.should_shutdown),
            lambda code, message, hint: pb.BrokerHeartbeatResponse(
                error_code=code, error_message=message, is_fenced=True, controller=hint),
        )

    async def AlterPartition(
        self, request: pb.AlterPartitionRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> pb.AlterPartitionResponse:
        def parse() -> AlterPartitionRequest:
            _check_id("broker_id", request.broker_id)
            total = sum(len(t.partitions) for t in request.topics)
            if total > MAX_PARTITIONS_PER_REQUEST:
                raise _Invalid(f"{total} partitions in one request; at most "
                               f"{MAX_PARTITIONS_PER_REQUEST}")
            topics = []
            for topic in request.topics:
                _check_name("topic_id", topic.topic_id)
                partitions = tuple(
                    AlterPartitionData(
                        p.partition_index, p.leader_epoch,
                        tuple(BrokerState(b.broker_id, b.broker_epoch) for b in p.new_isr),
                        p.partition_epoch, p.leader_recovery_state,
                    )
                    for p in topic.partitions
                )
                topics.append(AlterPartitionTopic(topic.topic_id, partitions))
            return AlterPartitionRequest(request.broker_id, request.broker_epoch, tuple(topics))

        async def call():  # type: ignore[no-untyped-def]
            parsed = parse()
            return await self.controller.write(lambda image: alter_partition(image, parsed))

        def ok(results):  # type: ignore[no-untyped-def]
            return pb.AlterPartitionResponse(partitions=[
                pb.AlterPartitionResponse.PartitionResult(
                    topic_id=r.topic_id, partition_index=r.partition_index,
                    error_code=r.error.code if r.error else 0,
                    error_message=r.error.message if r.error else "",
                    leader_id=r.leader_id, leader_epoch=r.leader_epoch, isr=list(r.isr),
                    leader_recovery_state=r.leader_recovery_state,
                    partition_epoch=r.partition_epoch,
                )
                for r in results
            ])

        return await self._answer(
            call, ok,
            lambda code, message, hint: pb.AlterPartitionResponse(
                error_code=code, error_message=message, controller=hint),
        )


    async def AllocateProducerIds(
        self, request: pb.AllocateProducerIdsRequest,
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> pb.AllocateProducerIdsResponse:
        async def call() -> ProducerIdsBlock:
            _check_id("broker_id", request.broker_id)
            return await self.controller.allocate_producer_ids(
                request.broker_id, request.broker_epoch)

        return await self._answer(
            call,
            lambda block: pb.AllocateProducerIdsResponse(
                producer_id_start=block.first_producer_id, producer_id_len=block.size),
            lambda code, message, hint: pb.AllocateProducerIdsResponse(
                error_code=code, error_message=message, producer_id_start=-1,
                controller=hint),
        )


    async def BrokerLiveness(
        self, requests: AsyncIterator[pb.BrokerLivenessRequest],
        context: grpc.aio.ServicerContext[Any, Any],
    ) -> AsyncIterator[pb.BrokerLivenessResponse]:
        """One answer when the stream opens (empty, or the refusal that ends it), then
        silence until it ends: with the broker's goodbye, by its loss (the process is gone, or
        its connection was reset), or with NOT_CONTROLLER when this controller steps down."""
        try:
            first = await anext(requests)
        except (StopAsyncIteration, grpc.RpcError, asyncio.InvalidStateError):
            return
        try:
            _check_id("broker_id", first.broker_id)
            stream = self.controller.open_liveness_stream(first.broker_id, first.broker_epoch)
        except _Invalid as exc:
            yield pb.BrokerLivenessResponse(error_code=Errors.INVALID_REQUEST,
                                            error_message=str(exc))
            return
        except NotControllerError as exc:
            yield pb.BrokerLivenessResponse(error_code=exc.code, error_message=exc.message,
                                            controller=self._hint(exc.leader_id))
            return
        except ControllerApiError as exc:
            yield pb.BrokerLivenessResponse(error_code=exc.code, error_message=exc.message)
            return
        yield pb.BrokerLivenessResponse()
        stepped_down = asyncio.ensure_future(self.controller.until_inactive())
        ended = "lost"
        try:
            while ended == "lost":
                message = asyncio.ensure_future(anext(requests))
                await asyncio.wait((message, stepped_down), return_when=asyncio.FIRST_COMPLETED)
                if not message.done():
                    message.cancel()
                    ended = "stepped down"
                elif message.cancelled() or message.exception() is not None:
                    break  # the end of the stream or of its connection, without a goodbye
                elif message.result().closing:
                    ended = "goodbye"
        finally:
            stepped_down.cancel()
            if ended == "goodbye":
                self.controller.close_liveness_stream(stream)
            elif ended == "lost":
                # Also when the call is cancelled under us: that is how gRPC reports a broker
                # that went away. A stopping server cancels every call too, but then this
                # controller is stepping down, and losing most streams at once fences nobody.
                self.controller.lose_liveness_stream(stream)
        if ended == "stepped down":
            leader = self.controller.leader_id
            with contextlib.suppress(Exception):
                yield pb.BrokerLivenessResponse(
                    error_code=Errors.NOT_CONTROLLER,
                    error_message="This controller is no longer the active controller",
                    controller=self._hint(leader if leader != self.controller.node_id else -1))


def _check_id(field: str, value: int) -> None:
    if value < 0:
        raise _Invalid(f"{field} must be >= 0, got {value}")


def _check_name(field: str, value: str) -> None:
    if not value or len(value) > MAX_NAME or any(ord(c) < 32 for c in value):
        raise _Invalid(f"{field} {value[:40]!r} is empty, too long or has control characters")


def add_broker_lifecycle_service(
    server: grpc.aio.Server, servicer: BrokerLifecycleServicer
) -> None:
    rpc.add_BrokerLifecycleServicer_to_server(servicer, server)
