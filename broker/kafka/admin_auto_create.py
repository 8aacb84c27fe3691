"""Auto topic creation through Metadata (Kafka's AutoTopicCreationManager in KRaft mode).

A Metadata request that names a missing topic, allows auto-creation (v4+ field, implied
before) and reaches a broker with `auto.create.topics.enable` makes the broker send CreateTopics
for it with -1 partitions and -1 replicas (the cluster's `num.partitions` and
`default.replication.factor`) through the admin operations, in the background. Metadata answers
at once with UNKNOWN_TOPIC_OR_PARTITION for it, as a KRaft broker does; clients retry until the
topic exists (its partitions then show LEADER_NOT_AVAILABLE until their leaders are known). A
name already being created is not sent again. Internal topics are never created this way:
their owners create them with their own settings.

The Metadata request that started a creation is held until the new topics' partitions all have
leaders in this broker's metadata, at most AUTO_CREATE_HOLD_S (`wait_created`), and answered
then: the client can produce at once instead of finding the topic at its next metadata query
(librdkafka asks again after 1 s, so a hold of at most 1 s never makes it later). Kafka answers
at once with UNKNOWN_TOPIC_OR_PARTITION.

With `wait_unfenced` a name asked for while the broker is still fenced (it answers clients
from RECOVERY on) is created once the broker is unfenced: in a cluster that is starting, every
broker may still be fenced, the creation would fail (INVALID_REPLICATION_FACTOR) and the
client would find the topic only at its next metadata refresh (librdkafka: a second later).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterable, Sequence

from broker.kafka.admin_common import AdminBackend, call_controller
from kraft.errors import Errors, error_name
from metadata.rpc import admin_pb2 as pb

log = logging.getLogger(__name__)

CREATE_TIMEOUT_MS = 30_000
AUTO_CREATE_HOLD_S = 1.0  # librdkafka's next metadata query for an unknown topic

# (names, timeout in seconds): returns once every name's partitions have leaders, or at the
# timeout.
TopicsLed = Callable[[Sequence[str], float], Awaitable[None]]


class AutoTopicCreator:
    def __init__(self, admin: AdminBackend, enabled: bool, wait_unfenced: bool = False,
                 topics_led: TopicsLed | None = None) -> None:
        self.admin = admin
        self.enabled = enabled
        self._topics_led = topics_led
        self.in_flight: set[str] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self.unfenced = asyncio.Event()  # set by the broker's lifecycle when it runs
        if not wait_unfenced:
            self.unfenced.set()

    def create(self, names: Iterable[str]) -> None:
        """Start creating the names not already being created; returns at once."""
        fresh = [name for name in dict.fromkeys(names) if name not in self.in_flight]
        if not fresh:
            return
        self.in_flight.update(fresh)
        task = asyncio.ensure_future(self._create(fresh))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait_created(self, names: Sequence[str]) -> None:
        """Until `names` all have led partitions here, at most AUTO_CREATE_HOLD_S (at once
        without a way to see them)."""
        if self._topics_led is not None and names:
            await self._topics_led(names, AUTO_CREATE_HOLD_S)

    async def _create(self, names: list[str]) -> None:
        request = pb.CreateTopicsRequest(topics=[
            pb.CreatableTopic(name=name, num_partitions=-1, replication_factor=-1)
            for name in names])
        try:
            await self.unfenced.wait()
            response = await call_controller(self.admin, "CreateTopics", request,
                                             CREATE_TIMEOUT_MS)
            if response.status.error_code != Errors.NONE:
                log.warning("auto-creating %s failed: %s %s", names,
                            error_name(response.status.error_code),
                            response.status.error_message)
            for result in response.topics:
                if result.error_code not in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
                    log.warning("auto-creating topic %s failed: %s %s", result.name,
                                error_name(result.error_code), result.error_message)
        finally:
            self.in_flight.difference_update(names)

    async def close(self) -> None:
        tasks, self._tasks = set(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
