"""Partition: this broker's replica of one partition — leader or follower, and, on the leader,
the ISR, each follower's progress and the high watermark (reference/kafka-data-plane.md §3–4).

It holds no sockets, tasks or clocks: the replica manager passes the time in, calls it on
metadata, appends and follower fetches, and acts on what it returns (wake waiters, send an
AlterPartition). The log is the only I/O, and only through PartitionLog.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from broker.log.partition_log import LeaderAppend, PartitionLog
from kraft.errors import Errors
from metadata.image import PartitionRegistration
from metadata.records import NO_LEADER, LeaderRecoveryState


class NotLeader(Exception):
    """This broker does not lead the partition (NOT_LEADER_OR_FOLLOWER)."""


class NotEnoughReplicas(Exception):
    """acks=all while the ISR is below min.insync.replicas: nothing was written."""


@dataclass
class FollowerState:
    """What the leader knows of one follower (Kafka's Replica)."""

    leo: int = -1  # unknown until it fetches in this leader epoch
    log_start: int = -1
    last_caught_up_ms: int = 0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: int = 0
    broker_epoch: int = -1  # the follower's broker epoch as its fetches carry it (KIP-903)

    def on_fetch(self, fetch_offset: int, log_start: int, leader_leo: int, now_ms: int) -> None:
        """Kafka's Replica.updateFetchStateOrThrow: `leader_leo` is the leader's LEO before
        the read. A follower that keeps fetching, each time reaching what the leader held at
        its previous fetch, stays caught up even if it never equals the LEO (scenario 7)."""
        if fetch_offset >= leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_leo:
            self.last_caught_up_ms = max(self.last_caught_up_ms, self.last_fetch_ms)
        self.leo = fetch_offset
        self.log_start = log_start
        self.last_fetch_leader_leo = max(leader_leo, self.last_fetch_leader_leo)
        self.last_fetch_ms = now_ms

    def is_caught_up(self, leader_leo: int, now_ms: int, lag_ms: int) -> bool:
        return self.leo == leader_leo or now_ms - self.last_caught_up_ms <= lag_ms


@dataclass(frozen=True, slots=True)
class IsrChange:
    """An AlterPartition this leader wants sent: the ISR it proposes, for this version."""

    isr: tuple[int, ...]
    leader_epoch: int
    partition_epoch: int
    leader_recovery_state: int = LeaderRecoveryState.RECOVERED
    # Each member's broker epoch as this leader saw it in its fetches (-1: not checked), so a
    # replica that came back with an empty disk under a new epoch cannot ride in (KIP-903).
    broker_epochs: tuple[int, ...] = field(default=(), compare=False)


class Partition:
    def __init__(self, log: PartitionLog, broker_id: int, high_watermark: int) -> None:
        self.log = log
        self.broker_id = broker_id
        self.topic = log.topic
        self.partition = log.partition
        self.leader = NO_LEADER
        self.leader_epoch = -1
        self.partition_epoch = -1
        self.replicas: tuple[int, ...] = ()
        self.isr: tuple[int, ...] = ()  # committed: what the metadata says
        self.pending_isr: tuple[int, ...] | None = None  # an AlterPartition is in flight
        self.leader_recovery_state: int = LeaderRecoveryState.RECOVERED
        self.leader_epoch_start_offset = -1
        self.followers: dict[int, FollowerState] = {}
        self.high_watermark = min(max(high_watermark, log.start_offset), log.end_offset)

    # -- roles -----------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        return self.leader == self.broker_id

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        """The ISR for the HW and acks=all: committed ∪ proposed while a change is in flight,
        the stricter set whichever way the controller answers (KIP-497)."""
        if self.pending_isr is None:
            return self.isr
        return self.isr + tuple(r for r in self.pending_isr if r not in self.isr)

    def is_stale(self, registration: PartitionRegistration) -> bool:
        return registration.partition_epoch < self.partition_epoch

    def make_leader(self, registration: PartitionRegistration, now_ms: int) -> bool:
        """Kafka's Partition.makeLeader; True if this starts a new leader epoch."""
        new_epoch = not self.is_leader or registration.leader_epoch > self.leader_epoch
        was_leader = self.is_leader
        self._adopt(registration)
        self.pending_isr = None
        if new_epoch:
            # Even with no record written in it, the epoch starts here (KAFKA-7415), so a
            # follower diverging from us truncates to the right point.
            self.log.assign_epoch(registration.leader_epoch, self.log.end_offset)
            self.leader_epoch_start_offset = self.log.end_offset
            old = self.followers
            self.followers = {}
            for replica in self.replicas:
                if replica == self.broker_id:
                    continue
                state = FollowerState(last_caught_up_ms=now_ms if replica in self.isr else 0)
                if was_leader and replica in old:
                    state.leo = old[replica].leo
                self.followers[replica] = state
        else:
            for replica in self.replicas:
                if replica != self.broker_id and replica not in self.followers:
                    self.followers[replica] = FollowerState()
            for gone in [r for r in self.followers if r not in self.replicas]:
                del self.followers[gone]
        return new_epoch

    def make_follower(self, registration: PartitionRegistration) -> bool:
        """Kafka's Partition.makeFollower; True if the leader or its epoch changed, so the
        fetcher must start over for this partition."""
        changed = (registration.leader != self.leader
                   or registration.leader_epoch != self.leader_epoch)
        self._adopt(registration)
        self.pending_isr = None
        self.followers = {}
        return changed

    def _adopt(self, registration: PartitionRegistration) -> None:
        self.leader = registration.leader
        self.leader_epoch = registration.leader_epoch
        self.partition_epoch = registration.partition_epoch
        self.replicas = registration.replicas
        self.isr = registration.isr
        self.leader_recovery_state = registration.leader_recovery_state

    # -- the leader's side -----------------------------------------------------------------

    def append_as_leader(
        self, batch: bytes, acks: int, min_isr: int, now_ms: int
    ) -> LeaderAppend:
        if not self.is_leader:
            raise NotLeader()
        if acks == -1 and len(self.isr) < self.effective_min_isr(min_isr):
            raise NotEnoughReplicas(
                f"the ISR of {self.topic}-{self.partition} has {len(self.isr)} member(s), "
                f"fewer than min.insync.replicas={min_isr}")
        return self.log.append_as_leader(batch, self.leader_epoch, now_ms)

    def effective_min_isr(self, min_isr: int) -> int:
        return max(1, min(min_isr, len(self.replicas)))

    def check_enough_replicas(self, required_offset: int, min_isr: int) -> int | None:
        """For a parked acks=all produce: NONE once the HW has passed `required_offset`
        (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR fell below min meanwhile), None while
        it must wait."""
        if not self.is_leader:
            return Errors.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark < required_offset:
            return None
        if len(self.maximal_isr) < self.effective_min_isr(min_isr):
            return Errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return Errors.NONE

    def maybe_increment_hw(self, min_isr: int, now_ms: int, lag_ms: int,
                           eligible: Callable[[int], bool]) -> bool:
        """Kafka's maybeIncrementLeaderHW: the smallest LEO among the leader, the maximal ISR
        and caught-up eligible replicas; frozen while the ISR is below min ISR (KIP-966);
        never backwards. True if it moved."""
        if not self.is_leader or len(self.isr) < self.effective_min_isr(min_isr):
            return False
        leo = self.log.end_offset
        new_hw = leo
        maximal = self.maximal_isr
        for replica, state in self.followers.items():
            if replica in maximal or (state.leo >= 0 and eligible(replica)
                                      and state.is_caught_up(leo, now_ms, lag_ms)):
                new_hw = min(new_hw, state.leo)
        if new_hw > self.high_watermark:
            self.high_watermark = new_hw
            return True
        return False

    def update_follower(self, replica: int, fetch_offset: int, log_start: int,
                        leader_leo: int, now_ms: int, broker_epoch: int = -1) -> None:
        state = self.followers.get(replica)
        if state is not None:
            state.on_fetch(fetch_offset, log_start, leader_leo, now_ms)
            state.broker_epoch = broker_epoch

    def _change(self, isr: tuple[int, ...],
                leader_recovery_state: int = LeaderRecoveryState.RECOVERED) -> IsrChange:
        epochs = tuple(-1 if (state := self.followers.get(r)) is None else state.broker_epoch
                       for r in isr)
        return IsrChange(isr, self.leader_epoch, self.partition_epoch, leader_recovery_state,
                         epochs)

    def isr_to_shrink(self, now_ms: int, lag_ms: int) -> IsrChange | None:
        """The ISR without followers that have not caught up within lag_ms (Kafka's
        maybeShrinkIsr), or None. Skipped while a change is in flight."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        leo = self.log.end_offset
        keep = tuple(r for r in self.isr if r == self.broker_id or (
            (state := self.followers.get(r)) is not None
            and state.is_caught_up(leo, now_ms, lag_ms)))
        if keep == self.isr:
            return None
        return self._change(keep)

    def isr_to_expand(self, replica: int, eligible: Callable[[int], bool]) -> IsrChange | None:
        """The ISR with `replica` added once it holds everything below the HW and the current
        epoch's start (KAFKA-7128), or None."""
        if (not self.is_leader or self.pending_isr is not None or replica in self.isr
                or replica not in self.replicas or self.is_recovering or not eligible(replica)):
            return None
        state = self.followers.get(replica)
        if state is None or state.leo < self.high_watermark \
                or state.leo < self.leader_epoch_start_offset:
            return None
        isr = tuple(r for r in self.replicas if r in self.isr or r == replica)
        return self._change(isr)

    def recovery_change(self) -> IsrChange | None:
        """After an unclean election the leader's log is the truth: say so (RECOVERED, ISR =
        the leader alone) before anyone joins the ISR."""
        if not self.is_leader or not self.is_recovering or self.pending_isr is not None:
            return None
        return self._change((self.broker_id,), LeaderRecoveryState.RECOVERED)

    @property
    def is_recovering(self) -> bool:
        return self.leader_recovery_state == LeaderRecoveryState.RECOVERING

    def begin_isr_change(self, change: IsrChange) -> None:
        self.pending_isr = change.isr

    def abandon_isr_change(self) -> None:
        """The controller certainly did not apply it: back to the committed state."""
        self.pending_isr = None

    def complete_isr_change(self, leader_epoch: int, isr: tuple[int, ...],
                            partition_epoch: int, leader_recovery_state: int) -> bool:
        """A successful AlterPartition answer; False if newer metadata overtook it."""
        if leader_epoch != self.leader_epoch or partition_epoch < self.partition_epoch:
            return False
        self.isr = isr
        self.partition_epoch = partition_epoch
        self.leader_recovery_state = leader_recovery_state
        self.pending_isr = None
        return True

    # -- the follower's side ---------------------------------------------------------------

    def follower_high_watermark(self, leader_hw: int) -> None:
        """A follower learns the HW from each fetch answer, capped by what it holds."""
        self.high_watermark = max(self.log.start_offset, min(leader_hw, self.log.end_offset))

    def truncate_to(self, offset: int) -> tuple[int, int]:
        """Cut the log at `offset`; returns (records removed, of which below the HW): the
        second are committed records lost, which only an unclean election causes. (After a
        restart the HW is the checkpointed one, which may lag: a lower bound.)"""
        end_before = self.log.end_offset
        committed_before = min(self.high_watermark, end_before)
        self.log.truncate_to(offset)
        end = self.log.end_offset  # whole batches go: the cut may land below `offset`
        self.high_watermark = min(self.high_watermark, end)
        return max(0, end_before - end), max(0, committed_before - end)

    def __repr__(self) -> str:
        role = "leader" if self.is_leader else f"follower of {self.leader}"
        return (f"Partition({self.topic}-{self.partition}, {role}, epoch {self.leader_epoch}, "
                f"isr {list(self.isr)}, hw {self.high_watermark}, leo {self.log.end_offset})")
