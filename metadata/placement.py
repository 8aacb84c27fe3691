"""Replica placement: the seed rule, deterministic and rack-aware.

Over the live brokers (unfenced, not in controlled shutdown) sorted by id, partition i's j-th
replica goes to broker (i + j + start) mod n, so the first replicas (the preferred leaders)
stripe across the brokers. When brokers have racks, the list is first put in rack-alternating
order (one broker of each rack in turn), so consecutive replicas land on different racks.

Kafka counts fenced brokers (not in controlled shutdown) as registered when it checks the
replication factor, and may place replicas on them. We do too, but only for the replicas that
the live brokers cannot take: those come from the fenced brokers by the same rule, after the
live ones, so the first replica — the leader — is always live and the ISR is the live replicas.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kraft.errors import Errors
from metadata.errors import ControllerApiError
from metadata.image import BrokerRegistration


def rack_alternated(brokers: Iterable[BrokerRegistration]) -> list[int]:
    """Broker ids in rack-alternating order: racks by name, brokers by id within a rack, one
    from each rack in turn (Kafka's ZooKeeper-era getRackAlternatedBrokerList). Brokers
    without a rack form one more rack, listed first. Without racks: sorted ids."""
    by_rack: dict[str, list[int]] = {}
    for broker in brokers:
        by_rack.setdefault(broker.rack or "", []).append(broker.id)
    if len(by_rack) <= 1:
        return sorted(b for ids in by_rack.values() for b in ids)
    racks = [sorted(by_rack[rack]) for rack in sorted(by_rack)]
    ordered: list[int] = []
    for position in range(max(len(ids) for ids in racks)):
        ordered.extend(ids[position] for ids in racks if position < len(ids))
    return ordered


def place_replicas(
    brokers: Iterable[BrokerRegistration],
    partitions: int,
    replication_factor: int,
    start: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists for `partitions` partitions, the i-th striped from position i + start.
    Raises ControllerApiError(INVALID_REPLICATION_FACTOR) with Kafka's placer messages."""
    usable = [b for b in brokers if not b.in_controlled_shutdown]
    if replication_factor <= 0:
        raise _invalid(f"Invalid replication factor {replication_factor}: the replication "
                       "factor must be positive.")
    live = rack_alternated(b for b in usable if not b.fenced)
    if not live:
        raise _invalid("All brokers are currently fenced.")
    if replication_factor > len(usable):
        raise _invalid(f"The target replication factor of {replication_factor} cannot be "
                       f"reached because only {len(usable)} broker(s) are registered.")
    fenced = rack_alternated(b for b in usable if b.fenced)
    from_live = min(replication_factor, len(live))
    return [
        _striped(live, i + start, from_live)
        + _striped(fenced, i + start, replication_factor - from_live)
        for i in range(partitions)
    ]


def _striped(order: Sequence[int], position: int, count: int) -> tuple[int, ...]:
    n = len(order)
    return tuple(order[(position + j) % n] for j in range(count))


def _invalid(message: str) -> ControllerApiError:
    return ControllerApiError(Errors.INVALID_REPLICATION_FACTOR, message)
