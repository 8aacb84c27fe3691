"""The core's configuration: who the voters are and the timers (Kafka's QuorumConfig)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

MAX_FETCH_WAIT_MS = 500  # KafkaRaftClient.MAX_FETCH_WAIT_MS, not configurable in Kafka
MAX_FETCH_BYTES = 8 * 1024 * 1024  # Fetch and FetchSnapshot MaxBytes; also the largest batch
OBSERVER_SESSION_TIMEOUT_MS = 300_000
CHECK_QUORUM_TIMEOUT_FACTOR = 1.5
ELECTION_BACKOFF_BASE_MS = 100


@dataclass(frozen=True)
class RaftConfig:
    """`node_id` is None for an observer that has no id. `voters` is the static voter set of
    `controller.quorum.voters` (id to endpoint), in effect until the log or a snapshot holds
    a voter set (KIP-853); empty when the set comes from the bootstrap snapshot. `bootstrap`
    lists (id, endpoint) pairs a replica may ask to discover the leader (ids of nodes not
    known as voters are negative, Kafka's -2, -3, ...); empty means the voters.
    `directory_id` with `node_id` is this replica's key: a re-formatted disk is a new replica.
    `controller` nodes may become voters, so even as observers they flush before they fetch."""

    cluster_id: str
    node_id: int | None
    voters: Mapping[int, str]
    local_endpoint: str = ""
    bootstrap: tuple[tuple[int, str], ...] = ()
    directory_id: str = ""
    controller: bool = False
    listener: str = "CONTROLLER"
    election_timeout_ms: int = 1000
    fetch_timeout_ms: int = 2000
    election_backoff_max_ms: int = 1000
    request_timeout_ms: int = 2000
    retry_backoff_ms: int = 20
    fetch_max_wait_ms: int = MAX_FETCH_WAIT_MS
    fetch_max_bytes: int = MAX_FETCH_BYTES
    # When a follower's connection to its leader is refused or reset (not merely slow), it
    # starts a pre-vote after a random delay below this bound instead of waiting out the fetch
    # timeout; the jitter keeps two followers from splitting the vote. Pre-vote keeps it safe.
    fast_failover_jitter_ms: int = 50
    # A leader answers every Fetch within its max wait (a long poll); a voter whose Fetch to
    # its leader is still unanswered this long after that has evidence of a hung leader (a
    # stopped process, a frozen host) and acts as on a refused connection. Pauses shorter than
    # this margin (GC, a busy event loop) depose nobody; pre-vote keeps acting on it safe.
    hung_leader_margin_ms: int = 400
    _frozen_voters: Mapping[int, str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_frozen_voters", MappingProxyType(dict(self.voters)))
        object.__setattr__(self, "voters", self._frozen_voters)
        if not self.voters and not self.bootstrap:
            raise ValueError("neither static voters nor bootstrap servers are configured")
        for name in (
            "election_timeout_ms",
            "fetch_timeout_ms",
            "election_backoff_max_ms",
            "request_timeout_ms",
        ):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0")
        if self.retry_backoff_ms < 0 or self.fetch_max_wait_ms < 0:
            raise ValueError("retry_backoff_ms and fetch_max_wait_ms must be >= 0")
        if self.fast_failover_jitter_ms < 0:
            raise ValueError("fast_failover_jitter_ms must be >= 0")
        if self.hung_leader_margin_ms < 0:
            raise ValueError("hung_leader_margin_ms must be >= 0")
        if self.node_id is not None and self.node_id in self.voters:
            object.__setattr__(self, "controller", True)
