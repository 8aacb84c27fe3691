"""A GroupCoordinator on a fake clock and an in-memory `__consumer_offsets`: appends land in a
list (or fail with a chosen error), timers fire when the test advances the clock and ticks."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker.group.config import GroupConfig
from broker.group.coordinator import GroupCoordinator
from broker.group.model import JoinResult
from broker.group.records import Records

T = TypeVar("T")
CONSUMER = "consumer"
RANGE = [("range", b"sub-range"), ("roundrobin", b"sub-rr")]


@dataclass
class FakeLog:
    records: dict[int, list[tuple[bytes, bytes | None]]] = field(default_factory=dict)
    error: int = 0
    gate: asyncio.Event | None = None  # set: appends wait for it

    async def append(self, partition: int, records: Records) -> int:
        if self.gate is not None:
            await self.gate.wait()
        if self.error:
            return self.error
        self.records.setdefault(partition, []).extend(records)
        return 0


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


class Harness:
    def __init__(self, **config: Any) -> None:
        self.clock = Clock()
        self.log = FakeLog()
        self.config = GroupConfig(offsets_topic_num_partitions=1, **config)
        self.coordinator = GroupCoordinator(self.config, self.log, self.clock)
        self.coordinator.begin_loading(0)
        self.coordinator.finish_loading(0, [])

    async def settle(self) -> None:
        for _ in range(5):
            await asyncio.sleep(0)

    async def advance(self, ms: int) -> None:
        """Move the clock and fire the timers, step by step as a driver would (requests
        started before run first)."""
        await self.settle()
        target = self.clock.now + ms
        while True:
            deadline = self.coordinator.next_deadline()
            if deadline > target:
                break
            self.clock.now = max(self.clock.now, deadline)
            self.coordinator.tick()
            await self.settle()
        self.clock.now = target
        self.coordinator.tick()
        await self.settle()

    def start(self, work: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        return asyncio.ensure_future(work)

    def join(self, member_id: str = "", group: str = "g", *, instance: str | None = None,
             protocols: list[tuple[str, bytes]] | None = None, session: int = 10000,
             rebalance: int = 30000, protocol_type: str = CONSUMER, client: str = "c",
             require_known: bool = True, skip: bool = False) -> asyncio.Task[JoinResult]:
        return self.start(self.coordinator.join_group(
            group, member_id, instance, protocol_type, protocols or RANGE, session, rebalance,
            client, "/127.0.0.1", require_known, skip))

    async def join_new(self, group: str = "g", **kwargs: Any) -> asyncio.Task[JoinResult]:
        """The KIP-394 dance: MEMBER_ID_REQUIRED, then the parked join with that id."""
        first = await self.join("", group, **kwargs)
        assert first.error == 79, first
        task = self.join(first.member_id, group, **kwargs)
        await self.settle()
        return task
