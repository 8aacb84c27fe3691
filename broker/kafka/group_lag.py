"""Consumer-group lag on the coordinator's metrics port (`kraft_broker_group_*`), what Burrow or
kafka-lag-exporter would otherwise poll from outside: for every group this broker coordinates,
per committed partition `log end offset (high watermark) - committed offset`, the per-topic
sum, the group's state and member count.

The log end of a partition this broker holds is its replica's high watermark (exact on the
leader, at most a fetch behind on a follower); of one it does not hold, the leader's answer to a
ListOffsets (latest, as a consumer asks) refreshed every REFRESH_S in the background, only
while someone scrapes. Until a partition's end is known it has no lag series.

Cardinality is bounded: at most MAX_PARTITION_SERIES per-partition series per broker (groups in
name order, then topics and partitions); past that only the per-(group, topic) sum is exported
and `kraft_broker_group_lag_series_dropped` says how many were left out. A group's series go
with the group (deleted, expired, or moved to another coordinator)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator

from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from broker.api import ListOffsetsPartition
from broker.group.coordinator import GroupCoordinator
from broker.group.model import Group
from broker.replica.fetcher import LeaderClient
from broker.replica.manager import ReplicaManager, TopicPartition

log = logging.getLogger(__name__)

MAX_PARTITION_SERIES = 10_000
REFRESH_S = 10.0
IDLE_AFTER_S = 60.0  # no scrape for this long: the remote refresh pauses
LATEST = -1
Connect = Callable[[str, int], Awaitable[LeaderClient]]


class GroupLag(Collector):
    def __init__(self, coordinator: GroupCoordinator, replicas: ReplicaManager,
                 connect: Connect, inter_broker_listener: str,
                 registry: CollectorRegistry | None = None) -> None:
        self.coordinator = coordinator
        self.replicas = replicas
        self.connect = connect
        self.listener = inter_broker_listener
        self.remote_ends: dict[TopicPartition, int] = {}
        self._last_scrape = -IDLE_AFTER_S
        self._task: asyncio.Task[None] | None = None
        if registry is not None:
            registry.register(self)

    # ---- the remote ends --------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(REFRESH_S)
            if time.monotonic() - self._last_scrape > IDLE_AFTER_S:
                continue
            try:
                await self.refresh()
            except Exception:  # a bug must not end the refresh for good
                log.exception("refreshing the log ends of consumed partitions failed")

    def _committed(self) -> set[TopicPartition]:
        return {tp for group in list(self.coordinator.groups.values()) for tp in group.offsets}

    async def refresh(self) -> None:
        """Ask each leader for the log ends of the committed partitions this broker holds no
        replica of (one request per leader, concurrently)."""
        image = self.replicas.image
        wanted = self._committed() - set(self.replicas.partitions)
        by_leader: dict[int, list[TopicPartition]] = {}
        for topic, partition in wanted:
            topic_image = image.topic(topic)
            registration = topic_image.partition(partition) if topic_image else None
            if registration is not None and registration.leader >= 0:
                by_leader.setdefault(registration.leader, []).append((topic, partition))
        answers = await asyncio.gather(*(self._ask(leader, tps)
                                         for leader, tps in by_leader.items()))
        fresh: dict[TopicPartition, int] = {}
        for answer in answers:
            fresh.update(answer)
        self.remote_ends = fresh

    async def _ask(self, leader: int, tps: list[TopicPartition]) -> dict[TopicPartition, int]:
        broker = self.replicas.image.cluster.broker(leader)
        endpoint = next((e for e in broker.endpoints if e.name == self.listener), None) \
            if broker is not None else None
        if endpoint is None:
            return {}
        try:
            client = await self.connect(endpoint.host, endpoint.port)
        except ConnectionError:
            return {tp: end for tp, end in self.remote_ends.items() if tp in tps}
        try:
            results = await client.list_offsets(
                -1, [ListOffsetsPartition(t, p, LATEST) for t, p in tps])
        except ConnectionError:
            return {tp: end for tp, end in self.remote_ends.items() if tp in tps}
        finally:
            with contextlib.suppress(Exception):
                await client.close()
        return {tp: r.offset for tp, r in zip(tps, results, strict=True) if r.error == 0}

    # ---- the scrape --------------------------------------------------------------------------

    def end_offset(self, tp: TopicPartition) -> int | None:
        replica = self.replicas.partitions.get(tp)
        if replica is not None:
            return int(replica.high_watermark)
        return self.remote_ends.get(tp)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self._last_scrape = time.monotonic()
        lag = GaugeMetricFamily(
            "kraft_broker_group_lag", "Log end offset (high watermark) minus the committed "
            "offset, per group and partition this broker coordinates",
            labels=["group", "topic", "partition"])
        topic_lag = GaugeMetricFamily(
            "kraft_broker_group_topic_lag", "The group's lag summed over a topic's partitions",
            labels=["group", "topic"])
        state = GaugeMetricFamily(
            "kraft_broker_group_state", "1 for the group's current state (classic: Empty, "
            "PreparingRebalance, CompletingRebalance, Stable, Dead; consumer protocol: Empty, "
            "Assigning, Reconciling, Stable)", labels=["group", "state"])
        members = GaugeMetricFamily("kraft_broker_group_members", "Members of the group",
                                    labels=["group"])
        series = dropped = 0
        for group_id, group in sorted(list(self.coordinator.groups.items())):
            state.add_metric([group_id, group_state(group)], 1)
            members.add_metric([group_id], member_count(group))
            sums: dict[str, int] = {}
            for (topic, partition), value in sorted(group.offsets.items()):
                end = self.end_offset((topic, partition))
                if end is None:
                    continue
                behind = max(0, end - value.offset)
                sums[topic] = sums.get(topic, 0) + behind
                if series < MAX_PARTITION_SERIES:
                    lag.add_metric([group_id, topic, str(partition)], behind)
                    series += 1
                else:
                    dropped += 1
            for topic, total in sums.items():
                topic_lag.add_metric([group_id, topic], total)
        yield lag
        yield topic_lag
        yield state
        yield members
        yield GaugeMetricFamily(
            "kraft_broker_group_lag_series_dropped",
            f"Per-partition lag series left out past {MAX_PARTITION_SERIES} (their topic sums "
            "are still exported)", value=dropped)


def group_state(group: Group) -> str:
    """The state ListGroups gives: a KIP-848 group's own (Assigning, Reconciling...), not the
    Empty/Stable the classic code is shown of it."""
    return group.consumer.state_name() if group.consumer is not None else group.state.value


def member_count(group: Group) -> int:
    """A KIP-848 group's members are in its consumer state; `members` holds classic ones."""
    return len(group.consumer.members) if group.consumer is not None else len(group.members)
