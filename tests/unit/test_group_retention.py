"""Offset expiry and the offsets of deleted topics (broker/group/retention.py, spec §4.3,
scenarios 29 and 30): which offsets go in which group state, the tombstones written first, an
Empty group deleted with its last offset."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

from broker.group.offsets import CommitPartition, commit_offsets, fetch_offsets
from broker.group.records import GroupKey, OffsetKey, decode_key
from broker.group.retention import expire, purge_deleted_topics
from tests.unit.group_harness import Harness

RETENTION = 60_000
DELAY = 3000
LONG = {"session": 300_000, "rebalance": 600_000}  # members that outlive the retention time


def subscription(*topics: str) -> bytes:
    """A ConsumerProtocol subscription v0: version, topics, user data (null)."""
    body = struct.pack(">hi", 0, len(topics))
    for topic in topics:
        body += struct.pack(">h", len(topic)) + topic.encode()
    return body + struct.pack(">i", -1)


def run(body: Callable[[Harness], Awaitable[None]]) -> None:
    async def main() -> None:
        await body(Harness())
    asyncio.run(main())


def test_a_simple_groups_offsets_expire_by_commit_time_then_the_group_goes() -> None:
    async def body(h: Harness) -> None:
        await commit_offsets(h.coordinator, "s", -1, "", None, [CommitPartition("t", 0, 1)])
        await h.advance(RETENTION // 2)
        await commit_offsets(h.coordinator, "s", -1, "", None, [CommitPartition("t", 1, 1)])
        await h.advance(RETENTION // 2)
        assert await expire(h.coordinator, RETENTION) == 1  # only the older one
        assert list(h.coordinator.groups["s"].offsets) == [("t", 1)]
        await h.advance(RETENTION // 2)
        before = len(h.log.records[0])
        assert await expire(h.coordinator, RETENTION) == 1
        assert "s" not in h.coordinator.groups
        written = [(decode_key(k), v) for k, v in h.log.records[0][before:]]
        assert written == [(OffsetKey("s", "t", 1), None), (GroupKey("s"), None)]
    run(body)


def test_an_empty_consumer_groups_offsets_expire_from_when_it_became_empty() -> None:
    async def body(h: Harness) -> None:
        task = await h.join_new(**LONG)
        await h.advance(DELAY)
        member = task.result().member_id
        await h.coordinator.sync_group("g", 1, member, None, None, None, {})
        await commit_offsets(h.coordinator, "g", 1, member, None, [CommitPartition("t", 0, 3)])
        await h.advance(RETENTION * 2)  # committed long ago, but the group was not Empty
        assert await expire(h.coordinator, RETENTION) == 0
        h.coordinator.leave_group("g", [(member, None)])
        await h.advance(RETENTION - 1)
        assert await expire(h.coordinator, RETENTION) == 0
        await h.advance(1)
        assert await expire(h.coordinator, RETENTION) == 1
        assert "g" not in h.coordinator.groups
    run(body)


def test_a_stable_consumer_group_loses_only_offsets_of_topics_it_no_longer_reads() -> None:
    async def body(h: Harness) -> None:
        task = await h.join_new(protocols=[("range", subscription("t"))], **LONG)
        await h.advance(DELAY)
        member = task.result().member_id
        await h.coordinator.sync_group("g", 1, member, None, None, None, {})
        await commit_offsets(h.coordinator, "g", 1, member, None,
                             [CommitPartition("t", 0, 3), CommitPartition("old", 0, 9)])
        await h.advance(RETENTION)
        assert await expire(h.coordinator, RETENTION) == 1
        assert list(h.coordinator.groups["g"].offsets) == [("t", 0)]
    run(body)


def test_an_explicit_expire_time_wins_and_rebalancing_groups_keep_theirs() -> None:
    async def body(h: Harness) -> None:
        now = h.clock.now
        await commit_offsets(h.coordinator, "s", -1, "", None, [CommitPartition("t", 0, 1)],
                             expire_timestamp=now + 1000)
        await h.advance(1000)
        assert await expire(h.coordinator, RETENTION) == 1
        first = await h.join_new(client="a", **LONG)
        await h.advance(DELAY)
        a = first.result().member_id
        await h.coordinator.sync_group("g", 1, a, None, None, None, {})
        await commit_offsets(h.coordinator, "g", 1, a, None, [CommitPartition("t", 0, 1)])
        h.join(a, protocols=[("range", b"changed")], **LONG)  # a rebalance
        await h.join_new(client="b", **LONG)
        await h.advance(RETENTION * 2)
        assert await expire(h.coordinator, RETENTION) == 0
    run(body)


def test_offsets_of_a_deleted_topic_are_removed() -> None:
    async def body(h: Harness) -> None:  # scenario 30
        await commit_offsets(h.coordinator, "s", -1, "", None,
                             [CommitPartition("gone", 0, 4), CommitPartition("kept", 0, 5)])
        assert await purge_deleted_topics(h.coordinator, lambda topic: topic == "kept") == 1
        _, offsets = fetch_offsets(h.coordinator, "s", [("gone", 0), ("kept", 0)])
        assert [o.offset for o in offsets] == [-1, 5]
    run(body)


def test_expiry_keeps_a_commit_acknowledged_while_its_tombstones_were_written() -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        await commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 5)])
        await h.advance(RETENTION // 2)
        await commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 1, 5)])
        await h.advance(RETENTION // 2)  # ("t", 0) expired, ("t", 1) not
        h.log.gate = asyncio.Event()
        expiry = h.start(expire(c, RETENTION))
        await h.settle()  # its tombstone for ("t", 0) is being written
        commit = h.start(commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 42)]))
        await h.settle()
        h.log.gate.set()
        assert await commit == [0]
        assert await expiry == 0  # the acknowledged commit replaced what it selected
        assert fetch_offsets(c, "s", [("t", 0)])[1][0].offset == 42
        assert sorted(c.groups["s"].offsets) == [("t", 0), ("t", 1)]

    run(body)


def test_a_commit_while_the_last_offsets_go_is_refused_retriably() -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        await commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 5)])
        await h.advance(RETENTION * 2)
        h.log.gate = asyncio.Event()
        expiry = h.start(expire(c, RETENTION))
        await h.settle()  # the offset and group tombstones are being written
        commit = h.start(commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 42)]))
        await h.settle()
        h.log.gate.set()
        assert await commit == [15]  # COORDINATOR_NOT_AVAILABLE: the client retries
        assert await expiry == 1
        assert "s" not in c.groups
        assert await commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 42)]) == [0]
        assert c.groups["s"].offsets[("t", 0)].offset == 42

    run(body)


def test_expiry_skips_an_offset_with_a_commit_in_flight_and_keeps_its_group() -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        await commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 5)])
        await h.advance(RETENTION * 2)
        h.log.gate = asyncio.Event()
        commit = h.start(commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 42)]))
        await h.settle()
        assert c.groups["s"].pending_commits == {("t", 0): 1}
        expiry = h.start(expire(c, RETENTION))
        h.log.gate.set()
        assert await expiry == 0
        assert await commit == [0]
        assert c.groups["s"].offsets[("t", 0)].offset == 42
        assert not c.groups["s"].pending_commits
        written = [decode_key(k) for k, v in h.log.records[0] if v is None]
        assert written == []  # neither an offset nor a group tombstone

    run(body)


def test_a_failed_commit_releases_its_pending_mark() -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        await commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 5)])
        h.log.error = 7  # the append fails
        assert await commit_offsets(c, "s", -1, "", None,
                                    [CommitPartition("t", 0, 6)]) != [0]
        assert not c.groups["s"].pending_commits

    run(body)


def test_an_empty_group_without_offsets_is_removed_at_the_next_check() -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        task = await h.join_new("x")
        pending = await h.join("", "p")  # MEMBER_ID_REQUIRED: "p" waits for the rejoin
        assert pending.error == 79
        await h.advance(DELAY)
        member = task.result().member_id
        c.leave_group("x", [(member, None)])  # left without committing
        await h.settle()
        assert c.groups["x"].state.value == "Empty"
        before = len(h.log.records[0])
        assert await expire(c, RETENTION) == 0
        assert "x" not in c.groups
        assert "p" in c.groups  # its member id is still pending
        written = [(decode_key(k), v) for k, v in h.log.records[0][before:]]
        assert written == [(GroupKey("x"), None)]
        await h.advance(20_000)  # the pending member id lapses: "p" goes at the next check
        assert await purge_deleted_topics(c, lambda topic: True) == 0
        assert c.groups == {}

    run(body)
