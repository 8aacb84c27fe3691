"""The principal a gRPC caller authenticates as, named as Kafka names SSL principals by
default: `User:` and the client certificate's subject distinguished name (`User:CN=admin,
O=kraft`); `User:ANONYMOUS` on a plaintext listener or without a client certificate."""

from __future__ import annotations

import grpc

ANONYMOUS = "User:ANONYMOUS"


# Kafka's short names for the subject attributes RFC 2253 prints.
_SHORT_NAMES = {"commonName": "CN", "organizationName": "O", "organizationalUnitName": "OU",
                "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
                "domainComponent": "DC", "userId": "UID"}


def tls_peer_principal(peer_certificate: dict[str, object] | None) -> str:
    """The principal of a TLS connection's verified client certificate (Python's
    `SSLObject.getpeercert()`), named as gRPC names it: `User:` and the subject DN in RFC 2253
    order (last RDN first); ANONYMOUS without one."""
    subject = (peer_certificate or {}).get("subject")
    if not isinstance(subject, tuple) or not subject:
        return ANONYMOUS
    parts = []
    for rdn in reversed(subject):
        for name, value in rdn:
            parts.append(f"{_SHORT_NAMES.get(name, name)}={value}")
    return "User:" + ",".join(parts)


def peer_principal(context: grpc.aio.ServicerContext[object, object]) -> str:
    auth = context.auth_context() or {}
    subject = auth.get("x509_subject")
    if subject:
        return "User:" + next(iter(subject)).decode(errors="replace")
    common_name = auth.get("x509_common_name")
    if common_name:
        return "User:CN=" + next(iter(common_name)).decode(errors="replace")
    return ANONYMOUS
