"""The Admin service's client for kraft-admin's command groups: any of the given servers is
asked, NOT_CONTROLLER hints are followed, unreachable nodes are retried (bounded), and every
failure becomes one CommandError line for the user."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc
from tenacity import RetryError, retry, retry_if_exception_type, stop_after_delay, wait_exponential

from kraft.errors import Errors, error_name
from kraft.security.tls import MESSAGE_SIZE_OPTIONS, TlsConfig, sync_channel
from metadata.rpc import CLUSTER_ID_KEY
from metadata.rpc import admin_pb2_grpc as rpc

RPC_TIMEOUT_S = 15.0  # longer than a node's forwarding deadline (10 s)
RETRY_FOR_S = 15.0


class CommandError(Exception):
    """A one-line failure for the user (admin_cli prints it and exits 1)."""


class _Retryable(Exception):
    """NOT_CONTROLLER or an unreachable node: worth another try."""


def failure_text(code: int, message: str) -> str:
    return f"{error_name(code)}: {message}" if message else error_name(code)


def parse_servers(text: str | None) -> list[str]:
    if not text:
        raise CommandError("--bootstrap-server HOST:PORT is required")
    servers = []
    for item in text.split(","):
        host, sep, port = item.strip().rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise CommandError(f"invalid address {item.strip()!r}: expected HOST:PORT")
        servers.append(f"{host}:{port}")
    return servers


class AdminClient:
    """Calls the Admin service at any of `servers`, following NOT_CONTROLLER hints."""

    def __init__(self, servers: Sequence[str], tls: TlsConfig | None = None,
                 cluster_id: str | None = None) -> None:
        """`cluster_id`: accept answers only from nodes of that cluster (CommandError for any
        other answer: another process may hold the port of a node that is down)."""
        self.tls = tls
        self.servers = list(servers)
        self.cluster_id = cluster_id
        self._next = 0
        self._redirect: str | None = None
        self.answered: str | None = None  # the server that answered the last call, if any

    def call(self, method: str, request: Any) -> Any:
        retry_for_s = RETRY_FOR_S
        self.answered = None

        @retry(retry=retry_if_exception_type(_Retryable), stop=stop_after_delay(retry_for_s),
               wait=wait_exponential(multiplier=0.05, max=1.0), reraise=False)
        def attempt() -> Any:
            return self._attempt(method, request)

        try:
            return attempt()
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            raise CommandError(f"gave up after {retry_for_s:g} s: {cause}") from cause

    def _attempt(self, method: str, request: Any) -> Any:
        endpoint = self._redirect or self.servers[self._next % len(self.servers)]
        with sync_channel(endpoint, self.tls, MESSAGE_SIZE_OPTIONS) as channel:
            try:
                response, call = getattr(rpc.AdminStub(channel), method).with_call(
                    request, timeout=RPC_TIMEOUT_S)
            except grpc.RpcError as exc:
                code = exc.code()
                if code == grpc.StatusCode.UNAVAILABLE:
                    self._redirect = None
                    self._next += 1
                    raise _Retryable(f"{endpoint} is unreachable (UNAVAILABLE)") from exc
                if code == grpc.StatusCode.DEADLINE_EXCEEDED:
                    raise CommandError(f"{endpoint} did not answer within {RPC_TIMEOUT_S:g} s; "
                                       "the request may or may not have been applied") from exc
                raise CommandError(f"{endpoint} answered {code.name}: "
                                   f"{exc.details()}") from exc
        self.answered = endpoint
        if self.cluster_id is not None:
            answered_for = dict(call.trailing_metadata() or ()).get(CLUSTER_ID_KEY)
            if answered_for != self.cluster_id:
                raise CommandError(f"{endpoint} answered for cluster {answered_for or '(none)'}, "
                                   f"not {self.cluster_id}: not a node of this cluster (another "
                                   "process on the port of a node that is down?)")
        status = response.status
        if status.error_code == Errors.NOT_CONTROLLER:
            self._redirect = status.controller_endpoint or None
            raise _Retryable(failure_text(status.error_code, status.error_message))
        if status.error_code != 0:
            raise CommandError(failure_text(status.error_code, status.error_message))
        return response
