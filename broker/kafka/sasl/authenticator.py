"""The SASL handshake state machine of one connection, as Kafka's SaslServerAuthenticator and
KafkaChannel run it (kafka-security.md §3). Sans-I/O: each received frame goes in with the
time, a Step comes out saying what to send and whether to close.

* Before authentication only ApiVersions (one success; retried after an error answer) and
  SaslHandshake are served; any other request closes the connection with no response.
* SaslHandshake v0: the next frames are raw SASL tokens; v1: SaslAuthenticate requests only
  (another request gets its ILLEGAL_SASL_STATE answer when it has a top-level error code,
  and the connection closes). An unknown mechanism: UNSUPPORTED_SASL_MECHANISM with the
  enabled list, then close.
* A failed exchange: SASL_AUTHENTICATION_FAILED with the mechanism's message (generic for
  credentials: no user enumeration), sent and closed after
  connection.failed.authentication.delay.ms.
* Authenticated: SaslAuthenticate -> ILLEGAL_SASL_STATE; SaslHandshake -> ILLEGAL_SASL_STATE
  unless connections.max.reauth.ms > 0, where it starts a re-authentication (KIP-368, at most
  once a second) that must keep the mechanism and the principal. Once the session lifetime
  has passed, any other request closes the connection.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from broker.kafka.api_versions_api import handle_api_versions, unsupported_version_response
from broker.kafka.codec import (
    FrameError,
    RequestHead,
    build,
    decode_request,
    peek_head,
    response_module,
    response_schema,
)
from broker.kafka.sasl.mechanisms import (
    SaslAuthenticationFailed,
    SaslCredentialsInvalid,
    SaslServer,
)
from broker.kafka.sasl.settings import SaslSettings
from broker.kafka.versions import ApiKey, is_supported

log = logging.getLogger(__name__)

MIN_REAUTH_INTERVAL_S = 1.0  # KafkaChannel.MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS
_AFTER_AUTHENTICATION = "SaslAuthenticate request received after successful authentication"


@dataclass(frozen=True, slots=True)
class Step:
    """What the connection does with one frame. `forward`: an authenticated request, for the
    APIs. `response` (a kio entity) or `raw` (a SASL token after a v0 handshake) is sent
    under `correlation_id`; then, with `close`, the connection closes for that reason: bad
    input, unless `failed` (a failed authentication: closed, and answered, after
    connection.failed.authentication.delay.ms) or `expired` (the session's end)."""

    forward: bool = False
    correlation_id: int = 0
    response: Any = None
    raw: bytes | None = None
    close: str | None = None
    failed: bool = False
    expired: bool = False


class SaslState(enum.Enum):
    INITIAL_REQUEST = "initial request"
    HANDSHAKE_OR_VERSIONS_REQUEST = "handshake or versions request"
    HANDSHAKE_REQUEST = "handshake request"
    AUTHENTICATE = "authenticate"
    REAUTH_BAD_MECHANISM = "re-authentication with another mechanism"
    COMPLETE = "complete"
    FAILED = "failed"


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)


def _handshake_response(version: int, error: ErrorCode, mechanisms: tuple[str, ...]) -> Any:
    return build(response_module(ApiKey.SASL_HANDSHAKE, version), "SaslHandshakeResponse",
                 error_code=error, mechanisms=mechanisms)


def _authenticate_response(version: int, error: ErrorCode, message: str | None,
                           auth_bytes: bytes = b"", lifetime_ms: int = 0) -> Any:
    return build(response_module(ApiKey.SASL_AUTHENTICATE, version), "SaslAuthenticateResponse",
                 error_code=error, error_message=message, auth_bytes=auth_bytes,
                 session_lifetime=datetime.timedelta(milliseconds=lifetime_ms))


def _zero(field_: dataclasses.Field[Any]) -> Any:
    kind = field_.metadata.get("kafka_type", "")
    if kind.startswith(("int", "uint", "float")):
        return 0
    if kind.startswith("timedelta"):
        return datetime.timedelta(0)
    return {"string": "", "bytes": b"", "records": None, "bool": False, "uuid": None,
            "error_code": ErrorCode.none}.get(kind, ())


