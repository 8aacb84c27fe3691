"""InitProducerId (API 22, v0-4): a new producer id for idempotent producers (kafka-python's
default producer cannot start without it)."""

from __future__ import annotations

from typing import Any

from broker.api import DataPlane
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import NO_THROTTLE, Reply
from broker.kafka.versions import ApiKey


async def handle_init_producer_id(data_plane: DataPlane, version: int, request: Any) -> Reply:
    result = await data_plane.init_producer_id(request.transactional_id)
    module = response_module(ApiKey.INIT_PRODUCER_ID, version)
    return Reply(build(
        module, "InitProducerIdResponse", throttle_time=NO_THROTTLE,
        error_code=error_code(result.error), producer_id=result.producer_id,
        producer_epoch=result.producer_epoch,
    ))
