"""The transaction coordinator's settings (Kafka's broker keys and defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class TxnConfig:
    state_log_num_partitions: int = 50
    state_log_replication_factor: int = 3
    state_log_min_isr: int = 2
    state_log_segment_bytes: int = 104857600
    max_timeout_ms: int = 900000  # 15 minutes
    id_expiration_ms: int = 604800000  # 7 days
    abort_timed_out_interval_ms: int = 10000
    remove_expired_interval_ms: int = 3600000
    write_timeout_ms: int = 5000  # the acks=all append's wait (Kafka's request.timeout.ms)
    marker_retry_backoff_ms: int = 100  # the first retry of a leader's markers; doubles to 5 s
    # A request held while the id's previous transaction completes is answered
    # CONCURRENT_TRANSACTIONS after this (well under clients' 30-60 s request timeouts), and
    # at most this many are held at a time (coordinator.py).
    held_request_max_ms: int = 2000
    max_held_requests: int = 1000
