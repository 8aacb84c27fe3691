"""Applying the metadata to the replicas (Kafka's ReplicaManager.applyDelta): leading,
following, creating and deleting them as each image says, in turns for a large change; the
leadership listeners (the group coordinator) hear of each change. Part of ReplicaManager
(broker/replica/manager.py).
"""

from __future__ import annotations

import asyncio
import time

from broker.log.partition_log import PartitionLog
from broker.replica.config import TopicPartition
from broker.replica.manager_state import ReplicaManagerState, log
from broker.replica.partition import Partition
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage, PartitionRegistration, TopicImage
from metadata.loader import LoaderManifest

APPLY_CHUNK = 64  # partitions applied at once; more continue in a task, turn by turn
APPLY_TURN_S = 0.01  # how long one turn of that task may hold the event loop
CREATE_CHUNK = 256  # new logs per hand-off to a worker thread (in the task's large changes)


class ReplicaLeadership(ReplicaManagerState):
    """The metadata side of ReplicaManager (a MetadataLoader publisher)."""

    def on_metadata_update(
        self, delta: MetadataDelta | None, image: MetadataImage, manifest: LoaderManifest
    ) -> None:
        self._latest = image
        if self.active and not self._closed:
            self.apply_image(image)

    def activate(self) -> None:
        """The broker caught up with the metadata log: from now on every image is acted on.
        Logs left on disk for replicas the metadata no longer gives this broker (a topic
        deleted or moved while it was down) are deleted first."""
        if self.active:
            return
        self.active = True
        for (topic, partition_id), log_ in list(self.logs.logs().items()):
            image_topic = self._latest.topic(topic)
            registration = None if image_topic is None else image_topic.partition(partition_id)
            if (image_topic is None or image_topic.topic_id != log_.topic_id
                    or registration is None or self.broker_id not in registration.replicas):
                log.info("deleting the stray log of %s-%d (topic id %s): the metadata does "
                         "not assign it to this broker", topic, partition_id, log_.topic_id)
                self.logs.delete(topic, partition_id)
        self.apply_image(self._latest)

    def on_leader_change(self, leader: object, epoch_start_offset: int) -> None:
        pass

    def apply_image(self, image: MetadataImage) -> None:
        """Lead, follow, create and delete replicas as `image` says (Kafka's applyDelta).

        Only partitions whose registration changed are touched. Up to APPLY_CHUNK of them are
        applied at once; a bigger change (a topic of thousands of partitions) continues in a
        task that yields to the event loop every 10 ms, so requests keep being served —
        a partition not applied yet answers NOT_LEADER_OR_FOLLOWER, which clients retry. A
        newer image replaces the rest of the work. In that task the partitions that need a
        new log get it from a worker thread, CREATE_CHUNK logs per hand-off (a directory and
        two files each: 3,000 took 14 s of a loaded broker's loop, issue 28), and become
        leaders or followers, as the image applied by then says, once it exists."""
        previous = self.image
        self.image = image
        self._log_configs = {}
        now = self.now_ms()
        by_id = image.topics.by_id
        if previous.configs is not image.configs:
            for partition in self.partitions.values():
                partition.log.update_config(self._log_config(partition.topic))
        if previous.topics is not image.topics:
            for topic_id in [t for t in self._seen_topics if by_id.get(t) is None]:
                del self._seen_topics[topic_id]
            for tp, partition in list(self.partitions.items()):
                current = image.topic(tp[0])
                if current is None or current.topic_id != partition.log.topic_id:
                    self._stop_replica(tp, delete=True)  # its topic was deleted
        work: list[tuple[TopicImage, int, PartitionRegistration]] = []
        done_topics: list[tuple[str, TopicImage]] = []
        for topic_id, topic in by_id.items():
            if self._seen_topics.get(topic_id) is topic:
                continue
            done_topics.append((topic_id, topic))
            for partition_id, registration in topic.partitions.items():
                # Re-applying a sibling's unchanged registration would drop its in-flight
                # AlterPartition (Kafka runs makeLeader for the delta's partitions only).
                if self._applied.get((topic.name, partition_id)) is registration:
                    continue
                if (self.broker_id not in registration.replicas
                        and (topic.name, partition_id) not in self.partitions):
                    continue  # neither held nor assigned here: nothing to do
                work.append((topic, partition_id, registration))
        if previous.cluster is not image.cluster:
            # A leader's endpoint may have changed, and eligibility for the ISR with it.
            self.fetchers.refresh(image)
            for partition in self.partitions.values():
                if partition.is_leader:
                    self._after_leader_progress(partition, now)
        if self._apply_task is not None and not self._apply_task.done():
            self._apply_task.cancel()  # its image is out of date; this work covers the rest
        self._apply_task = None
        if len(work) <= APPLY_CHUNK:
            self._apply_work(work, now)
            self._seen_topics.update(done_topics)
        else:
            log.info("applying %d changed partition(s) in turns of %d ms", len(work),
                     APPLY_TURN_S * 1000)
            self._apply_task = asyncio.ensure_future(self._apply_in_chunks(work, done_topics))

    async def _apply_in_chunks(self, work: list[tuple[TopicImage, int, PartitionRegistration]],
                               done_topics: list[tuple[str, TopicImage]]) -> None:
        index = 0
        self.fetchers.hold()
        creating = None
        try:
            new_logs = [item for item in work if self._needs_new_log(*item)]
            if new_logs:
                creating = asyncio.ensure_future(self._create_logs(new_logs))
                self._create_tasks.add(creating)
                creating.add_done_callback(self._create_tasks.discard)
                new = {(topic.name, partition_id) for topic, partition_id, _ in new_logs}
                work = [item for item in work if (item[0].name, item[1]) not in new]
            while index < len(work):
                turn_ends = time.perf_counter() + APPLY_TURN_S
                now = self.now_ms()
                while index < len(work) and time.perf_counter() < turn_ends:
                    self._apply_work(work[index:index + 1], now)
                    index += 1
                await asyncio.sleep(0)  # serve requests between turns
            if creating is not None:
                await asyncio.shield(creating)  # a newer image's task takes over from here
        except Exception:
            # What was not applied is not marked applied: the next image tries it again.
            log.exception("applying the metadata to replica %s-%d failed", work[index][0].name,
                          work[index][1])
            return
        finally:
            self.fetchers.release()
        self._seen_topics.update(done_topics)

    def _needs_new_log(self, topic: TopicImage, partition_id: int,
                       registration: PartitionRegistration) -> bool:
        tp = (topic.name, partition_id)
        if (tp in self.partitions or self.broker_id not in registration.replicas
                or self.logs.creator.creating(tp)):
            return False
        existing = self.logs.get(*tp)
        return existing is None or existing.topic_id != topic.topic_id

    async def _create_logs(self, work: list[tuple[TopicImage, int, PartitionRegistration]]
                           ) -> None:
        """Create the logs of `work` off the loop, CREATE_CHUNK per hop (the next hop under
        way while this one's partitions are applied), and apply each partition once its log
        exists, as the latest image says (it may have moved or deleted it meanwhile)."""
        self.fetchers.hold()
        try:
            chunks = [work[i:i + CREATE_CHUNK] for i in range(0, len(work), CREATE_CHUNK)]
            ahead = asyncio.ensure_future(self._create_chunk(chunks[0]))
            for number, chunk in enumerate(chunks):
                created = await ahead
                if number + 1 < len(chunks):
                    ahead = asyncio.ensure_future(self._create_chunk(chunks[number + 1]))
                turn_ends = time.perf_counter() + APPLY_TURN_S
                for topic, partition_id, _ in chunk:
                    if self._closed:
                        return
                    self._created(topic, partition_id, created.get((topic.name, partition_id)))
                    if time.perf_counter() >= turn_ends:
                        await asyncio.sleep(0)
                        turn_ends = time.perf_counter() + APPLY_TURN_S
        except Exception:  # not marked applied: the next image tries them again
            log.exception("creating the logs of %d new replica(s) failed", len(work))
        finally:
            self.fetchers.release()

    async def _create_chunk(self, chunk: list[tuple[TopicImage, int, PartitionRegistration]]
                            ) -> dict[TopicPartition, object]:
        specs = []
        for topic, partition_id, _ in chunk:
            tp = (topic.name, partition_id)
            if tp in self.partitions or self.logs.creator.creating(tp):
                continue  # a newer image's work got there first
            stale = self.logs.get(*tp)
            if stale is not None and stale.topic_id != topic.topic_id:
                # The name now belongs to a new topic: the old data must never be served.
                self.logs.delete(*tp)
            specs.append((topic.name, partition_id, topic.topic_id, self._log_config(topic.name)))
        return dict(await self.logs.creator.create(specs))

    def _created(self, topic: TopicImage, partition_id: int, outcome: object) -> None:
        """The log of a partition created off the loop is back: it leads or follows as the
        latest image says; a failed one stays offline (KAFKA_STORAGE_ERROR, log_creator.py)."""
        tp = (topic.name, partition_id)
        if outcome is None or tp in self.partitions:
            return  # another image's work created or applied it
        if not isinstance(outcome, PartitionLog):
            log.error("cannot create the log of %s-%d: %s", topic.name, partition_id, outcome)
            return
        current = self.image.topic(topic.name)
        registration = None if current is None else current.partition(partition_id)
        if (current is None or current.topic_id != outcome.topic_id or registration is None
                or self.broker_id not in registration.replicas):
            self.logs.delete(*tp)  # a newer image took it away meanwhile
            return
        self._apply_partition(current, partition_id, registration, self.now_ms())
        self._applied[tp] = registration

    def _apply_work(self, work: list[tuple[TopicImage, int, PartitionRegistration]],
                    now: int) -> None:
        for topic, partition_id, registration in work:
            self._apply_partition(topic, partition_id, registration, now)
            self._applied[(topic.name, partition_id)] = registration

    def _apply_partition(self, topic: TopicImage, partition_id: int,
                         registration: PartitionRegistration, now: int) -> None:
        tp = (topic.name, partition_id)
        partition = self.partitions.get(tp)
        if self.broker_id not in registration.replicas:
            if partition is not None:
                self._stop_replica(tp, delete=True)
            return
        if partition is None:
            if self.logs.creator.creating(tp):
                return  # applied, as the image then says, once the log exists (_created)
            stale = self.logs.get(topic.name, partition_id)
            if stale is not None and stale.topic_id != topic.topic_id:
                # The name now belongs to a new topic: the old data must never be served.
                self.logs.delete(topic.name, partition_id)
            try:
                log_ = self.logs.get_or_create(topic.name, partition_id, topic.topic_id,
                                               self._log_config(topic.name))
            except OSError as exc:
                # Its log dir failed (get_or_create took it offline, and the broker stops):
                # the replica stays offline, as Kafka's does, and the metadata goes on.
                log.error("cannot create the log of %s-%d: %s", topic.name, partition_id, exc)
                return
            log_.update_config(self._log_config(topic.name))
            checkpoint = self.logs.high_watermark_checkpoint(topic.name, partition_id)
            partition = Partition(log_, self.broker_id, checkpoint or 0)
            self.partitions[tp] = partition
        elif partition.is_stale(registration):
            return
        if registration.leader == self.broker_id:
            if partition.make_leader(registration, now):
                log.info("leading %s-%d in epoch %d from offset %d (ISR %s)", topic.name,
                         partition_id, registration.leader_epoch,
                         partition.leader_epoch_start_offset, list(registration.isr))
                self._role_changed(tp, True, registration.leader_epoch)
            self.fetchers.remove(tp)
            self._after_leader_progress(partition, now)
            if (change := partition.recovery_change()) is not None:
                self.isr.submit(partition, change)
        else:
            me = self.image.cluster.broker(self.broker_id)
            leaving = me is not None and me.in_controlled_shutdown and (
                registration.leader < 0 or self.broker_id not in registration.isr)
            if partition.is_leader:
                self._role_changed(tp, False, registration.leader_epoch)
            if partition.make_follower(registration) or leaving:
                self.fetchers.remove(tp)
                # In its own controlled shutdown a broker stops fetching what it was moved
                # out of (Kafka's applyDelta): nothing there waits for it any more.
                if registration.leader >= 0 and not leaving:
                    self.fetchers.add(tp, registration.leader)
            # Requests parked on this replica as a leader end now (NOT_LEADER_OR_FOLLOWER).
            self._notify(tp)

    def _stop_replica(self, tp: TopicPartition, delete: bool) -> None:
        self._applied.pop(tp, None)
        self.fetchers.remove(tp)
        partition = self.partitions.pop(tp)
        if partition.is_leader:
            self._role_changed(tp, False, partition.leader_epoch)
        partition.leader = -1
        self._notify(tp)
        if delete:
            self.logs.delete(*tp)
            log.info("deleted the replica of %s-%d", *tp)

    def _role_changed(self, tp: TopicPartition, leader: bool, epoch: int) -> None:
        for listener in self.role_listeners:
            try:
                listener(tp, leader, epoch)
            except Exception:  # a listener's bug must not stop replication
                log.exception("a leadership listener failed for %s-%d", *tp)
