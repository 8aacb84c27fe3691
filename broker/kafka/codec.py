"""Frames <-> kio entities: request header + body in, response header + body out (and the
reverse for the inter-broker client).

Decoding is total: any frame that is not a valid encoding of a supported request raises
FrameError, the one decode failure type; nothing else escapes (see scan.py for why kio's
native decoder is never handed an unchecked frame).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import io
import struct
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_payload_module, load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from broker.kafka.legacy import legacy_module, legacy_request, legacy_response
from broker.kafka.scan import ScanError, prepare, sanitize

API_VERSIONS_KEY = 18
_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id: the same in every header
_SIZE = struct.Struct(">i")


class FrameError(ValueError):
    """A frame that does not decode: truncated, garbage, or not the schema it claims."""


@dataclass(frozen=True, slots=True)
class RequestHead:
    api_key: int
    api_version: int
    correlation_id: int


@dataclass(frozen=True, slots=True)
class DecodedRequest:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body: Any  # the kio request entity of (api_key, api_version)
    size: int = 0  # the frame's bytes (Kafka's request size, what producer_byte_rate counts)


def peek_head(frame: bytes) -> RequestHead:
    """The fixed start of every request header, enough to answer or refuse."""
    if len(frame) < _HEAD.size:
        raise FrameError(f"a {len(frame)}-byte frame is shorter than a request header")
    api_key, api_version, correlation_id = _HEAD.unpack_from(frame, 0)
    return RequestHead(api_key, api_version, correlation_id)


@functools.cache
def request_schema(api_key: int, api_version: int) -> Any:
    """kio's request class (or broker/kafka/legacy's for an old version kio lacks), or None
    when neither has such a version."""
    try:
        schema: Any = load_request_schema(api_key, api_version)
    except Exception:  # kio's UnknownAPIKey / UnknownEntity, or a failed dynamic import
        schema = legacy_request(api_key, api_version)
        if schema is None:
            return None
    prepare(schema)
    prepare(schema.__header_schema__)
    return schema


@functools.cache
def response_schema(api_key: int, api_version: int) -> Any:
    return legacy_response(api_key, api_version) or load_response_schema(api_key, api_version)


@functools.cache
def response_module(api_key: int, api_version: int) -> ModuleType:
    """The module holding a response version's nested classes (PartitionData, ...)."""
    return legacy_module(api_key, api_version) or \
        load_payload_module(api_key, api_version, EntityType.response)


@functools.cache
def request_module(api_key: int, api_version: int) -> ModuleType:
    return legacy_module(api_key, api_version) or \
        load_payload_module(api_key, api_version, EntityType.request)


@functools.cache
def _reader(schema: Any) -> Any:
    """kio builds a reader per call of entity_reader: build each one once."""
    return entity_reader(schema)


def _is_fatal(exc: BaseException) -> bool:
    return isinstance(exc, KeyboardInterrupt | SystemExit | GeneratorExit | asyncio.CancelledError)


def decode_request(frame: bytes) -> DecodedRequest:
    """A request frame (without its size prefix). FrameError if the key/version is one kio
    does not know or the bytes do not parse."""
    head = peek_head(frame)
    schema = request_schema(head.api_key, head.api_version)
    if schema is None:
        raise FrameError(f"no schema for api key {head.api_key} version {head.api_version}")
    header_schema = schema.__header_schema__
    try:
        clean = sanitize(frame, 0, (header_schema, schema))
        header, used = _reader(header_schema)(clean, 0)
        body, _ = _reader(schema)(clean, used)
    except ScanError as exc:
        raise FrameError(str(exc)) from None
    except BaseException as exc:  # kio's DecodeError, ValueError, pyo3's PanicException...
        if _is_fatal(exc):
            raise
        raise FrameError(f"{type(exc).__name__}: {exc}") from None
    return DecodedRequest(
        head.api_key, head.api_version, head.correlation_id, header.client_id, body, len(frame)
    )


def _write_frame(parts: tuple[tuple[Any, Any], ...]) -> bytes:
    buffer = io.BytesIO()
    buffer.write(b"\0\0\0\0")
    for schema, entity in parts:
        entity_writer(schema)(buffer, entity)
    data = buffer.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    del data
    return buffer.getvalue()


def encode_response(correlation_id: int, body: Any) -> bytes:
    """A response frame with its size prefix. The header version is the response class's own
    (kio gives ApiVersions header v0 whatever its version, as Kafka does)."""
    header_schema = type(body).__header_schema__
    return _write_frame((
        (header_schema, header_schema(correlation_id=correlation_id)),
        (type(body), body),
    ))


def encode_request(correlation_id: int, client_id: str | None, body: Any) -> bytes:
    """A request frame with its size prefix (the inter-broker client)."""
    schema = type(body)
    header_schema = schema.__header_schema__
    header = header_schema(
        request_api_key=schema.__api_key__,
        request_api_version=schema.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    return _write_frame(((header_schema, header), (schema, body)))


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, kio response entity) of a response frame without its size prefix."""
    schema = response_schema(api_key, api_version)
    header_schema = schema.__header_schema__
    try:
        clean = sanitize(frame, 0, (header_schema, schema))  # a broken peer must not abort us
        header, used = _reader(header_schema)(clean, 0)
        body, _ = _reader(schema)(clean, used)
    except ScanError as exc:
        raise FrameError(str(exc)) from None
    except BaseException as exc:
        if _is_fatal(exc):
            raise
        raise FrameError(f"{type(exc).__name__}: {exc}") from None
    return header.correlation_id, body


def correlation_id_of(frame: bytes) -> int:
    if len(frame) < 4:
        raise FrameError("a response frame shorter than its correlation id")
    value: int = _SIZE.unpack_from(frame, 0)[0]
    return value


def error_code(code: int) -> ErrorCode:
    """kio's enum member for a Kafka error code (UNKNOWN_SERVER_ERROR for one it lacks)."""
    try:
        return ErrorCode(code)
    except ValueError:
        return ErrorCode.unknown_server_error


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(module: ModuleType, class_name: str, /, **values: Any) -> Any:
    """`module.class_name(**values)` with only the fields this version has: one handler
    writes every version, and a field a version lacks is simply not sent."""
    cls = getattr(module, class_name)
    names = _field_names(cls)
    return cls(**{key: value for key, value in values.items() if key in names})
