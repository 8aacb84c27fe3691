"""Safety invariants, checked after every simulated event.

- at most one leader per epoch (live leaders and every persisted election state);
- no node's epoch ever decreases, across restarts (except a node whose disk was wiped);
- no node's high watermark decreases within one run of its process;
- every committed offset is durable on a majority of the voter set that committed it (the
  committed set in effect there, or the committing leader's uncommitted change after it),
  counted by replica key: a node whose disk was replaced is a new replica, and what a lost
  disk held counts only up to where it held it when it was lost (a fault, not the protocol);
- the voter-set rules of kraft/sim/voter_invariants.py;
- no two nodes disagree on a committed offset, and a committed record never changes;
- a new leader's log holds every committed record;
- every append a leader reported committed is the committed record at its offset;
- a vote is granted, and a leader speaks for its epoch, only once its quorum-state store
  durably says so (a failed write must never let the grant or the leadership out);
- a snapshot covers every node's log start, a leader never loads a snapshot, and a state
  machine that loaded a snapshot agrees with every one that replayed to the same offset;
- a node starts on a log that continues its latest snapshot (S, E): the log reaches S, its
  last epoch is at least E, and the record at S-1, when the log holds it, has epoch E (a log
  left with a divergent tail past a fetched snapshot must not vote or fetch with that tail).

"Committed" is the longest prefix any node has seen below its high watermark; it is kept as one
global list of (epoch, record) that every node's log is compared against incrementally.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from kraft.core.errors import Errors
from kraft.core.messages import BeginQuorumEpochRequest, FetchResponse, VoteRequest, VoteResponse
from kraft.core.voters import ReplicaKey, VoterSet
from kraft.sim.node import SimNode
from kraft.sim.voter_invariants import CommittedVoters, VoterChecks, describe

if TYPE_CHECKING:
    from kraft.core.raft import Output
    from kraft.log.memory import MemoryLog


class SimViolation(Exception):
    def __init__(self, message: str, time_ms: int, event: int) -> None:
        self.message = message
        self.time_ms = time_ms
        self.event = event
        super().__init__(f"t={time_ms}ms event #{event}: {message}")


class CheckedCluster(Protocol):
    """What the checker reads of the cluster it checks (SimCluster), and the one count it
    keeps there (`verified_acks`)."""

    initial_voters: VoterSet
    now: int
    event_count: int
    nodes: dict[int, SimNode]
    acknowledged: dict[int, bytes]  # offset -> payload reported committed
    verified_acks: int


@dataclass
class NodeProgress:
    max_epoch: int = 0
    last_hw: int = 0
    matched: int = 0  # length of the log prefix verified equal to the committed records
    led_epoch: int = -1
    wiped: bool = False


@dataclass
class LostDisk:
    """What a disk held durably when it was lost: the committed log to `matched`, then a
    tail (its records' epochs) not committed at the time."""

    matched: int
    tail_epochs: list[int]

    def held(self, end: int, committed_epochs: list[int]) -> bool:
        """Whether it held the committed log to `end` (same epoch at end - 1, same prefix)."""
        if end <= self.matched:
            return True
        index = end - 1 - self.matched
        return index < len(self.tail_epochs) and (
            self.tail_epochs[index] == committed_epochs[end - 1]
        )


@dataclass
class InvariantChecker:
    cluster: CheckedCluster
    epochs: list[int] = field(default_factory=list)  # committed records' epochs, by offset
    records: list[bytes] = field(default_factory=list)  # committed records, by offset
    leaders: dict[int, int] = field(default_factory=dict)  # epoch -> leader id
    progress: dict[int, NodeProgress] = field(default_factory=dict)
    check_majority_durable: bool = True
    digests: dict[int, tuple[int, int]] = field(default_factory=dict)  # offset -> (digest, node)
    # Replica keys whose disk was lost -> what those disks held durably then.
    destroyed: dict[ReplicaKey, list[LostDisk]] = field(default_factory=dict)
    voter_checks: VoterChecks = field(init=False)
    committing: VoterSet | None = None  # the set that committed the current committed end
    _committing_end: int = 0

    def __post_init__(self) -> None:
        self.voter_checks = VoterChecks(CommittedVoters(self.cluster.initial_voters))

    @property
    def voters(self) -> CommittedVoters:
        return self.voter_checks.committed

    @property
    def committed_end(self) -> int:
        return len(self.records)

    def fail(self, message: str) -> None:
        raise SimViolation(message, self.cluster.now, self.cluster.event_count)

    _fail = fail

    def on_state(self, node: SimNode, offset: int, digest: int) -> None:
        """A state machine reached `offset` (by replay or by loading a snapshot)."""
        known = self.digests.setdefault(offset, (digest, node.node_id))
        if known[0] != digest:
            self.fail(
                f"node {node.node_id}'s state at offset {offset} differs from node {known[1]}'s"
            )

    def on_start(self, node: SimNode) -> None:
        p = self.progress.setdefault(node.node_id, NodeProgress())
        p.last_hw = 0
        p.matched = 0  # the log came back from its durable image: verify it again
        p.led_epoch = -1
        self._check_stands_on_snapshot(node)

    def _check_stands_on_snapshot(self, node: SimNode) -> None:
        latest = node.snapshots.latest_id()
        if latest is None or latest.offset == 0:
            return
        log = node.log
        problem = None
        if log.end_offset < latest.offset:
            problem = f"the log ends at {log.end_offset}"
        elif log.end_offset > log.start_offset and log.last_epoch < latest.epoch:
            problem = f"the log's last epoch is {log.last_epoch}"
        elif log.start_offset < latest.offset:
            before = next(iter(log.batches(latest.offset - 1, latest.offset)))
            if before.epoch != latest.epoch:
                problem = f"offset {latest.offset - 1} has epoch {before.epoch}"
        if problem is not None:
            self.fail(
                f"node {node.node_id} starts on a log that does not continue its snapshot "
                f"{latest.offset}-{latest.epoch}: {problem} (log {log.start_offset}.."
                f"{log.end_offset})"
            )

    def on_crash(self, node: SimNode) -> None:
        # The log fell back to its durable image, which may differ beyond what was flushed.
        self.progress.setdefault(node.node_id, NodeProgress()).matched = 0

    def on_wipe(self, node: SimNode) -> None:
        """Called before the disk is lost: what it held durably is remembered for its key."""
        p = self.progress.setdefault(node.node_id, NodeProgress())
        self._match_log(node, p, 0)
        matched = min(p.matched, node.log.flushed_offset)
        # Its acknowledgements of records not committed yet may still be in flight and count:
        # the epochs of that tail say, by log matching, whether it held what commits there.
        tail = [epoch for _, epoch, _, _ in _records(node.log, matched, node.log.flushed_offset)]
        self.destroyed.setdefault(node.key, []).append(LostDisk(matched, tail))
        self.progress[node.node_id] = NodeProgress(wiped=True)

    def check(self) -> None:
        for node in self.cluster.nodes.values():
            self.check_node(node)
        self._check_majority_durable()
        self._check_acknowledged()
        self.voter_checks.committed_end_before = self.committed_end

    def check_node(self, node: SimNode) -> None:
        p = self.progress.setdefault(node.node_id, NodeProgress())
        persisted = node.store.read()
        self._note_leader(persisted.epoch, persisted.leader_id, node.node_id)
        core = node.core
        epoch = max(persisted.epoch, core.epoch if core is not None else 0)
        if epoch < p.max_epoch and not p.wiped:
            self._fail(f"node {node.node_id}: epoch went back from {p.max_epoch} to {epoch}")
        p.max_epoch = max(p.max_epoch, epoch)
        if core is None:
            return
        start = node.log.start_offset
        if start > 0 and all(i.offset != start for i in node.snapshots.ids()):
            self._fail(f"node {node.node_id}: no snapshot at its log start {start}")
        if core.is_leader:
            self._note_leader(core.epoch, node.node_id, node.node_id)
        hw = core.high_watermark
        if hw < p.last_hw:
            self._fail(f"node {node.node_id}: high watermark went back from {p.last_hw} to {hw}")
        p.last_hw = hw
        self._match_log(node, p, hw)
        problem = self.voter_checks.check_node(node, self.committed_end, p.matched)
        if problem is not None:
            self._fail(problem)
        if core.is_leader and p.led_epoch != core.epoch:
            p.led_epoch = core.epoch
            if p.matched < self.committed_end:
                self._fail(
                    f"node {node.node_id} leads epoch {core.epoch} without committed offset "
                    f"{p.matched} (committed end {self.committed_end})"
                )

    def check_durable_before_sending(self, node: SimNode, out: Output) -> None:
        """Called as a node's output is about to leave, after the driver persisted it."""
        durable = node.store.read()
        for reply in out.replies:
            response, request = reply.response, node.inbound_requests.get(reply.token)
            if (
                isinstance(response, VoteResponse) and response.vote_granted
                and isinstance(request, VoteRequest) and not request.pre_vote
                and (durable.epoch, durable.voted_id)
                != (request.replica_epoch, request.replica_id)
            ):
                self._fail(
                    f"node {node.node_id} grants its epoch-{request.replica_epoch} vote to "
                    f"{request.replica_id} while its quorum state says {durable}"
                )
        leading = {
            o.request.leader_epoch for o in out.requests
            if isinstance(o.request, BeginQuorumEpochRequest)
        } | {
            r.response.leader_epoch for r in out.replies
            if isinstance(r.response, FetchResponse) and r.response.error == Errors.NONE
            and r.response.leader_id == node.node_id
        }
        for epoch in leading:
            if (durable.epoch, durable.leader_id) != (epoch, node.node_id):
                self._fail(
                    f"node {node.node_id} speaks as leader of epoch {epoch} while its quorum "
                    f"state says {durable}"
                )

    def _note_leader(self, epoch: int, leader_id: int, reporter: int) -> None:
        if leader_id < 0:
            return
        known = self.leaders.setdefault(epoch, leader_id)
        if known != leader_id:
            self._fail(f"two leaders in epoch {epoch}: {known} and {leader_id} (seen at node "
                       f"{reporter})")

    def _match_log(self, node: SimNode, p: NodeProgress, hw: int) -> None:
        log = node.log
        end = log.end_offset
        if end < p.matched:
            p.matched = end  # truncated: the verified prefix shrinks with it
        # Below the log start a snapshot stands for the records (its state is checked apart).
        p.matched = max(p.matched, min(log.start_offset, self.committed_end))
        limit = min(end, self.committed_end)
        if p.matched < limit:
            for offset, epoch, record, _ in _records(log, p.matched, limit):
                if self.epochs[offset] != epoch or self.records[offset] != record:
                    if offset < hw:
                        self._fail(
                            f"node {node.node_id} disagrees on committed offset {offset}: "
                            f"epoch {epoch} vs committed epoch {self.epochs[offset]}"
                        )
                    return  # an uncommitted divergent tail; it will be truncated
                p.matched = offset + 1
        if hw > self.committed_end:
            if p.matched < self.committed_end:
                self._fail(f"node {node.node_id} commits past a record it does not match")
            for offset, epoch, record, control in _records(log, self.committed_end, hw):
                assert offset == len(self.records)
                self.epochs.append(epoch)
                self.records.append(record)
                problem = self.voters.on_committed(offset, record) if control else None
                if problem is not None:
                    self._fail(problem)
            p.matched = hw

    def _check_majority_durable(self) -> None:
        if not self.check_majority_durable or not self.records:
            return
        end = self.committed_end
        if end != self._committing_end or self.committing is None:
            # Newly committed: find the set that committed it, and hold it to that set.
            leaders = [n for n in self.cluster.nodes.values()
                       if n.core is not None and n.core.is_leader]
            candidates = self.voter_checks.committing_sets(end, leaders)
            counts = [self._durable_on(voters, end) for voters in candidates]
            chosen = next((i for i, (voters, count) in enumerate(zip(candidates, counts,
                                                                      strict=True))
                           if count >= voters.majority), None)
            if chosen is None:
                self._fail(
                    f"committed offset {end - 1} is durable on only {counts[0]} of the voters "
                    f"{describe(candidates[0])}"
                    + "".join(f" (on {c} of {describe(v)})"
                              for v, c in zip(candidates[1:], counts[1:], strict=True))
                )
                return
            self.committing, self._committing_end = candidates[chosen], end
            return
        durable = self._durable_on(self.committing, end)
        if durable < self.committing.majority:
            self._fail(f"committed offset {end - 1} is durable on only {durable} of the voters "
                       f"{describe(self.committing)} that committed it")

    def _durable_on(self, voters: VoterSet, end: int) -> int:
        """How many replicas of `voters` hold the committed log to `end` durably: by replica
        key (a replaced disk is another replica), a lost disk up to where it held it."""
        durable = 0
        for voter in voters:
            node = self.cluster.nodes.get(voter.node_id)
            p = self.progress.get(voter.node_id)
            same = node is not None and (
                not voter.key.directory_id or voter.key.directory_id == node.directory_id
            )
            if node is not None and p is not None and same:
                if min(p.matched, node.log.flushed_offset) < end <= node.log.flushed_offset:
                    self._match_log(node, p, 0)  # not verified yet (it just restarted)
                if min(p.matched, node.log.flushed_offset) >= end:
                    durable += 1
                    continue
            if any(disk.held(end, self.epochs) for disk in self.destroyed.get(voter.key, ())):
                durable += 1
        return durable

    def _check_acknowledged(self) -> None:
        acknowledged = self.cluster.acknowledged
        if not acknowledged:
            return
        for offset in list(acknowledged):
            if offset >= self.committed_end:
                self._fail(f"append at offset {offset} acknowledged beyond the committed end")
            if self.records[offset] != acknowledged.pop(offset):
                self._fail(f"acknowledged append at offset {offset} is not the committed record")
            self.cluster.verified_acks += 1


def _records(log: MemoryLog, start: int, end: int) -> Iterator[tuple[int, int, bytes, bool]]:
    """(offset, epoch, record, control) for offsets in [start, end)."""
    for batch in log.batches(start, end):
        for i, record in enumerate(batch.records):
            offset = batch.base_offset + i
            if start <= offset < end:
                yield offset, batch.epoch, record, batch.control