def illegal_state_response(api_key: int, version: int) -> Any:
    """An API's answer carrying ILLEGAL_SASL_STATE in its top-level error code (every other
    field zero or empty), or None when the API has no top-level error code."""
    cls = response_schema(api_key, version)
    fields = dataclasses.fields(cls)
    if not any(f.name == "error_code" for f in fields):
        return None
    values = {f.name: _zero(f) for f in fields
              if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    values["error_code"] = ErrorCode.illegal_sasl_state
    try:
        return cls(**values)
    except (TypeError, ValueError):  # a required nested struct: no generic zero for it
        return None


def answer_when_authenticated(head: RequestHead, frame: bytes) -> Step:
    """SaslHandshake or SaslAuthenticate on a connection that needs no SASL (PLAINTEXT, SSL)
    or has authenticated: ILLEGAL_SASL_STATE, as Kafka's KafkaApis answers them."""
    if not is_supported(head.api_key, head.api_version):
        return Step(close=f"unsupported api key {head.api_key} version {head.api_version}")
    try:
        decode_request(frame)
    except FrameError as exc:
        return Step(close=f"api key {head.api_key} v{head.api_version} does not parse: {exc}")
    if head.api_key == ApiKey.SASL_HANDSHAKE:
        response = _handshake_response(head.api_version, ErrorCode.illegal_sasl_state, ())
    else:
        response = _authenticate_response(head.api_version, ErrorCode.illegal_sasl_state,
                                          _AFTER_AUTHENTICATION)
    return Step(correlation_id=head.correlation_id, response=response)


@dataclass(slots=True)
class _Reauthentication:
    mechanism: str
    principal: str


class SaslAuthenticator:
    """One connection's SASL state. `principal` is User:<name> once authenticated."""

    def __init__(self, settings: SaslSettings, clock: Callable[[], float]) -> None:
        if not settings.mechanisms:
            raise ValueError("No SASL mechanisms are enabled")
        self._settings = settings
        self._clock = clock
        self.state = SaslState.INITIAL_REQUEST
        self.principal: str | None = None
        self.mechanism: str | None = None
        self._server: SaslServer | None = None
        self._kafka_headers = False  # SaslHandshake v1+: tokens come as SaslAuthenticate
        self._reauth: _Reauthentication | None = None
        self._bad_mechanism = ""
        self._expires_at: float | None = None  # the session's end (connections.max.reauth.ms)
        self._last_reauth_start: float | None = None

    @property
    def authenticated(self) -> bool:
        return self.state is SaslState.COMPLETE

    def max_frame_bytes(self, socket_request_max_bytes: int) -> int:
        """Frames of an exchange are bounded by sasl.server.max.receive.size (a re-auth's
        SaslHandshake arrives as an ordinary request, under socket.request.max.bytes)."""
        if self.state is SaslState.COMPLETE:
            return socket_request_max_bytes
        return self._settings.max_receive_size

    @property
    def _phase(self) -> str:
        return "re-authentication" if self._reauth is not None else "authentication"

    def receive(self, frame: bytes) -> Step:
        state = self.state
        if state is SaslState.COMPLETE:
            return self._authenticated(frame)
        if state is SaslState.AUTHENTICATE:
            return self._token(frame)
        if state is SaslState.REAUTH_BAD_MECHANISM:
            return self._fail_token(frame, SaslAuthenticationFailed(self._bad_mechanism))
        if state is SaslState.FAILED:
            return Step(close="a frame after a failed authentication")
        return self._kafka_request(frame)

    # ---- before authentication: ApiVersions and SaslHandshake ----

    def _kafka_request(self, frame: bytes) -> Step:
        try:
            head = peek_head(frame)
        except FrameError as exc:
            return self._invalid(str(exc))
        if head.api_key not in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE):
            return self._invalid(f"unexpected Kafka request of type {_name(head.api_key)} "
                                 f"during SASL {self._phase}")
        if head.api_key == ApiKey.API_VERSIONS:
            return self._api_versions(head, frame)
        if not is_supported(head.api_key, head.api_version):
            return self._invalid(f"unsupported SaslHandshake version {head.api_version}")
        try:
            request = decode_request(frame)
        except FrameError as exc:
            return self._invalid(f"SaslHandshake v{head.api_version} does not parse: {exc}")
        if self.state is SaslState.INITIAL_REQUEST:
            self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        return self._handshake(head, request.body.mechanism)

    def _invalid(self, reason: str) -> Step:
        if self.state is SaslState.INITIAL_REQUEST:
            reason += (" (is the client configured with the wrong security protocol, or not a "
                       "Kafka client?)")
        self.state = SaslState.FAILED
        return Step(close=reason)

    def _api_versions(self, head: RequestHead, frame: bytes) -> Step:
        if self.state is SaslState.HANDSHAKE_REQUEST or self._reauth is not None:
            self.state = SaslState.FAILED
            return Step(close=f"ApiVersions again during SASL {self._phase}")
        self.state = SaslState.HANDSHAKE_OR_VERSIONS_REQUEST
        if not is_supported(head.api_key, head.api_version):
            return Step(correlation_id=head.correlation_id,
                        response=unsupported_version_response())
        try:
            request = decode_request(frame)
        except FrameError as exc:
            return self._invalid(f"ApiVersions v{head.api_version} does not parse: {exc}")
        response = handle_api_versions(head.api_version, request.body).response
        if response.error_code == ErrorCode.none:  # an INVALID_REQUEST answer may be retried
            self.state = SaslState.HANDSHAKE_REQUEST
        return Step(correlation_id=head.correlation_id, response=response)

    def _handshake(self, head: RequestHead, mechanism: str) -> Step:
        enabled = self._settings.mechanisms
        self._kafka_headers = head.api_version >= 1
        if mechanism not in enabled:
            self.state = SaslState.FAILED
            return Step(correlation_id=head.correlation_id,
                        response=_handshake_response(
                            head.api_version, ErrorCode.unsupported_sasl_mechanism, enabled),
                        close=f"unsupported SASL mechanism {mechanism!r}", failed=True)
        answer = Step(correlation_id=head.correlation_id,
                      response=_handshake_response(head.api_version, ErrorCode.none, enabled))
        if self._reauth is not None and mechanism != self._reauth.mechanism:
            # Kafka accepts the handshake and fails the exchange's first token.
            self._bad_mechanism = (
                f"SASL mechanism '{mechanism}' requested by client is not supported for "
                f"re-authentication of mechanism '{self._reauth.mechanism}'")
            self.state = SaslState.REAUTH_BAD_MECHANISM
            return answer
        self._server = self._settings.new_server(mechanism)
        self.state = SaslState.AUTHENTICATE
        return answer

    # ---- the exchange ----

    def _token(self, frame: bytes) -> Step:
        server = self._server
        assert server is not None
        if not self._kafka_headers:  # after SaslHandshake v0: the frame is the token
            try:
                challenge = server.evaluate(frame)
                if server.complete:
                    self._complete(server)
            except (SaslAuthenticationFailed, SaslCredentialsInvalid) as exc:
                self.state = SaslState.FAILED
                return Step(close=self._failure_reason(exc, server.mechanism), failed=True)
            return Step(raw=challenge)
        try:
            head = peek_head(frame)
        except FrameError as exc:
            return self._invalid(str(exc))
        if head.api_key != ApiKey.SASL_AUTHENTICATE:
            return self._illegal_request(head, frame)
        if not is_supported(head.api_key, head.api_version):
            return self._invalid(f"unsupported SaslAuthenticate version {head.api_version}")
        try:
            request = decode_request(frame)
        except FrameError as exc:
            return self._invalid(f"SaslAuthenticate v{head.api_version} does not parse: {exc}")
        version = head.api_version
        try:
            challenge = server.evaluate(request.body.auth_bytes)
            lifetime_ms = self._complete(server) if server.complete else 0
        except (SaslAuthenticationFailed, SaslCredentialsInvalid) as exc:
            return self._fail(head, exc, server.mechanism)
        return Step(correlation_id=head.correlation_id,
                    response=_authenticate_response(version, ErrorCode.none, None, challenge,
                                                    lifetime_ms))

    def _illegal_request(self, head: RequestHead, frame: bytes) -> Step:
        self.state = SaslState.FAILED
        reason = (f"unexpected Kafka request of type {_name(head.api_key)} during SASL "
                  f"{self._phase}")
        response = None
        if is_supported(head.api_key, head.api_version):
            try:
                decode_request(frame)
                response = illegal_state_response(head.api_key, head.api_version)
            except FrameError:
                pass
        return Step(correlation_id=head.correlation_id, response=response, close=reason,
                    failed=response is not None)

    def _fail_token(self, frame: bytes, exc: SaslAuthenticationFailed) -> Step:
        """REAUTH_BAD_MECHANISM: the exchange's first token fails with Kafka's message."""
        self.state = SaslState.FAILED
        try:
            head = peek_head(frame)
        except FrameError:
            return Step(close=str(exc), failed=True)
        if not self._kafka_headers or head.api_key != ApiKey.SASL_AUTHENTICATE \
                or not is_supported(head.api_key, head.api_version):
            return Step(close=str(exc), failed=True)
        return self._fail(head, exc, self._reauth.mechanism if self._reauth else "")

    def _failure_reason(self, exc: Exception, mechanism: str) -> str:
        if isinstance(exc, SaslCredentialsInvalid):
            return f"{self._generic(mechanism)} ({exc})"
        return str(exc)

    def _generic(self, mechanism: str) -> str:
        return (f"Authentication failed during {self._phase} due to invalid credentials with "
                f"SASL mechanism {mechanism}")

    def _fail(self, head: RequestHead, exc: Exception, mechanism: str) -> Step:
        self.state = SaslState.FAILED
        message = self._generic(mechanism) if isinstance(exc, SaslCredentialsInvalid) \
            else str(exc)
        return Step(correlation_id=head.correlation_id,
                    response=_authenticate_response(
                        head.api_version, ErrorCode.sasl_authentication_failed, message),
                    close=self._failure_reason(exc, mechanism), failed=True)

    def _complete(self, server: SaslServer) -> int:
        """Authenticated: the principal, and the session lifetime to tell the client."""
        principal = f"User:{server.authorization_id}"
        if self._reauth is not None and principal != self._reauth.principal:
            old, new = self._reauth.principal, principal
            raise SaslAuthenticationFailed(
                "Cannot change principals during re-authentication from "
                f"{old.replace(':', '.', 1)}: {new.replace(':', '.', 1)}")
        lifetime_ms = max(0, self._settings.reauth_ms)
        self._expires_at = self._clock() + lifetime_ms / 1000 if lifetime_ms else None
        self.principal, self.mechanism = principal, server.mechanism
        self.state, self._reauth, self._server = SaslState.COMPLETE, None, None
        return lifetime_ms

    # ---- authenticated ----

    def _authenticated(self, frame: bytes) -> Step:
        try:
            head = peek_head(frame)
        except FrameError:
            return Step(forward=True)  # the front refuses it as any bad frame
        now = self._clock()
        if head.api_key == ApiKey.SASL_HANDSHAKE and self._may_reauthenticate(now):
            assert self.mechanism is not None and self.principal is not None
            self._last_reauth_start = now
            self._reauth = _Reauthentication(self.mechanism, self.principal)
            self.state = SaslState.HANDSHAKE_REQUEST
            return self._kafka_request(frame)
        if self._expires_at is not None and now >= self._expires_at:
            self.state = SaslState.FAILED
            return Step(close="its SASL session expired (connections.max.reauth.ms) without "
                              "re-authentication", expired=True)
        if head.api_key in (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE):
            return answer_when_authenticated(head, frame)
        return Step(forward=True)

    def _may_reauthenticate(self, now: float) -> bool:
        return self._expires_at is not None and (
            self._last_reauth_start is None
            or now - self._last_reauth_start >= MIN_REAUTH_INTERVAL_S)
