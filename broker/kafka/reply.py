"""What a handler gives the connection: a response to send, or none (acks=0 Produce), whether
to close the connection afterwards, and how long to read nothing more from it (a quota's
throttle, KIP-219: the client is told in the response and the broker mutes the channel)."""

from __future__ import annotations

import dataclasses
import datetime
from dataclasses import dataclass
from typing import Any

NO_THROTTLE = datetime.timedelta(0)


@dataclass(frozen=True, slots=True)
class Reply:
    response: Any  # a kio response entity, or None: nothing is sent
    close: bool = False  # close the connection after sending (or instead of) the response
    throttle_ms: int = 0  # once sent, read no further request from the connection this long


def millis(delta: datetime.timedelta) -> int:
    """kio's i32/i64 timedelta fields as Kafka's milliseconds."""
    return round(delta.total_seconds() * 1000)


def throttle_time(throttle_ms: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=throttle_ms)


def throttled(reply: Reply, throttle_ms: int) -> Reply:
    """`reply` throttled for `throttle_ms`: its response's throttle_time says so (every Kafka
    response that has the field) and the connection is muted that long."""
    if throttle_ms <= 0:
        return reply
    response = reply.response
    if response is not None and hasattr(response, "throttle_time"):
        response = dataclasses.replace(response, throttle_time=throttle_time(throttle_ms))
    return Reply(response, reply.close, throttle_ms)
