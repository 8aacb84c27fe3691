"""Kafka's metadata record api keys, apart from the records so that record modules of their own
(metadata/security_records.py) and metadata/records.py can share them without a cycle."""

from __future__ import annotations

from enum import IntEnum


class MetadataRecordType(IntEnum):
    """Kafka's api keys; the names are Kafka's display names (MetadataRecordType)."""

    REGISTER_BROKER_RECORD = 0
    UNREGISTER_BROKER_RECORD = 1
    TOPIC_RECORD = 2
    PARTITION_RECORD = 3
    CONFIG_RECORD = 4
    PARTITION_CHANGE_RECORD = 5
    REMOVE_TOPIC_RECORD = 9
    USER_SCRAM_CREDENTIAL_RECORD = 11
    FEATURE_LEVEL_RECORD = 12
    CLIENT_QUOTA_RECORD = 14
    PRODUCER_IDS_RECORD = 15
    BROKER_REGISTRATION_CHANGE_RECORD = 17
    ACCESS_CONTROL_ENTRY_RECORD = 18
    REMOVE_ACCESS_CONTROL_ENTRY_RECORD = 19
    NO_OP_RECORD = 20
    REMOVE_USER_SCRAM_CREDENTIAL_RECORD = 22
