"""The voter-set invariants (KIP-853), checked with the others after every simulated event.

The checker keeps its own history of the committed voter sets, decoded from the committed
records themselves (it does not take the core's word for them), starting from the initial set
(the static one, or the bootstrap snapshot's at offset -1). Against it:

- every committed change adds or removes at most one voter, and so does every change in a
  node's own (possibly uncommitted) history;
- a node's log holds at most one uncommitted change, and a change appears only once the
  change before it committed, in an earlier event (a change is admitted only once the
  previous one committed), and a leader appends a change only once an entry of its own epoch
  is committed (the rule that keeps a new leader from stacking a change on an older leader's
  uncommitted one);
- a committed change is never lost: every node holding the whole committed log uses, at the
  committed end, the set the committed records say;
- a change the operator was told had succeeded is committed.

The durability of committed records is checked by InvariantChecker against the set that
committed them (`committing_sets`).
"""

from __future__ import annotations

import bisect
import itertools
from dataclasses import dataclass, field

from kraft.core.leader import LeaderState
from kraft.core.voters import ReplicaKey, VoterSet
from kraft.log.codec import KRAFT_VOTERS, decode_control_record
from kraft.sim.node import SimNode


def changed_keys(before: VoterSet, after: VoterSet) -> tuple[set[ReplicaKey], set[ReplicaKey]]:
    """(added, removed) replica keys."""
    old = {n.key for n in before}
    new = {n.key for n in after}
    return new - old, old - new


def describe(voters: VoterSet) -> str:
    return "{" + ", ".join(str(n.key) for n in voters) + "}"


@dataclass
class CommittedVoters:
    """The committed voter sets by offset, from the committed records."""

    initial: VoterSet
    offsets: list[int] = field(default_factory=lambda: [-1])
    sets: list[VoterSet] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sets.append(self.initial)

    def latest_committed(self) -> VoterSet:
        return self.sets[-1]

    def set_at(self, offset: int) -> VoterSet:
        return self.sets[bisect.bisect_right(self.offsets, offset) - 1]

    def on_committed(self, offset: int, record: bytes) -> str | None:
        """A committed control record; the problem when it breaks the history rule."""
        kind, body = decode_control_record(record)
        if kind != KRAFT_VOTERS:
            return None
        voters = VoterSet.from_record(body)
        added, removed = changed_keys(self.sets[-1], voters)
        self.offsets.append(offset)
        self.sets.append(voters)
        if len(added) + len(removed) > 1:
            return (
                f"the committed voter set jumps by more than one voter at offset {offset}: "
                f"{describe(self.sets[-2])} -> {describe(voters)}"
            )
        return None

    def change_committed_since(self, index: int, key: ReplicaKey, add: bool) -> bool:
        """Whether an entry after `index` added (`add`) or removed `key`."""
        for i in range(max(index, 0) + 1, len(self.sets)):
            before, after = self.sets[i - 1].is_voter(key), self.sets[i].is_voter(key)
            if (add and after and not before) or (not add and before and not after):
                return True
        return False


@dataclass
class _NodeSeen:
    latest: tuple[int | None, int] = (None, 0)  # (latest offset, id of the set): the cache key
    changes: set[tuple[int, frozenset[ReplicaKey]]] = field(default_factory=set)


@dataclass
class VoterChecks:
    committed: CommittedVoters
    seen: dict[int, _NodeSeen] = field(default_factory=dict)
    # The committed end as of the end of the previous event: a change that appears in an
    # event must find the change before it committed by then, not by the same event (a
    # change counted on the next change's set would commit with it).
    committed_end_before: int = 0

    def check_node(self, node: SimNode, committed_end: int, matched: int) -> str | None:
        """A live node's voter history against the rules; the problem, if any."""
        core = node.core
        assert core is not None
        history = core.voter_history
        if matched >= committed_end > 0:
            mine = history.set_at(committed_end - 1)
            theirs = self.committed.set_at(committed_end - 1)
            if _entries(mine) != _entries(theirs):
                return (
                    f"node {node.node_id} holds the committed log to {committed_end} but uses "
                    f"{describe(mine)} there; the committed records say {describe(theirs)} "
                    "(a committed voter change was lost)"
                )
        seen = self.seen.setdefault(node.node_id, _NodeSeen())
        key = (history.latest_offset(), id(history.latest()))
        if key == seen.latest:
            return None
        seen.latest = key
        entries = history.entries()
        changes: list[int] = []  # offsets of the changes in the history, in order
        for (_, before), (offset, after) in itertools.pairwise(entries):
            added, removed = changed_keys(before, after)
            if not added and not removed:
                continue  # a restatement (a new leader's epoch-start batch) or an update
            if offset >= 0 and len(added) + len(removed) > 1:
                return (
                    f"node {node.node_id}'s voter set jumps by more than one voter at offset "
                    f"{offset}: {describe(before)} -> {describe(after)}"
                )
            new = (offset, frozenset(n.key for n in after))
            if new not in seen.changes:
                seen.changes.add(new)
                if changes and changes[-1] >= self.committed_end_before:
                    return (
                        f"node {node.node_id}'s log has a voter change at offset {offset} "
                        f"({describe(after)}) while the change before it, at offset "
                        f"{changes[-1]}, was not committed (committed end "
                        f"{self.committed_end_before}): a change was admitted before the "
                        "previous one committed"
                    )
            changes.append(offset)
        uncommitted = [o for o in changes if o >= committed_end]
        if len(uncommitted) > 1:
            return (
                f"node {node.node_id}'s log holds {len(uncommitted)} uncommitted voter "
                f"changes (at offsets {uncommitted}; committed end {committed_end}): a "
                "change was admitted before the previous one committed"
            )
        state = core.state
        if (isinstance(state, LeaderState) and uncommitted
                and uncommitted[0] > state.epoch_start_offset
                and committed_end <= state.epoch_start_offset):
            return (
                f"leader {node.node_id} of epoch {state.epoch} appended a voter change at "
                f"offset {uncommitted[0]} before any entry of its epoch committed (epoch start "
                f"{state.epoch_start_offset}, committed end {committed_end})"
            )
        return None

    def committing_sets(self, committed_end: int, leaders: list[SimNode]) -> list[VoterSet]:
        """The sets that may have committed offset `committed_end - 1`: the committed one in
        effect there, or a leader's uncommitted change after it (the HW is counted on the
        latest set, committed or not)."""
        sets = [self.committed.set_at(committed_end - 1)]
        for leader in leaders:
            assert leader.core is not None
            history = leader.core.voter_history
            latest = history.latest_offset()
            if latest is not None and latest >= committed_end and history.latest() not in sets:
                sets.append(history.latest())
        return sets


def _entries(voters: VoterSet) -> dict[ReplicaKey, str]:
    return {n.key: n.endpoint for n in voters}
