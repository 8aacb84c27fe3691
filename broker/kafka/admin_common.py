"""What the Kafka admin APIs share: the admin operations they translate onto
(metadata/admin_ops.py, the same code the gRPC Admin API runs), the broker's controller
channel over them, and error fields.

A broker never writes metadata: the operations forward every write to the active controller.
Kafka's clients never see NOT_CONTROLLER from a KRaft broker (its controller channel retries
until the request's timeout), so neither do ours: a NOT_CONTROLLER answer (no active controller
known yet, or it just moved) is retried with a short backoff, and the request ends in
REQUEST_TIMED_OUT when none answered in time.
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from kraft.errors import DEFAULT_MESSAGES, Errors
from metadata.rpc import admin_pb2 as pb

RETRY_BACKOFF_S = 0.1
MIN_WAIT_MS = 5_000  # a client's timeout of 0 still gets a controller election's worth
MAX_WAIT_MS = 60_000


class AdminBackend(Protocol):
    """metadata.admin_ops.AdminOperations as the Kafka front uses it."""

    async def call(self, method: str, request: Any, *, from_peer: bool = False) -> Any: ...


async def call_controller(admin: AdminBackend, method: str, request: Any,
                          timeout_ms: int) -> Any:
    """The admin operation's answer; NOT_CONTROLLER retried until the request's timeout."""
    loop = asyncio.get_running_loop()
    wait_ms = min(max(timeout_ms, MIN_WAIT_MS), MAX_WAIT_MS)
    deadline = loop.time() + wait_ms / 1000
    while True:
        response = await admin.call(method, request)
        if response.status.error_code != Errors.NOT_CONTROLLER:
            return response
        if loop.time() + RETRY_BACKOFF_S > deadline:
            return type(response)(status=pb.ResponseStatus(
                error_code=Errors.REQUEST_TIMED_OUT,
                error_message=f"No active controller answered within {wait_ms} ms "
                              f"({response.status.error_message})"))
        await asyncio.sleep(RETRY_BACKOFF_S)


def message(code: int, text: str | None = None) -> str | None:
    """Kafka's error_message: none for success, else the refusal's text or the default."""
    if code == Errors.NONE:
        return None
    if text:
        return text
    try:
        return DEFAULT_MESSAGES.get(Errors(code))
    except ValueError:
        return None


def status_error(response: Any) -> tuple[int, str | None] | None:
    """(code, message) of a whole-request refusal, or None."""
    status = response.status
    if status.error_code == Errors.NONE:
        return None
    return status.error_code, message(status.error_code, status.error_message)


def timeout_ms(request: Any) -> int:
    """A request's `timeout` (kio gives a timedelta) in milliseconds."""
    seconds: float = request.timeout.total_seconds()
    return round(seconds * 1000)
