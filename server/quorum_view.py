"""What one node knows when no leader answers (kraft-admin quorum describe): its state, the
last leader and epoch it knows, and which voters it cannot reach, from its NodeStatus.

A voter counts as unreachable when the node's latest request to it failed (refused, reset or
unanswered) within the last FRESH_MS and nothing was heard from it since. When the voters the
node can still reach (itself included) are fewer than a majority, no leader can be elected
until some come back: waiting longer tells the operator nothing more."""

from __future__ import annotations

from dataclasses import dataclass

from kraft.rpc import raft_pb2 as pb

# A voter without a leader sends pre-votes to every other voter at least once per election
# timeout plus backoff (about 2 s by default): a failure older than this is old news.
FRESH_MS = 10_000


@dataclass(frozen=True)
class NodeView:
    endpoint: str  # where the node was asked
    status: pb.NodeStatusResponse

    @property
    def unreachable(self) -> list[pb.VoterContact]:
        return [v for v in self.status.voters
                if 0 <= v.failed_ms_ago <= FRESH_MS
                and (v.heard_ms_ago < 0 or v.failed_ms_ago < v.heard_ms_ago)]

    @property
    def voter_count(self) -> int:
        return len(self.status.voters) + (1 if self.status.is_voter else 0)

    @property
    def reachable_count(self) -> int:
        return self.voter_count - len(self.unreachable)

    @property
    def majority_lost(self) -> bool:
        return self.voter_count > 0 and self.reachable_count <= self.voter_count // 2

    def facts(self) -> dict[str, object]:
        """The `--json` shape: the node's view, camelCase as the rest of kraft-admin's JSON."""
        s = self.status
        return {
            "nodeId": s.node_id, "endpoint": self.endpoint, "state": s.state,
            "epoch": s.epoch, "lastLeaderId": s.leader_id,
            "lastLeaderEndpoint": s.leader_endpoint or None,
            "highWatermark": s.high_watermark, "logEndOffset": s.log_end_offset,
            "voters": self.voter_count, "reachableVoters": self.reachable_count,
            "unreachableVoters": [
                {"id": v.voter_id, "endpoint": v.endpoint, "failure": v.failure,
                 "failedMsAgo": v.failed_ms_ago, "lastHeardMsAgo": v.heard_ms_ago}
                for v in self.unreachable],
        }

    def text(self) -> str:
        """One line: the node's state, last leader, the voters it cannot reach."""
        s = self.status
        leader = (f"last leader {s.leader_id}"
                  + (f" at {s.leader_endpoint}" if s.leader_endpoint else "")
                  if s.leader_id >= 0 else "no leader known")
        line = (f"node {s.node_id} at {self.endpoint} is {s.state} in epoch {s.epoch}, "
                f"{leader}, high watermark {s.high_watermark}")
        unreachable = self.unreachable
        if unreachable:
            voters = ", ".join(
                f"{v.voter_id} at {v.endpoint} ({v.failure}, {v.failed_ms_ago / 1000:.1f} s ago)"
                for v in unreachable)
            line += f"; it cannot reach voter{'s' if len(unreachable) > 1 else ''} {voters}"
        if self.majority_lost:
            line += (f": {self.reachable_count} of {self.voter_count} voters reachable, a "
                     f"majority needs {self.voter_count // 2 + 1}; no leader can be elected "
                     "until enough voters are back")
        return line
