"""The group coordinator's settings (Kafka's broker keys and defaults)."""

from __future__ import annotations

from dataclasses import dataclass

INT_MAX = 2**31 - 1


@dataclass(frozen=True, slots=True)
class GroupConfig:
    offsets_topic_num_partitions: int = 50
    offsets_topic_replication_factor: int = 3
    offsets_topic_segment_bytes: int = 104857600
    offsets_commit_timeout_ms: int = 5000
    offsets_retention_minutes: int = 10080  # 7 days
    offsets_retention_check_interval_ms: int = 600000
    offset_metadata_max_bytes: int = 4096
    initial_rebalance_delay_ms: int = 3000
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    max_size: int = INT_MAX
    new_member_join_timeout_ms: int = 300000  # Kafka's GroupCoordinator.NewMemberJoinTimeoutMs
    # KIP-848's consumer groups (Kafka 4.0's group.consumer.* broker keys)
    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    consumer_assignors: tuple[str, ...] = ("uniform", "range")  # the first is the default
    consumer_max_size: int = INT_MAX
