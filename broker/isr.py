"""ISR expansion by partition leaders: the AlterPartition half of the failover story.

In Kafka a partition's leader adds a follower back to the ISR once the follower has caught up
with the leader's log. Brokers here replicate the metadata log, not partition data, so
"caught up" is modelled as "alive": a replica that is registered, unfenced and not in a
controlled shutdown is in sync. The leader broker asks the active controller, with
AlterPartition (Kafka's checks apply there), to add such replicas to the ISR of every
partition it leads. Without this an ISR shrunk by a fenced broker would never grow back.

It runs on every image the broker publishes, but only scans when the set of active brokers
changed or an earlier request is still to be repeated, and keeps one request in flight.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from kraft.client import LeaderAndEpoch
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.loader import LoaderManifest
from metadata.rpc import broker_pb2 as pb

log = logging.getLogger(__name__)

AlterPartition = Callable[[pb.AlterPartitionRequest], Awaitable[pb.AlterPartitionResponse]]


def expansions(image: MetadataImage, broker_id: int) -> list[tuple[str, int, tuple[int, ...]]]:
    """(topic id, partition, new ISR) for each partition `broker_id` leads whose ISR misses
    an active replica; the new ISR keeps the replicas' order."""
    cluster = image.cluster
    out = []
    for topic_id, partition_id in image.partitions_led_by(broker_id):
        partition = image.partition(topic_id, partition_id)
        if partition is None or partition.is_recovering:
            continue
        missing = [r for r in partition.replicas
                   if r not in partition.isr and cluster.is_active(r)]
        if missing:
            wanted = set(partition.isr) | set(missing)
            out.append((topic_id, partition_id,
                        tuple(r for r in partition.replicas if r in wanted)))
    return out


class IsrExpander:
    def __init__(
        self, broker_id: int, alter_partition: AlterPartition,
        broker_epoch: Callable[[], int], may_act: Callable[[], bool],
    ) -> None:
        self.broker_id = broker_id
        self._alter_partition = alter_partition
        self._broker_epoch = broker_epoch
        self._may_act = may_act
        self._active: tuple[int, ...] | None = None
        self._retry = False
        self._task: asyncio.Task[None] | None = None
        self._latest: MetadataImage | None = None
        self.requests_sent = 0

    def on_metadata_update(
        self, delta: MetadataDelta | None, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self.on_image(image)

    def on_leader_change(self, leader: LeaderAndEpoch, epoch_start_offset: int) -> None:
        pass

    def on_image(self, image: MetadataImage) -> None:
        self._latest = image
        active = tuple(image.cluster.active_broker_ids())
        if active == self._active and not self._retry:
            return
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._expand())

    async def _expand(self) -> None:
        image = self._latest
        if image is None or not self._may_act() or self._broker_epoch() < 0:
            self._retry = True
            return
        self._active = tuple(image.cluster.active_broker_ids())
        self._retry = False
        work = expansions(image, self.broker_id)
        if not work:
            return
        by_topic: dict[str, list[pb.AlterPartitionRequest.PartitionData]] = {}
        for topic_id, partition_id, isr in work:
            partition = image.partition(topic_id, partition_id)
            assert partition is not None
            brokers = image.cluster.brokers
            by_topic.setdefault(topic_id, []).append(pb.AlterPartitionRequest.PartitionData(
                partition_index=partition_id, leader_epoch=partition.leader_epoch,
                partition_epoch=partition.partition_epoch,
                leader_recovery_state=partition.leader_recovery_state,
                new_isr=[pb.BrokerEpoch(broker_id=b, broker_epoch=brokers[b].epoch)
                         for b in isr],
            ))
        request = pb.AlterPartitionRequest(
            broker_id=self.broker_id, broker_epoch=self._broker_epoch(),
            topics=[pb.AlterPartitionRequest.TopicData(topic_id=t, partitions=parts)
                    for t, parts in by_topic.items()])
        self.requests_sent += 1
        try:
            reply = await self._alter_partition(request)
        except Exception as exc:  # the controller is away: the next image tries again
            log.warning("AlterPartition to add replicas back to ISRs failed: %s", exc)
            self._retry = True
            return
        failed = [p for p in reply.partitions if p.error_code] if reply.error_code == 0 else []
        if reply.error_code or failed:
            # A stale epoch or a moved leadership: the next image shows the new state.
            self._retry = True
            log.info("AlterPartition refused for %d partition(s): %s", len(failed) or len(work),
                     reply.error_message or (failed[0].error_message if failed else ""))
        else:
            log.info("added replicas back to the ISR of %d partition(s)", len(work))
