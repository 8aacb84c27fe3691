"""Authorization of the group APIs on the Kafka listener: a client without READ on a group can
neither overwrite its committed offsets nor make its members leave, the lists are filtered, and
every refusal is Kafka's GROUP_AUTHORIZATION_FAILED (or TOPIC_AUTHORIZATION_FAILED per topic),
with a real coordinator on a fake clock behind the whole codec."""

from __future__ import annotations

import asyncio
from typing import Any

from broker.kafka.codec import build, request_module
from broker.kafka.versions import ApiKey
from kraft.errors import Errors
from metadata.authorizer.model import CLUSTER_NAME, AclBinding, AclOperation
from tests.unit.test_group_apis import SESSION, Groups
from tests.unit.test_kafka_authorization import ADMIN, ALICE, CLUSTER, GROUP, TOPIC, Front, acl

A = AclOperation
BOB = "User:bob"
GROUP_DENIED = Errors.GROUP_AUTHORIZATION_FAILED
TOPIC_DENIED = Errors.TOPIC_AUTHORIZATION_FAILED


class GroupFront(Front):
    def __init__(self, *bindings: AclBinding) -> None:
        super().__init__(*bindings)
        self.groups = Groups()
        self.apis.groups = self.groups  # type: ignore[assignment]

    async def acall(self, api_key: int, version: int, principal: str = ALICE,
                    **fields: Any) -> Any:
        task = asyncio.ensure_future(super().acall(api_key, version, principal, **fields))
        for _ in range(5):  # let a join reach the coordinator, then end its (zero) delay
            await asyncio.sleep(0)
        self.groups.coordinator.tick()
        return await task


def commit(front: GroupFront, offset: int, principal: str, *, member: str = "",
           generation: int = -1) -> dict[str, int]:
    module = request_module(ApiKey.OFFSET_COMMIT, 9)
    answer = front.call(
        ApiKey.OFFSET_COMMIT, 9, principal, group_id="g", generation_id_or_member_epoch=generation,
        member_id=member, group_instance_id=None, topics=tuple(
            build(module, "OffsetCommitRequestTopic", name=name, partitions=(
                build(module, "OffsetCommitRequestPartition", partition_index=0,
                      committed_offset=offset, committed_leader_epoch=-1,
                      committed_metadata=""),)) for name in ("orders", "payments")))
    return {t.name: t.partitions[0].error_code for t in answer.topics}


def committed(front: GroupFront, principal: str = ADMIN, topics: Any = ("orders",),
              group: str = "g") -> tuple[int, dict[str, tuple[int, int]]]:
    module = request_module(ApiKey.OFFSET_FETCH, 9)
    answer = front.call(ApiKey.OFFSET_FETCH, 9, principal, require_stable=False, groups=(
        build(module, "OffsetFetchRequestGroup", group_id=group, member_id=None, member_epoch=-1,
              topics=None if topics is None else tuple(
                  build(module, "OffsetFetchRequestTopics", name=t, partition_indexes=(0,))
                  for t in topics)),))
    (entry,) = answer.groups
    return entry.error_code, {t.name: (p.error_code, p.committed_offset)
                              for t in entry.topics for p in t.partitions}


def test_offset_commit_needs_read_on_the_group_and_on_each_topic() -> None:
    front = GroupFront(acl(TOPIC, "*", A.READ))
    assert commit(front, 2, ADMIN) == {"orders": 0, "payments": 0}
    # The attack of issue 27: another group's committed offset overwritten (2 -> 999999).
    assert commit(front, 999999, ALICE) == {"orders": GROUP_DENIED, "payments": GROUP_DENIED}
    assert committed(front) == (0, {"orders": (0, 2)})
    front = GroupFront(acl(GROUP, "g", A.READ), acl(TOPIC, "orders", A.READ))
    assert commit(front, 5, ALICE) == {"orders": 0, "payments": TOPIC_DENIED}


def join(front: GroupFront, principal: str, member: str = "") -> Any:
    module = request_module(ApiKey.JOIN_GROUP, 5)
    return front.call(ApiKey.JOIN_GROUP, 5, principal, group_id="g", member_id=member,
                      session_timeout=SESSION, rebalance_timeout=SESSION,
                      group_instance_id=None, protocol_type="consumer", protocols=(
                          build(module, "JoinGroupRequestProtocol", name="range",
                                metadata=b""),))


def members(front: GroupFront) -> list[str]:
    answer = front.call(ApiKey.DESCRIBE_GROUPS, 5, ADMIN, groups=("g",),
                        include_authorized_operations=False)
    return [m.member_id for m in answer.groups[0].members]


