"""Authorization on the Kafka listener: every API as Kafka's KafkaApis authorizes it
(kafka-security.md §2), with the node's StandardAuthorizer and the connection's principal
(its client certificate's, User:ANONYMOUS on PLAINTEXT) from its address.

API_AUTHORIZATION is the table of what each API needs; a unit test keeps every API the
listener serves in it. The handlers ask a RequestAuthorization, which allows everything when
no authorizer is configured. Refusals are answered with Kafka's code per resource
(TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED,
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) so clients raise their usual exceptions, and logged by
the authorizer (rate-limited, `kraft.authorizer`). The admin APIs run the admin operations
through metadata/authorizer/admin_checks.py, the gRPC Admin service's checks.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from broker.api import Request
from broker.kafka.admin_common import AdminBackend
from kraft.security.authorizer import RequestAuthorizer
from metadata.authorizer.admin_checks import AdminCaller, as_standard, authorized_admin_call
from metadata.authorizer.model import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
)
from metadata.authorizer.standard import StandardAuthorizer, java_host
from metadata.image import MetadataImage

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)  # the bitfield's "not asked"

# Api key -> what it needs (as docs/security.md's table says it). Keys 29-31 are the ACL APIs.
API_AUTHORIZATION: Mapping[int, str] = {
    0: "Produce: WRITE on each topic (29 per partition)",
    1: "Fetch: READ on each topic (29 per partition); a replica's fetch (replica_id >= 0) "
       "CLUSTER_ACTION on the cluster (else 29 on every partition)",
    2: "ListOffsets: DESCRIBE on each topic (29); replica_id >= 0 needs CLUSTER_ACTION",
    3: "Metadata: DESCRIBE on each topic (named: 29, all: left out); auto-creation CREATE on "
       "the cluster or the topic (29)",
    8: "OffsetCommit: READ on the group (30 on all), READ on each topic (29)",
    9: "OffsetFetch: DESCRIBE on the group (30), DESCRIBE on each topic (named: 29, all: "
       "left out)",
    10: "FindCoordinator: DESCRIBE on the group (30) or transactional id (53)",
    11: "JoinGroup: READ on the group (30)",
    12: "Heartbeat: READ on the group (30)",
    13: "LeaveGroup: READ on the group (30)",
    14: "SyncGroup: READ on the group (30)",
    15: "DescribeGroups: DESCRIBE on each group (30)",
    16: "ListGroups: DESCRIBE on the cluster, else the groups the caller may DESCRIBE",
    17: "SaslHandshake: none (the listener's SASL front answers it, broker/kafka/sasl)",
    18: "ApiVersions: none",
    19: "CreateTopics: CREATE on the cluster or the topic (29); DESCRIBE_CONFIGS on the "
        "topic for its configs",
    20: "DeleteTopics: DELETE on the cluster or the topic (29)",
    21: "DeleteRecords: DELETE on each topic (29)",
    22: "InitProducerId: transactional: WRITE on the transactional id (53); else "
        "IDEMPOTENT_WRITE on the cluster or WRITE on any topic (31)",
    23: "OffsetForLeaderEpoch: CLUSTER_ACTION on the cluster or DESCRIBE on each topic (29); "
        "replica_id >= 0 needs CLUSTER_ACTION",
    24: "AddPartitionsToTxn: WRITE on the transactional id (53 on all), WRITE on each topic "
        "(29 for its partitions, 55 on the others)",
    25: "AddOffsetsToTxn: WRITE on the transactional id (53), READ on the group (30)",
    26: "EndTxn: WRITE on the transactional id (53)",
    27: "WriteTxnMarkers: CLUSTER_ACTION on the cluster (31 on every partition)",
    28: "TxnOffsetCommit: WRITE on the transactional id (53), READ on the group (30), READ "
        "on each topic (29)",
    29: "DescribeAcls: DESCRIBE on the cluster (31)",
    30: "CreateAcls: ALTER on the cluster (31)",
    31: "DeleteAcls: ALTER on the cluster (31)",
    32: "DescribeConfigs: DESCRIBE_CONFIGS on the topic (29), group (30) or cluster (31)",
    33: "AlterConfigs: ALTER_CONFIGS on the topic (29), group (30) or cluster (31)",
    35: "DescribeLogDirs: DESCRIBE on the cluster (31)",
    36: "SaslAuthenticate: none (the listener's SASL front answers it, broker/kafka/sasl)",
    37: "CreatePartitions: ALTER on each topic (29)",
    42: "DeleteGroups: DELETE on each group (30)",
    43: "ElectLeaders: ALTER on the cluster (31)",
    44: "IncrementalAlterConfigs: ALTER_CONFIGS on the topic (29), group (30) or cluster (31)",
    45: "AlterPartitionReassignments: ALTER on the cluster (31)",
    46: "ListPartitionReassignments: DESCRIBE on the cluster (31)",
    47: "OffsetDelete: DELETE on the group (30 for the request), READ on each topic (29 per "
        "partition)",
    48: "DescribeClientQuotas: DESCRIBE_CONFIGS on the cluster (31)",
    49: "AlterClientQuotas: ALTER_CONFIGS on the cluster (31)",
    50: "DescribeUserScramCredentials: DESCRIBE on the cluster (31)",
    51: "AlterUserScramCredentials: ALTER on the cluster (31)",
    60: "DescribeCluster: none (its operations bitfield needs DESCRIBE on the cluster)",
    61: "DescribeProducers: READ on each topic (29 per partition)",
    65: "DescribeTransactions: DESCRIBE on each transactional id (53 for that id); the "
        "partitions shown only of topics the caller may DESCRIBE",
    66: "ListTransactions: the transactional ids the caller may DESCRIBE (the others left "
        "out)",
    68: "ConsumerGroupHeartbeat: READ on the group (30), DESCRIBE on each subscribed topic "
        "(29 for the request)",
    69: "ConsumerGroupDescribe: DESCRIBE on each group (30), DESCRIBE on its members' topics "
        "(29 for that group)",
}


@functools.lru_cache(maxsize=4096)  # per connection: parsing costs more than the decision
def client_host(peer: str) -> str:
    """A Kafka connection's address (`host:port`) as ACL hosts name it."""
    host = peer.rsplit(":", 1)[0] if ":" in peer else peer
    return java_host(host.strip("[]"))


