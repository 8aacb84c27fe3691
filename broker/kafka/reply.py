"""What a handler gives the connection: a response to send, or none (acks=0 Produce), and
whether to close the connection afterwards."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from typing import Any

NO_THROTTLE = datetime.timedelta(0)


@dataclass(frozen=True, slots=True)
class Reply:
    response: Any  # a kio response entity, or None: nothing is sent
    close: bool = False  # close the connection after sending (or instead of) the response


def millis(delta: datetime.timedelta) -> int:
    """kio's i32/i64 timedelta fields as Kafka's milliseconds."""
    return round(delta.total_seconds() * 1000)