def test_no_one_without_read_on_the_group_joins_or_makes_a_member_leave() -> None:
    front = GroupFront(acl(GROUP, "g", A.READ, principal=BOB))
    first = join(front, BOB)
    bob = join(front, BOB, first.member_id)
    assert (bob.error_code, members(front)) == (0, [first.member_id])
    assert join(front, ALICE).error_code == GROUP_DENIED
    module = request_module(ApiKey.LEAVE_GROUP, 5)
    # The attack of issue 27: a live consumer kicked out of its group with LeaveGroup.
    left = front.call(ApiKey.LEAVE_GROUP, 5, ALICE, group_id="g", members=(
        build(module, "MemberIdentity", member_id=first.member_id, group_instance_id=None,
              reason=None),))
    assert (left.error_code, left.members) == (GROUP_DENIED, ())
    beat = front.call(ApiKey.HEARTBEAT, 4, ALICE, group_id="g", generation_id=bob.generation_id,
                      member_id=first.member_id, group_instance_id=None)
    synced = front.call(ApiKey.SYNC_GROUP, 5, ALICE, group_id="g",
                        generation_id=bob.generation_id, member_id=first.member_id,
                        group_instance_id=None, protocol_type="consumer",
                        protocol_name="range", assignments=())
    assert beat.error_code == synced.error_code == GROUP_DENIED
    assert members(front) == [first.member_id]


def test_group_reads_and_deletes_are_per_group() -> None:
    front = GroupFront(acl(GROUP, "g", A.DESCRIBE), acl(GROUP, "h", A.DELETE),
                       acl(TOPIC, "*", A.READ))
    commit_module = request_module(ApiKey.OFFSET_COMMIT, 9)
    for group in ("g", "h", "k"):  # groups with a committed offset each
        front.call(ApiKey.OFFSET_COMMIT, 9, ADMIN, group_id=group,
                   generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
                   topics=(build(commit_module, "OffsetCommitRequestTopic", name="orders",
                                 partitions=(build(commit_module, "OffsetCommitRequestPartition",
                                                   partition_index=0, committed_offset=1,
                                                   committed_leader_epoch=-1,
                                                   committed_metadata=""),)),))
    described = front.call(ApiKey.DESCRIBE_GROUPS, 5, ALICE, groups=("g", "x"),
                           include_authorized_operations=True)
    assert [(d.group_id, d.error_code) for d in described.groups] == [("g", 0), ("x", GROUP_DENIED)]
    assert described.groups[0].authorized_operations == 1 << A.DESCRIBE
    listed = front.call(ApiKey.LIST_GROUPS, 4, ALICE, states_filter=())
    assert sorted(g.group_id for g in listed.groups) == ["g", "h"]  # DELETE implies DESCRIBE
    everyone = front.call(ApiKey.LIST_GROUPS, 4, ADMIN, states_filter=())
    assert sorted(g.group_id for g in everyone.groups) == ["g", "h", "k"]
    deleted = front.call(ApiKey.DELETE_GROUPS, 2, ALICE, groups_names=("g", "h"))
    assert [(r.group_id, r.error_code) for r in deleted.results] == [("g", GROUP_DENIED),
                                                                     ("h", 0)]


def test_describe_on_the_cluster_lists_every_group() -> None:
    front = GroupFront(acl(CLUSTER, CLUSTER_NAME, A.DESCRIBE))
    commit(front, 1, ADMIN)
    assert [g.group_id for g in front.call(ApiKey.LIST_GROUPS, 4, ALICE,
                                           states_filter=()).groups] == ["g"]


def test_offset_fetch_needs_describe_on_the_group_and_hides_other_topics() -> None:
    front = GroupFront(acl(TOPIC, "orders", A.DESCRIBE), acl(GROUP, "g", A.DESCRIBE))
    commit(front, 3, ADMIN)
    assert committed(front, ALICE, ("orders", "payments")) == (
        0, {"orders": (0, 3), "payments": (TOPIC_DENIED, -1)})
    assert committed(front, ALICE, None) == (0, {"orders": (0, 3)})
    assert committed(front, ALICE, None, group="other") == (GROUP_DENIED, {})


def test_find_coordinator_needs_describe_on_the_group() -> None:
    front = GroupFront(acl(GROUP, "g", A.DESCRIBE))
    found = front.call(ApiKey.FIND_COORDINATOR, 4, ALICE, key_type=0, coordinator_keys=("g", "h"))
    assert [(c.key, c.error_code) for c in found.coordinators] == [("g", 0), ("h", GROUP_DENIED)]
    old = front.call(ApiKey.FIND_COORDINATOR, 3, ALICE, key="h", key_type=0)
    assert old.error_code == GROUP_DENIED
    txn = front.call(ApiKey.FIND_COORDINATOR, 4, ALICE, key_type=1, coordinator_keys=("t",))
    assert txn.coordinators[0].error_code == 53  # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
