"""The API versions this front serves: what ApiVersions advertises and what decodes.

The ranges are the reference's (kafka-data-plane.md §7.1), each one a range every tested
client accepts and kio has schemas for: kafka-python infers the broker's release from the
maxima, so they stay modern; kcat needs the non-flexible low versions, so they stay too.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    API_VERSIONS = 18
    # SASL (broker/kafka/sasl): answered by the listener's front, never by the APIs.
    SASL_HANDSHAKE = 17
    SASL_AUTHENTICATE = 36
    INIT_PRODUCER_ID = 22
    OFFSET_FOR_LEADER_EPOCH = 23
    # The transaction coordinator's APIs (broker/kafka/txn_api.py).
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    WRITE_TXN_MARKERS = 27  # broker to broker (broker/kafka/txn_markers_api.py)
    TXN_OFFSET_COMMIT = 28  # to the group coordinator (broker/kafka/txn_offset_commit_api.py)
    # The group coordinator's APIs (broker/kafka/group_*_api.py, coordinator_api.py).
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    CONSUMER_GROUP_HEARTBEAT = 68  # KIP-848 (broker/kafka/consumer_group_api.py)
    CONSUMER_GROUP_DESCRIBE = 69
    # Admin APIs (broker/kafka/admin_*.py).
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    DESCRIBE_ACLS = 29
    CREATE_ACLS = 30
    DELETE_ACLS = 31
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    DESCRIBE_LOG_DIRS = 35
    CREATE_PARTITIONS = 37
    ELECT_LEADERS = 43
    INCREMENTAL_ALTER_CONFIGS = 44
    ALTER_PARTITION_REASSIGNMENTS = 45
    LIST_PARTITION_REASSIGNMENTS = 46
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_USER_SCRAM_CREDENTIALS = 50
    ALTER_USER_SCRAM_CREDENTIALS = 51
    DESCRIBE_CLUSTER = 60
    # The hanging-transaction APIs (broker/kafka/txn_admin_api.py).
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


SUPPORTED: Mapping[int, tuple[int, int]] = MappingProxyType({
    ApiKey.PRODUCE: (3, 10),
    ApiKey.FETCH: (4, 16),
    # ListOffsets from v0, as Kafka 3.9 (KIP-896 cut it in 4.0): lag monitors (Burrow through
    # sarama) still send it. Its schema is broker/kafka/legacy's, kio has none.
    ApiKey.LIST_OFFSETS: (0, 7),
    ApiKey.METADATA: (0, 12),
    ApiKey.API_VERSIONS: (0, 4),
    # Kafka 4.0's ranges; librdkafka uses SaslHandshake v1 + SaslAuthenticate v1, kafka-python
    # 3.0 SaslAuthenticate v2.
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.INIT_PRODUCER_ID: (0, 4),
    ApiKey.OFFSET_FOR_LEADER_EPOCH: (2, 4),
    # Transactions, the client path (v4+ of AddPartitionsToTxn is broker-to-broker; EndTxn v4
    # adds TRANSACTION_ABORTABLE and v5 transaction version 2, which no tested client speaks).
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    # The coordinator's markers (Kafka 4.0's range: KIP-896 removed v0).
    ApiKey.WRITE_TXN_MARKERS: (1, 1),
    # v0-3 (v4-5 are transaction version 2's, KIP-890); librdkafka 2.x picks v3.
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    # Group APIs: Kafka 3.9's ranges, down to v0 (OffsetCommit v0-1 and OffsetFetch v0 with
    # broker/kafka/legacy's schemas; docs/consumer-groups.md#old-clients-and-lag-monitors);
    # FindCoordinator stops at v4 (v5-6 add transactions' and share groups' errors).
    ApiKey.OFFSET_COMMIT: (0, 9),
    ApiKey.OFFSET_FETCH: (0, 9),
    ApiKey.FIND_COORDINATOR: (0, 4),
    ApiKey.JOIN_GROUP: (0, 9),
    ApiKey.HEARTBEAT: (0, 4),
    ApiKey.LEAVE_GROUP: (0, 5),
    ApiKey.SYNC_GROUP: (0, 5),
    ApiKey.DESCRIBE_GROUPS: (0, 5),
    ApiKey.LIST_GROUPS: (0, 5),
    ApiKey.DELETE_GROUPS: (0, 2),
    ApiKey.OFFSET_DELETE: (0, 0),  # Kafka 3.9's and 4.0's range (KIP-496)
    # KIP-848, Kafka 4.0's ranges: librdkafka's group.protocol=consumer needs heartbeat v1.
    ApiKey.CONSUMER_GROUP_HEARTBEAT: (0, 1),
    ApiKey.CONSUMER_GROUP_DESCRIBE: (0, 1),
    # Admin APIs: Kafka 3.9's ranges from the oldest version kio has a schema for (KIP-896's
    # 4.0 floor or above); every version the tested clients pick is in them.
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.DELETE_RECORDS: (0, 2),
    # Kafka 4.0's ACL ranges (v0 removed); librdkafka 2.x picks v2, kafka-python 3.0 v3.
    ApiKey.DESCRIBE_ACLS: (1, 3),
    ApiKey.CREATE_ACLS: (1, 3),
    ApiKey.DELETE_ACLS: (1, 3),
    ApiKey.DESCRIBE_CONFIGS: (1, 4),
    ApiKey.ALTER_CONFIGS: (0, 2),
    ApiKey.DESCRIBE_LOG_DIRS: (1, 4),
    ApiKey.CREATE_PARTITIONS: (0, 3),
    ApiKey.ELECT_LEADERS: (0, 2),
    ApiKey.INCREMENTAL_ALTER_CONFIGS: (0, 1),
    ApiKey.ALTER_PARTITION_REASSIGNMENTS: (0, 0),
    ApiKey.LIST_PARTITION_REASSIGNMENTS: (0, 0),
    # Kafka 4.0's ranges, all kio has; librdkafka 2.x and kafka-python 3.0 pick v0 of the
    # SCRAM credential APIs, kafka-python v1 of the client quota APIs.
    ApiKey.DESCRIBE_CLIENT_QUOTAS: (0, 1),
    ApiKey.ALTER_CLIENT_QUOTAS: (0, 1),
    ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.ALTER_USER_SCRAM_CREDENTIALS: (0, 0),
    ApiKey.DESCRIBE_CLUSTER: (0, 1),
    # Kafka 3.9's ranges (ListTransactions v1 adds the duration filter, KIP-994; v2's id
    # pattern is Kafka 4.1's).
    ApiKey.DESCRIBE_PRODUCERS: (0, 0),
    ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
})


def is_supported(api_key: int, api_version: int) -> bool:
    versions = SUPPORTED.get(api_key)
    return versions is not None and versions[0] <= api_version <= versions[1]
