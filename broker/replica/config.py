"""The data plane's broker settings and the name of a partition, below every module of
broker.replica (the fetchers take them as the manager does, without importing it)."""

from __future__ import annotations

from dataclasses import dataclass

TopicPartition = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ReplicaConfig:
    """The broker settings the data plane uses (Kafka's names and defaults)."""

    replica_lag_time_max_ms: int = 30000
    fetch_max_bytes: int = 57671680
    replica_fetch_max_bytes: int = 1048576
    replica_fetch_response_max_bytes: int = 10485760
    replica_fetch_wait_max_ms: int = 500
    replica_fetch_backoff_ms: int = 100
    inter_broker_listener: str = "PLAINTEXT"
