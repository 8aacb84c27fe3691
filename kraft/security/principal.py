"""The principal a gRPC caller authenticates as, named as Kafka names SSL principals by
default: `User:` and the client certificate's subject distinguished name (`User:CN=admin,
O=kraft`); `User:ANONYMOUS` on a plaintext listener or without a client certificate."""

from __future__ import annotations

import grpc

ANONYMOUS = "User:ANONYMOUS"


def peer_principal(context: grpc.aio.ServicerContext[object, object]) -> str:
    auth = context.auth_context() or {}
    subject = auth.get("x509_subject")
    if subject:
        return "User:" + next(iter(subject)).decode(errors="replace")
    common_name = auth.get("x509_common_name")
    if common_name:
        return "User:CN=" + next(iter(common_name)).decode(errors="replace")
    return ANONYMOUS
