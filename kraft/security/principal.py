"""The principal a caller authenticates as, named as Kafka names SSL principals: `User:` and
the client certificate's subject DN as Java's `X500Principal.getName()` prints it (RFC 2253),
passed through `ssl.principal.mapping.rules`; `User:ANONYMOUS` on a plaintext listener or
without a client certificate. One function names the certificate on every listener, gRPC and
Kafka alike, from the certificate's DER bytes, so one `super.users` entry covers both.

Java's RFC 2253, which this reproduces: RDNs last to first joined by `,`, the values of a
multi-valued RDN joined by `+` in their encoded order; keywords CN C L ST O OU STREET DC UID,
any other attribute as its dotted OID with `#` and the hex of the value's DER; string values
(Printable, T61, IA5, General, BMP, UTF8) read as UTF-8, with `, = + < > # ; " \\` escaped by
a backslash, NUL as `\\00`, and leading or trailing spaces (and CRs) escaped one by one.
Unescaped, a CN `admin,O=x` would read as the DN `CN=admin,O=x`.
"""

from __future__ import annotations

import functools
import inspect
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import grpc

from kraft.security.principal_mapping import DEFAULT_MAPPER, NoMatchingRule, PrincipalMapper

ANONYMOUS = "User:ANONYMOUS"

_KEYWORDS = {
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# PrintableString, T61String, IA5String, GeneralString, BMPString, UTF8String: the types Java
# prints as text (all decoded as UTF-8, as Java does); anything else is printed as #hex.
_STRING_TAGS = frozenset({0x13, 0x14, 0x16, 0x1B, 0x1E, 0x0C})
_ESCAPED = frozenset(',=+<>#;"\\')
_SEQUENCE, _SET, _OID = 0x30, 0x31, 0x06


class PrincipalError(Exception):
    """The caller has no principal: the connection or call is refused."""


def tls_peer_principal(
    certificate_der: bytes | None, mapper: PrincipalMapper = DEFAULT_MAPPER
) -> str:
    """The principal of a TLS peer's verified certificate (DER, as
    `SSLObject.getpeercert(binary_form=True)` gives it); ANONYMOUS without one. Raises
    PrincipalError when no mapping rule names it or the certificate cannot be read."""
    if not certificate_der:
        return ANONYMOUS
    try:
        return "User:" + mapper.name(certificate_subject(certificate_der))
    except (NoMatchingRule, ValueError) as exc:
        raise PrincipalError(str(exc)) from None


def peer_principal(
    context: grpc.aio.ServicerContext[Any, Any], mapper: PrincipalMapper = DEFAULT_MAPPER
) -> str:
    """The principal of a gRPC call, from the certificate gRPC verified (its PEM)."""
    pem = (context.auth_context() or {}).get("x509_pem_cert")
    if not pem:
        return ANONYMOUS
    return tls_peer_principal(_pem_to_der(next(iter(pem))), mapper)


@functools.lru_cache(maxsize=256)
def _pem_to_der(pem: bytes) -> bytes:
    try:
        return ssl.PEM_cert_to_DER_cert(pem.decode("ascii"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PrincipalError(f"unreadable client certificate: {exc}") from None


@functools.lru_cache(maxsize=256)  # gRPC names the caller on every call
def certificate_subject(certificate_der: bytes) -> str:
    """The subject DN of a DER certificate as Java prints it (RFC 2253). Raises ValueError
    for bytes that are not a certificate."""
    parts = _children(_only(certificate_der, _SEQUENCE, "certificate"))
    if not parts or parts[0][0] != _SEQUENCE:
        raise ValueError("not a DER certificate")
    fields = _children(parts[0][1])  # tbsCertificate
    if fields and fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    if len(fields) < 5 or fields[4][0] != _SEQUENCE:
        raise ValueError("certificate without a subject")
    return rfc2253(fields[4][1])


def rfc2253(name_der: bytes) -> str:
    """A DER Name (its content: the RDNs) as Java's `X500Principal.getName()` prints it."""
    rdns = []
    for tag, rdn, _ in _children(name_der):
        if tag != _SET:
            raise ValueError("a Name holds SETs")
        values = []
        for ava_tag, ava, _ in _children(rdn):
            parts = _children(ava)
            if ava_tag != _SEQUENCE or len(parts) != 2 or parts[0][0] != _OID:
                raise ValueError("an attribute is a SEQUENCE of an OID and a value")
            values.append(_attribute(_oid(parts[0][1]), parts[1][0], parts[1][1],
                                     parts[1][2]))
        rdns.append("+".join(values))
    return ",".join(reversed(rdns))


def _attribute(oid: str, tag: int, content: bytes, encoded: bytes) -> str:
    keyword = _KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{encoded.hex()}"
    return f"{keyword}={_escape(content.decode('utf-8', errors='replace'))}"


def _escape(value: str) -> str:
    escaped = "".join("\\" + c if c in _ESCAPED else "\\00" if c == "\0" else c for c in value)
    core = escaped.strip(" \r")
    if not core:
        return "".join("\\" + c for c in escaped)
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped) - len(escaped.rstrip(" \r"))
    return ("".join("\\" + c for c in escaped[:lead]) + core
            + "".join("\\" + c for c in escaped[len(escaped) - trail:]))


# ---- just enough DER: tag, length, content ----

def _header(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, start of content, end) of the element at `pos`."""
    if pos + 2 > len(data):
        raise ValueError("truncated DER")
    tag, pos = data[pos], pos + 1
    if tag & 0x1F == 0x1F:  # high tag number: skip its continuation bytes
        while pos < len(data) and data[pos] & 0x80:
            pos += 1
        pos += 1
    if pos >= len(data):
        raise ValueError("truncated DER")
    length, pos = data[pos], pos + 1
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > len(data):
            raise ValueError("unsupported DER length")
        length, pos = int.from_bytes(data[pos:pos + count], "big"), pos + count
    if pos + length > len(data):
        raise ValueError("truncated DER")
    return tag, pos, pos + length


def _only(data: bytes, tag: int, what: str) -> bytes:
    """The content of the element that starts `data`, which must have `tag`."""
    found, start, end = _header(data, 0)
    if found != tag:
        raise ValueError(f"not a DER {what}")
    return data[start:end]


def _children(content: bytes) -> list[tuple[int, bytes, bytes]]:
    """(tag, content, whole encoding) of each element in a constructed value's content."""
    return list(_iter_children(content))


def _iter_children(content: bytes) -> Iterator[tuple[int, bytes, bytes]]:
    pos = 0
    while pos < len(content):
        tag, start, end = _header(content, pos)
        yield tag, content[start:end], content[pos:end]
        pos = end


def _oid(content: bytes) -> str:
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    if not arcs or content[-1] & 0x80:
        raise ValueError("malformed OID")
    first = min(arcs[0] // 40, 2)
    return ".".join(map(str, [first, arcs[0] - 40 * first, *arcs[1:]]))


class AuthenticatingInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]  # generic in grpc-stubs only
    """Refuses (UNAUTHENTICATED) every call whose certificate no mapping rule names, as
    Kafka fails such a login; needed only when the rules can refuse (no DEFAULT). Health
    checks stay open, as the authorizer leaves them."""

    def __init__(self, mapper: PrincipalMapper) -> None:
        self.mapper = mapper

    async def intercept_service(
        self,
        continuation: Callable[
            [grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler[Any, Any]]
        ],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler[Any, Any]:
        handler = await continuation(handler_call_details)
        if handler is None or handler_call_details.method.startswith("/grpc.health."):
            return handler
        mapper = self.mapper

        async def authenticate(context: grpc.aio.ServicerContext[Any, Any]) -> None:
            try:
                peer_principal(context, mapper)
            except PrincipalError as exc:
                await context.abort(grpc.StatusCode.UNAUTHENTICATED, str(exc))

        def wrap(inner: Any) -> Any:
            if inspect.isasyncgenfunction(inner):  # answers by yielding
                async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
                    await authenticate(context)
                    async for reply in inner(request, context):
                        yield reply
                return stream

            async def call(request: Any, context: Any) -> Any:
                await authenticate(context)
                return await inner(request, context)
            return call

        for kind, make in (("unary_unary", grpc.unary_unary_rpc_method_handler),
                           ("unary_stream", grpc.unary_stream_rpc_method_handler),
                           ("stream_unary", grpc.stream_unary_rpc_method_handler),
                           ("stream_stream", grpc.stream_stream_rpc_method_handler)):
            inner = getattr(handler, kind)
            if inner is not None:
                wrapped: grpc.RpcMethodHandler[Any, Any] = make(
                    wrap(inner), request_deserializer=handler.request_deserializer,
                    response_serializer=handler.response_serializer)
                return wrapped
        return handler
