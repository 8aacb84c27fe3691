"""Authorization on the Kafka listener, with the gRPC Admin API's table.

With `authorizer.class.name` set, a client that reaches a broker's Kafka port may do no more
than over gRPC: the admin APIs that run admin operations (metadata/admin_ops.py) are checked
operation by operation with kraft/security/authorizer.py's METHOD_OPERATIONS, under the
principal of the connection's client certificate (User:ANONYMOUS on PLAINTEXT), before any is
forwarded to the controller under the broker's own principal; DeleteRecords and DeleteGroups
need Delete. A refusal is logged like the gRPC interceptor's and answered as Kafka does:
CLUSTER_AUTHORIZATION_FAILED in an admin answer, TOPIC_AUTHORIZATION_FAILED per DeleteRecords
partition, GROUP_AUTHORIZATION_FAILED per group. Produce, Fetch and the group protocol are not
checked: the table has no Read or Write operation yet.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.kafka.admin_common import AdminBackend
from kraft.errors import Errors
from kraft.security.authorizer import METHOD_OPERATIONS, Authorizer
from metadata.rpc import admin_pb2 as pb

log = logging.getLogger(__name__)

ADMIN_SERVICE = "/kraft.admin.v1.Admin/"


def allowed(authorizer: Authorizer, principal: str, operation: str, what: str,
            peer: str) -> bool:
    if authorizer.allows(principal, operation):
        return True
    log.warning("denied %s on Kafka %s to %s (peer %s)", operation, what, principal, peer)
    return False


def refusal(principal: str, operation: str | None, what: str) -> str:
    return (f"{principal} may not {operation or 'call'} ({what}); ask an operator to add it to "
            "super.users or grant the operation in authorizer.acl.file")


class AuthorizedAdmin:
    """The admin operations as one client's principal may call them."""

    def __init__(self, admin: AdminBackend, authorizer: Authorizer, principal: str,
                 peer: str) -> None:
        self._admin = admin
        self._authorizer = authorizer
        self._principal = principal
        self._peer = peer

    async def call(self, method: str, request: Any, *, from_peer: bool = False) -> Any:
        operation = METHOD_OPERATIONS.get(ADMIN_SERVICE + method)
        if operation is not None and allowed(self._authorizer, self._principal, operation,
                                             method, self._peer):
            return await self._admin.call(method, request, from_peer=from_peer)
        if operation is None:  # unclassified: super users only, as over gRPC
            if self._principal in self._authorizer.super_users:
                return await self._admin.call(method, request, from_peer=from_peer)
            log.warning("denied %s (unclassified) on Kafka to %s (peer %s)", method,
                        self._principal, self._peer)
        response_type = getattr(pb, f"{method}Response")
        return response_type(status=pb.ResponseStatus(
            error_code=Errors.CLUSTER_AUTHORIZATION_FAILED,
            error_message=refusal(self._principal, operation, method)))
