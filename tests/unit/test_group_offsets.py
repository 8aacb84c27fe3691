"""OffsetCommit/OffsetFetch rules (broker/group/offsets.py) and the inspection APIs
(broker/group/admin.py), spec §3.9, §4 and scenarios 15-19, 27."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from broker.group.admin import delete_group, describe_group, list_groups
from broker.group.model import GroupState
from broker.group.offsets import CommitPartition, commit_offsets, fetch_offsets
from broker.group.records import GroupKey, OffsetKey, decode_key
from tests.unit.group_harness import Harness

DELAY = 3000


def run(body: Callable[[Harness], Awaitable[None]]) -> None:
    async def main() -> None:
        await body(Harness())
    asyncio.run(main())


async def one_member(h: Harness) -> str:
    task = await h.join_new()
    await h.advance(DELAY)
    member = task.result().member_id
    await h.coordinator.sync_group("g", 1, member, None, None, None, {member: b"a"})
    return member


def commit(h: Harness, generation: int, member: str, *partitions: CommitPartition,
           group: str = "g", v9: bool = False) -> Awaitable[list[int]]:
    return commit_offsets(h.coordinator, group, generation, member, None, list(partitions),
                          group_id_not_found=v9)


def test_member_commit_errors() -> None:
    async def body(h: Harness) -> None:  # scenario 15
        member = await one_member(h)
        p = CommitPartition("t", 0, 1)
        assert await commit(h, 1, "stranger", p) == [25]
        assert await commit(h, 0, member, p) == [22]
        assert await commit(h, 1, member, CommitPartition("t", 0, 1, metadata="x" * 5000),
                            p) == [12, 0]
        h.join(member, protocols=[("range", b"changed")])  # the only member rejoins: gen 2
        await h.settle()
        assert h.coordinator.groups["g"].state is GroupState.COMPLETING_REBALANCE
        assert await commit(h, 2, member, p) == [27]
    run(body)


def test_simple_commits_create_a_group_and_are_refused_in_an_active_one() -> None:
    async def body(h: Harness) -> None:  # scenarios 16, 17, 18
        assert await commit(h, -1, "", CommitPartition("t", 0, 5), group="simple") == [0]
        group = h.coordinator.groups["simple"]
        assert (group.state, group.protocol_type) == (GroupState.EMPTY, None)
        assert fetch_offsets(h.coordinator, "simple", [("t", 0)])[1][0].offset == 5
        _, listed = list_groups(h.coordinator)
        assert [(g.group_id, g.protocol_type, g.state) for g in listed] == \
            [("simple", "", "Empty")]
        await one_member(h)
        assert await commit(h, -1, "", CommitPartition("t", 0, 5)) == [25]
        assert await commit(h, 3, "m", CommitPartition("t", 0, 5), group="none") == [22]
        assert await commit(h, 3, "m", CommitPartition("t", 0, 5), group="none",
                            v9=True) == [69]
    run(body)


def test_fetch_of_unknown_groups_and_partitions_is_minus_one_without_error() -> None:
    async def body(h: Harness) -> None:  # scenario 19
        error, offsets = fetch_offsets(h.coordinator, "nobody", [("t", 0), ("u", 3)])
        assert error == 0 and [(o.offset, o.leader_epoch, o.metadata) for o in offsets] == \
            [(-1, -1, ""), (-1, -1, "")]
        assert fetch_offsets(h.coordinator, "nobody", None) == (0, [])
        assert fetch_offsets(h.coordinator, None, None)[0] == 24
    run(body)


def test_describe_shows_members_and_assignment_only_when_stable() -> None:
    async def body(h: Harness) -> None:
        assert describe_group(h.coordinator, "unknown").state == "Dead"
        task = await h.join_new()
        await h.advance(DELAY)
        member = task.result().member_id
        preparing = describe_group(h.coordinator, "g")
        assert (preparing.state, preparing.protocol_data) == ("CompletingRebalance", "")
        assert preparing.members[0].metadata == b""
        await h.coordinator.sync_group("g", 1, member, None, None, None, {member: b"a"})
        stable = describe_group(h.coordinator, "g")
        assert (stable.state, stable.protocol_type, stable.protocol_data) == \
            ("Stable", "consumer", "range")
        (m,) = stable.members
        assert (m.member_id, m.client_id, m.metadata, m.assignment) == \
            (member, "c", b"sub-range", b"a")
        _, listed = list_groups(h.coordinator, {"empty"})
        assert listed == []
    run(body)


def test_delete_groups() -> None:
    async def body(h: Harness) -> None:  # scenario 27
        member = await one_member(h)
        await commit(h, 1, member, CommitPartition("t", 0, 8))
        assert await delete_group(h.coordinator, "g") == 68  # NON_EMPTY_GROUP
        assert await delete_group(h.coordinator, "nope") == 69  # GROUP_ID_NOT_FOUND
        h.coordinator.leave_group("g", [(member, None)])
        await h.settle()
        before = len(h.log.records[0])
        assert await delete_group(h.coordinator, "g") == 0
        tombstones = h.log.records[0][before:]
        assert [(decode_key(k), v) for k, v in tombstones] == \
            [(GroupKey("g"), None), (OffsetKey("g", "t", 0), None)]
        assert fetch_offsets(h.coordinator, "g", [("t", 0)])[1][0].offset == -1
        # And a reload of the log agrees: the group is gone.
        h.coordinator.unload(0)
        h.coordinator.begin_loading(0)
        h.coordinator.finish_loading(0, h.log.records[0])
        assert "g" not in h.coordinator.groups
    run(body)


def test_delete_groups_refuses_a_group_with_a_commit_in_flight() -> None:
    async def body(h: Harness) -> None:
        c = h.coordinator
        await commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 0, 5)])
        h.log.gate = asyncio.Event()
        committing = h.start(commit_offsets(c, "s", -1, "", None, [CommitPartition("t", 1, 9)]))
        await h.settle()
        deleting = h.start(delete_group(c, "s"))
        await h.settle()
        h.log.gate.set()
        assert await committing == [0]
        assert await deleting == 68  # NON_EMPTY_GROUP: the acknowledged commit stays
        assert fetch_offsets(c, "s", [("t", 1)])[1][0].offset == 9
        c.unload(0)  # and a failover agrees
        c.begin_loading(0)
        c.finish_loading(0, h.log.records[0])
        assert sorted(c.groups["s"].offsets) == [("t", 0), ("t", 1)]
        assert await delete_group(c, "s") == 0  # nothing in flight now
        assert "s" not in c.groups
    run(body)