class RequestAuthorization:
    """The decisions for one request's principal and address; with no authorizer everything
    is allowed, as Kafka without `authorizer.class.name`."""

    def __init__(self, authorizer: RequestAuthorizer | None, context: Request) -> None:
        self.principal = context.principal
        self.host = client_host(context.peer)
        self.authorizer: StandardAuthorizer | None = (
            None if authorizer is None else as_standard(authorizer, self.principal))

    @property
    def enabled(self) -> bool:
        return self.authorizer is not None

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str, *,
               log_if_denied: bool = True) -> bool:
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize(
            self.principal, self.host, operation, resource_type, name,
            log_if_denied=log_if_denied)

    def topic(self, operation: AclOperation, name: str, *, log_if_denied: bool = True) -> bool:
        return self.allows(operation, ResourceType.TOPIC, name, log_if_denied=log_if_denied)

    def group(self, operation: AclOperation, group_id: str, *,
              log_if_denied: bool = True) -> bool:
        return self.allows(operation, ResourceType.GROUP, group_id,
                           log_if_denied=log_if_denied)

    def cluster(self, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
        return self.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME,
                           log_if_denied=log_if_denied)

    def any_topic_write(self) -> bool:
        """KIP-679: WRITE on some topic (Kafka's authorizeByResourceType)."""
        authorizer = self.authorizer
        return authorizer is None or authorizer.authorize_any(
            self.principal, self.host, AclOperation.WRITE, ResourceType.TOPIC)

    def operations(self, resource_type: ResourceType, name: str) -> int:
        """The authorized-operations bitfield (all the type's operations without an
        authorizer, as Kafka)."""
        authorizer = self.authorizer
        if authorizer is None:
            bits = 0
            for operation in SUPPORTED_OPERATIONS.get(resource_type, ()):
                bits |= 1 << operation
            return bits
        return authorizer.authorized_operations(self.principal, self.host, resource_type, name)

    def admin(self, admin: AdminBackend, image: MetadataImage) -> AdminBackend:
        """The admin operations as this caller may call them."""
        authorizer = self.authorizer
        if authorizer is None:
            return admin
        return AuthorizedAdmin(admin, AdminCaller(authorizer, self.principal, self.host),
                               image)


ALLOW_ALL = RequestAuthorization(None, Request())  # no authorizer: every handler's default


class AuthorizedAdmin:
    """The admin operations as one client may call them (admin_checks' rules)."""

    def __init__(self, admin: AdminBackend, caller: AdminCaller, image: MetadataImage) -> None:
        self._admin = admin
        self._caller = caller
        self._image = image

    async def call(self, method: str, request: Any, *, from_peer: bool = False) -> Any:
        admin = self._admin
        return await authorized_admin_call(
            self._caller, method, request, self._image,
            lambda kept: admin.call(method, kept, from_peer=from_peer))
