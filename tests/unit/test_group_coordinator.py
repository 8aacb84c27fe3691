"""The classic group state machine (broker/group/coordinator.py) against the spec's scenarios
(reference kafka-groups-and-admin.md §3, §7, §8), on a fake clock: timers fire only when a test
advances it, so every timing rule is exact and nothing sleeps."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from broker.group.model import GroupState
from tests.unit.group_harness import RANGE, Harness

DELAY = 3000
SESSION = 10000
REBALANCE = 30000


def run(body: Callable[[Harness], Awaitable[None]], **config: int) -> None:
    async def main() -> None:
        await body(Harness(**config))
    asyncio.run(main())


def state(h: Harness, group: str = "g") -> GroupState:
    return h.coordinator.groups[group].state


async def stable_group(h: Harness, count: int) -> list[str]:
    """`count` members joined at once, synced (the leader assigns b"a-<id>"): member ids."""
    tasks = [await h.join_new(client=f"c{i}") for i in range(count)]
    await h.advance(DELAY * (2 if count > 1 else 1))  # arrivals re-arm the delay once
    results = [t.result() for t in tasks]
    leader = results[0].leader
    ids = [r.member_id for r in results]
    syncs = [h.start(h.coordinator.sync_group(
        "g", r.generation, r.member_id, None, "consumer", "range",
        {m: f"a-{m}".encode() for m in ids} if r.member_id == leader else {}))
        for r in results]
    await h.settle()
    assert all(s.done() and s.result().error == 0 for s in syncs)
    assert state(h) is GroupState.STABLE
    return ids


def test_one_consumer_needs_a_member_id_then_waits_the_initial_delay() -> None:
    async def body(h: Harness) -> None:
        first = await h.join()
        assert first.error == 79 and first.member_id.startswith("c-")  # MEMBER_ID_REQUIRED
        parked = h.join(first.member_id)
        await h.advance(DELAY - 1)
        assert not parked.done(), "the initial rebalance never completes early"
        await h.advance(1)
        result = parked.result()
        assert (result.error, result.generation, result.leader) == (0, 1, first.member_id)
        assert result.protocol_name == "range"
        assert result.members == ((first.member_id, None, b"sub-range"),)
        sync = await h.coordinator.sync_group("g", 1, first.member_id, None, None, None,
                                              {first.member_id: b"assigned"})
        assert (sync.error, sync.assignment) == (0, b"assigned")
        assert state(h) is GroupState.STABLE
        assert len(h.log.records[0]) == 1  # the group record, written before Stable
    run(body)


def test_members_arriving_during_the_initial_delay_extend_it_once_each_window() -> None:
    async def body(h: Harness) -> None:
        a = await h.join_new(client="a")
        await h.advance(1000)
        b = await h.join_new(client="b")
        await h.advance(1000)
        c = await h.join_new(client="c")
        await h.advance(1000)  # t=3 s: members arrived in the window -> another 3 s
        assert not a.done()
        await h.advance(DELAY - 1)
        assert not a.done()
        await h.advance(1)  # t=6 s
        results = [t.result() for t in (a, b, c)]
        assert {r.generation for r in results} == {1}
        leader = [r for r in results if r.members]
        assert len(leader) == 1 and len(leader[0].members) == 3
    run(body)


def test_a_second_consumer_triggers_a_rebalance_and_old_generations_are_fenced() -> None:
    async def body(h: Harness) -> None:
        (a,) = await stable_group(h, 1)
        b = await h.join_new(client="b")
        assert state(h) is GroupState.PREPARING_REBALANCE
        assert h.coordinator.heartbeat("g", a, None, 1) == 27  # REBALANCE_IN_PROGRESS
        from broker.group.offsets import CommitPartition, commit_offsets
        assert await commit_offsets(h.coordinator, "g", 1, a, None,
                                    [CommitPartition("t", 0, 5)]) == [0]
        rejoin = h.join(a)
        await h.settle()
        assert rejoin.done() and b.done()
        assert rejoin.result().generation == b.result().generation == 2
        assert await commit_offsets(h.coordinator, "g", 1, a, None,
                                    [CommitPartition("t", 0, 6)]) == [22]  # ILLEGAL_GENERATION
    run(body)


def test_follower_rejoining_unchanged_keeps_the_generation_the_leader_does_not() -> None:
    async def body(h: Harness) -> None:
        ids = await stable_group(h, 2)
        leader = h.coordinator.groups["g"].leader_id
        follower = next(i for i in ids if i != leader)
        same = await h.join(follower)
        assert (same.error, same.generation, same.members) == (0, 1, ())
        assert state(h) is GroupState.STABLE
        h.join(leader)
        await h.settle()
        assert state(h) is GroupState.PREPARING_REBALANCE
    run(body)


def test_follower_with_a_changed_subscription_rebalances() -> None:
    async def body(h: Harness) -> None:
        ids = await stable_group(h, 2)
        follower = next(i for i in ids if i != h.coordinator.groups["g"].leader_id)
        h.join(follower, protocols=[("range", b"other-topics")])
        await h.settle()
        assert state(h) is GroupState.PREPARING_REBALANCE
    run(body)


def test_a_member_leaving_rebalances_the_rest_and_its_heartbeat_is_unknown() -> None:
    async def body(h: Harness) -> None:
        a, b = await stable_group(h, 2)
        top, errors = h.coordinator.leave_group("g", [(b, None)])
        assert (top, errors) == (0, [0])
        assert state(h) is GroupState.PREPARING_REBALANCE
        assert h.coordinator.heartbeat("g", b, None, 1) == 25  # UNKNOWN_MEMBER_ID
        rejoin = h.join(a)
        await h.settle()
        assert rejoin.result().generation == 2 and len(rejoin.result().members) == 1
    run(body)


def test_the_last_member_leaving_empties_the_group_and_keeps_its_offsets() -> None:
    async def body(h: Harness) -> None:
        (a,) = await stable_group(h, 1)
        from broker.group.offsets import CommitPartition, commit_offsets, fetch_offsets
        await commit_offsets(h.coordinator, "g", 1, a, None, [CommitPartition("t", 0, 42)])
        h.coordinator.leave_group("g", [(a, None)])
        await h.settle()
        group = h.coordinator.groups["g"]
        assert (group.state, group.generation) == (GroupState.EMPTY, 2)
        assert fetch_offsets(h.coordinator, "g", [("t", 0)])[1][0].offset == 42
    run(body)


def test_a_member_that_stops_heartbeating_is_removed_after_its_session() -> None:
    async def body(h: Harness) -> None:
        a, b = await stable_group(h, 2)
        await h.advance(SESSION // 2)
        assert h.coordinator.heartbeat("g", a, None, 1) == 0
        await h.advance(SESSION // 2 - 1)
        assert b in h.coordinator.groups["g"].members
        await h.advance(1)
        assert b not in h.coordinator.groups["g"].members
        assert h.coordinator.heartbeat("g", a, None, 1) == 27
    run(body)


def test_a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_timeout() -> None:
    async def body(h: Harness) -> None:
        a, b = await stable_group(h, 2)
        rejoin = h.join(a, protocols=[("range", b"changed")])
        for _ in range(REBALANCE // 5000 - 1):
            await h.advance(5000)
            assert h.coordinator.heartbeat("g", b, None, 1) == 27  # alive, not rejoining
        await h.advance(4999)
        assert not rejoin.done()
        await h.advance(1)
        assert rejoin.result().generation == 2 and len(rejoin.result().members) == 1
        late = await h.join(b)
        assert late.error == 25
    run(body)


def test_a_member_that_never_syncs_is_removed_at_the_sync_deadline() -> None:
    async def body(h: Harness) -> None:  # KAFKA-12890
        a = await h.join_new(client="a")
        b = await h.join_new(client="b")
        await h.advance(2 * DELAY)
        leader = a.result()
        ids = [a.result().member_id, b.result().member_id]
        sync = h.start(h.coordinator.sync_group("g", 1, leader.member_id, None, None, None,
                                                {m: b"x" for m in ids}))
        await h.settle()
        assert sync.result().error == 0
        for _ in range(4):  # b heartbeats but never sends SyncGroup
            await h.advance(REBALANCE // 4)
            h.coordinator.heartbeat("g", ids[1], None, 1)
            h.coordinator.heartbeat("g", ids[0], None, 1)
        assert ids[1] not in h.coordinator.groups["g"].members
        assert state(h) is GroupState.PREPARING_REBALANCE
    run(body)


def test_a_member_the_leader_left_out_gets_an_empty_assignment() -> None:
    async def body(h: Harness) -> None:
        a = await h.join_new(client="a")
        b = await h.join_new(client="b")
        await h.advance(2 * DELAY)
        follower = h.start(h.coordinator.sync_group("g", 1, b.result().member_id, None, None,
                                                    None, {}))
        await h.settle()
        assert not follower.done()
        await h.coordinator.sync_group("g", 1, a.result().member_id, None, None, None,
                                       {a.result().member_id: b"only-a"})
        await h.settle()
        assert (follower.result().error, follower.result().assignment) == (0, b"")
    run(body)


def test_sync_group_errors() -> None:
    async def body(h: Harness) -> None:
        a, _ = await stable_group(h, 2)
        sync = h.coordinator.sync_group
        assert (await sync("g", 0, a, None, None, None, {})).error == 22
        assert (await sync("nope", 1, a, None, None, None, {})).error == 25
        assert (await sync("g", 1, a, None, "connect", None, {})).error == 23
        assert (await sync("", 1, a, None, None, None, {})).error == 24
        h.join(h.coordinator.groups["g"].leader_id or "")  # the leader rejoins: rebalance
        await h.settle()
        assert (await sync("g", 1, a, None, None, None, {})).error == 27
    run(body)


def test_inconsistent_protocols_and_bad_session_timeouts_are_refused() -> None:
    async def body(h: Harness) -> None:
        await stable_group(h, 1)
        assert (await h.join(protocol_type="connect")).error == 23
        assert (await h.join(protocols=[("sticky", b"")])).error == 23
        assert state(h) is GroupState.STABLE
        assert (await h.join(session=5000)).error == 26
        assert (await h.join(session=2_000_000)).error == 26
        assert (await h.join(group="")).error == 24
    run(body)


def test_pending_member_ids_expire_after_a_session_timeout() -> None:
    async def body(h: Harness) -> None:  # KAFKA-7610
        for _ in range(5):
            assert (await h.join()).error == 79
        group = h.coordinator.groups["g"]
        assert len(group.pending_members) == 5
        await h.advance(SESSION)
        assert not group.pending_members
    run(body)


def test_a_new_member_that_never_completes_its_join_is_dropped() -> None:
    async def body(h: Harness) -> None:  # KAFKA-9752: new members have a 5-minute deadline
        (a,) = await stable_group(h, 1)
        h.coordinator.leave_group("g", [(a, None)])  # empty again, then a slow newcomer
        b = await h.join_new(client="b")
        await h.advance(DELAY)
        (b_id,) = [b.result().member_id]
        await h.coordinator.sync_group("g", b.result().generation, b_id, None, None, None, {})
        newcomer = await h.join_new(client="new", rebalance=600_000)
        for _ in range(60):  # b stays alive but never rejoins; the newcomer waits
            await h.advance(5000)
            h.coordinator.heartbeat("g", b_id, None, b.result().generation)
        assert newcomer.result().error == 25  # dropped at its 5-minute join deadline
        assert list(h.coordinator.groups["g"].members) == [b_id]
    run(body)


def test_a_static_member_restarting_keeps_its_generation_and_assignment() -> None:
    async def body(h: Harness) -> None:
        a = h.join(instance="i-a", client="a")
        await h.advance(DELAY)
        first = a.result()
        assert first.error == 0 and first.member_id.startswith("i-a-")
        await h.coordinator.sync_group("g", 1, first.member_id, "i-a", None, None,
                                       {first.member_id: b"mine"})
        again = await h.join(instance="i-a", client="a")  # restart: no LeaveGroup was sent
        assert again.error == 0 and again.generation == 1
        assert again.member_id != first.member_id
        assert state(h) is GroupState.STABLE
        sync = await h.coordinator.sync_group("g", 1, again.member_id, "i-a", None, None, {})
        assert sync.assignment == b"mine"
        assert h.coordinator.heartbeat("g", first.member_id, "i-a", 1) == 82  # fenced
        assert len(h.log.records[0]) == 2, "the replacement is persisted (KAFKA-10284)"
    run(body)


def test_a_static_member_absent_past_its_session_is_removed() -> None:
    async def body(h: Harness) -> None:
        a = h.join(instance="i-a", client="a")
        b = h.join(instance="i-b", client="b")
        await h.advance(2 * DELAY)
        ids = [a.result().member_id, b.result().member_id]
        await h.coordinator.sync_group("g", 1, a.result().member_id, "i-a", None, None,
                                       {m: b"x" for m in ids})
        for _ in range(3):
            await h.advance(SESSION // 2)
            h.coordinator.heartbeat("g", ids[0], "i-a", 1)
        assert ids[1] not in h.coordinator.groups["g"].members
        assert state(h) is GroupState.PREPARING_REBALANCE
    run(body)


def test_admin_leave_by_instance_id() -> None:
    async def body(h: Harness) -> None:  # scenario 24
        a = h.join(instance="a", client="a")
        await h.advance(DELAY)
        await h.coordinator.sync_group("g", 1, a.result().member_id, "a", None, None, {})
        top, errors = h.coordinator.leave_group("g", [("", "a"), ("", "zz")])
        assert (top, errors) == (0, [0, 25])
        assert h.coordinator.leave_group("unknown", [("m", None)]) == (0, [25])
    run(body)


def test_a_rebalance_write_failure_answers_the_sync_with_the_translated_error() -> None:
    async def body(h: Harness) -> None:
        a = await h.join_new()
        await h.advance(DELAY)
        h.log.error = 19  # NOT_ENOUGH_REPLICAS
        sync = await h.coordinator.sync_group("g", 1, a.result().member_id, None, None, None,
                                              {})
        assert sync.error == 15  # COORDINATOR_NOT_AVAILABLE
        assert state(h) is GroupState.PREPARING_REBALANCE
    run(body)


def test_unloading_answers_parked_requests_with_not_coordinator() -> None:
    async def body(h: Harness) -> None:
        parked = await h.join_new()
        h.coordinator.unload(0)
        await h.settle()
        assert parked.result().error == 16
        assert (await h.join()).error == 16
        h.coordinator.begin_loading(0)
        assert (await h.join()).error == 14
        assert h.coordinator.heartbeat("g", "m", None, 1) == 0  # blindly, while loading
        assert (await h.coordinator.sync_group("g", 1, "m", None, None, None, {})).error == 27
    run(body)


def test_group_state_survives_a_reload_from_the_log() -> None:
    async def body(h: Harness) -> None:  # scenario 25
        a, b = await stable_group(h, 2)
        from broker.group.offsets import CommitPartition, commit_offsets, fetch_offsets
        await commit_offsets(h.coordinator, "g", 1, a, None, [CommitPartition("t", 3, 77, 2,
                                                                              "meta")])
        records = list(h.log.records[0])
        h.coordinator.unload(0)
        h.coordinator.begin_loading(0)
        h.coordinator.finish_loading(0, records)
        group = h.coordinator.groups["g"]
        assert (group.state, group.generation, set(group.members)) == \
            (GroupState.STABLE, 1, {a, b})
        assert h.coordinator.heartbeat("g", a, None, 1) == 0
        offset = fetch_offsets(h.coordinator, "g", [("t", 3)])[1][0]
        assert (offset.offset, offset.leader_epoch, offset.metadata) == (77, 2, "meta")
        sync = await h.coordinator.sync_group("g", 1, b, None, None, None, {})
        assert sync.assignment == f"a-{b}".encode()
    run(body)


def test_group_max_size() -> None:
    async def body(h: Harness) -> None:
        await h.join_new(client="a")
        refused = await h.join(client="b")
        assert (refused.error, refused.member_id) == (81, "")
    run(body, max_size=1)


def test_join_group_v0_without_rebalance_timeout_uses_the_session_timeout() -> None:
    async def body(h: Harness) -> None:  # KAFKA-8653
        task = h.join(rebalance=-1, require_known=False)
        await h.advance(DELAY)
        assert task.result().error == 0
        assert h.coordinator.groups["g"].rebalance_timeout_ms() == SESSION
    run(body)


def test_protocol_selection_takes_the_most_voted_common_protocol() -> None:
    async def body(h: Harness) -> None:
        a = await h.join_new(client="a", protocols=[("roundrobin", b""), ("range", b"")])
        b = await h.join_new(client="b", protocols=RANGE)
        c = await h.join_new(client="c", protocols=[("roundrobin", b""), ("range", b"")])
        await h.advance(2 * DELAY)
        assert {t.result().protocol_name for t in (a, b, c)} == {"roundrobin"}
    run(body)


def test_a_static_member_that_misses_a_rebalance_keeps_its_place() -> None:
    async def body(h: Harness) -> None:  # scenario 22: static members are not dropped
        a = h.join(instance="i-a", client="a")
        b = h.join(instance="i-b", client="b", session=60000)  # down, within its session
        await h.advance(2 * DELAY)
        a_id, b_id = a.result().member_id, b.result().member_id
        leader = a.result().leader
        await h.coordinator.sync_group("g", 1, leader, None, None, None,
                                       {a_id: b"pa", b_id: b"pb"})
        newcomer = await h.join_new(client="c")  # a rebalance b does not take part in
        rejoin = h.join(a_id, instance="i-a", client="a")
        await h.advance(REBALANCE)
        result = rejoin.result()
        assert result.generation == 2 and newcomer.result().generation == 2
        assert b_id in h.coordinator.groups["g"].members, "the static member was kept"
        listed = result.members or newcomer.result().members
        assert {m for m, _, _ in listed} == {a_id, b_id, newcomer.result().member_id}
    run(body)


def test_a_second_process_with_the_same_instance_id_fences_the_first() -> None:
    async def body(h: Harness) -> None:  # scenario 23
        first = h.join(instance="dup", client="p1")
        await h.advance(DELAY)
        old = first.result().member_id
        await h.coordinator.sync_group("g", 1, old, "dup", None, None, {old: b"x"})
        second = await h.join(instance="dup", client="p2")
        assert second.error == 0 and second.member_id != old
        assert h.coordinator.heartbeat("g", old, "dup", 1) == 82
        assert (await h.coordinator.sync_group("g", 1, old, "dup", None, None, {})).error == 82
        assert (await h.join(old, instance="dup", client="p1")).error == 82
    run(body)


def test_a_static_rejoin_during_completing_rebalance_forces_a_new_one() -> None:
    async def body(h: Harness) -> None:  # KAFKA-9801
        a = h.join(instance="i-a", client="a")
        b = h.join(instance="i-b", client="b")
        await h.advance(2 * DELAY)
        assert h.coordinator.groups["g"].state is GroupState.COMPLETING_REBALANCE
        restarted = h.join(instance="i-b", client="b")  # b restarted before syncing
        await h.settle()
        assert h.coordinator.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert b.result().generation == 1
        h.join(a.result().member_id, instance="i-a", client="a")
        await h.settle()
        assert restarted.result().generation == 2
    run(body)


def test_a_reload_mid_rebalance_comes_back_at_the_last_persisted_generation() -> None:
    async def body(h: Harness) -> None:  # scenario 26
        a, b = await stable_group(h, 2)
        h.join(h.coordinator.groups["g"].leader_id or "")  # the leader rejoins: preparing
        await h.settle()
        records = list(h.log.records[0])
        h.coordinator.unload(0)
        h.coordinator.begin_loading(0)
        h.coordinator.finish_loading(0, records)
        group = h.coordinator.groups["g"]
        assert (group.state, group.generation, set(group.members)) == \
            (GroupState.STABLE, 1, {a, b})
        rejoin_a, rejoin_b = h.join(a), h.join(b)  # members rejoin: a new generation
        await h.settle()
        assert rejoin_a.result().generation == rejoin_b.result().generation == 2
    run(body)


def test_a_static_member_crashed_in_sync_group_times_out_after_its_answer() -> None:
    async def body(h: Harness) -> None:
        a = h.join(instance="i-a", client="a", rebalance=6 * REBALANCE)
        b = h.join(instance="i-b", client="b", rebalance=6 * REBALANCE)
        await h.advance(2 * DELAY)
        leader = a.result().leader
        follower, inst = next((r.member_id, i) for r, i in ((a.result(), "i-a"),
                                                           (b.result(), "i-b"))
                              if r.member_id != leader)
        lead_inst = "i-a" if inst == "i-b" else "i-b"
        waiting = h.start(h.coordinator.sync_group("g", 1, follower, inst, None, None, {}))
        for _ in range(3):  # past the follower's session: held while it waits
            await h.advance(SESSION // 2)
            assert h.coordinator.heartbeat("g", leader, lead_inst, 1) == 0
        h.coordinator.leave_group("g", [(leader, lead_inst)])
        await h.settle()
        assert waiting.result().error == 27  # REBALANCE_IN_PROGRESS; then it crashes
        await h.advance(SESSION)
        assert follower not in h.coordinator.groups["g"].members
        assert state(h) is GroupState.EMPTY
    run(body)
