"""A deterministic cluster: N voters and M observers running the real RaftCore over in-memory
logs, a virtual clock and a lossy network, all driven by one seeded RNG.

Events sit in one heap ordered by (time, sequence number), so a seed replays exactly
(kraft/sim/events.py). After every event the invariant checker runs (kraft/sim/invariants.py);
the first violation stops the run with its time and event number. A node's process and
storage are a `SimNode` (kraft/sim/node.py), the network's fates a `SimNetwork`.

A `dynamic` cluster (KIP-853) has no static voters: every node has a directory id, the first
`voters` nodes are formatted with a bootstrap snapshot holding the initial voter set (as
`kraft-storage format --standalone` or `--initial-controllers` writes it), the next `joiners`
are controllers formatted without one (they start as observers and may be added), and every
node finds the leader through its bootstrap servers. A wiped disk comes back with a new
directory id and no bootstrap snapshot. Clients (kraft/sim/membership.py's operator) talk to
the nodes over the same network under ids of their own.
"""

from __future__ import annotations

import base64
import dataclasses
import heapq
import random
from typing import Protocol

from kraft.core.config import RaftConfig
from kraft.core.errors import NotLeaderError, RaftError
from kraft.core.messages import (
    FetchRequest,
    OutboundRequest,
    Request,
    Response,
)
from kraft.core.raft import RaftCore
from kraft.core.states import ProspectiveState
from kraft.core.voters import VoterNode, VoterSet, bootstrap_control_records
from kraft.log.base import CorruptRecordError, FlushJob, OffsetAndEpoch, SnapshotJob
from kraft.log.snapshot_format import BOOTSTRAP_SNAPSHOT_ID
from kraft.log.snapshots import align_log_with_snapshots
from kraft.sim.events import EventLoop
from kraft.sim.faults import FaultyQuorumStateStore, NodeClock
from kraft.sim.invariants import InvariantChecker, SimViolation
from kraft.sim.network import NetworkProfile, SimNetwork
from kraft.sim.node import PendingAppend, SimNode, SimTiming, endpoint, snapshot_voters
from kraft.sim.power_loss import torn_writes
from kraft.sim.state_machine import SimStateMachine


class SimClient(Protocol):
    """Something outside the quorum that sends requests to nodes (an admin client)."""

    def on_response(self, correlation_id: int, response: Response) -> None: ...

    def on_failure(self, correlation_id: int) -> None: ...


class SimCluster(EventLoop):
    # The driver rule for a failed quorum-state write: the node stops (True). False models the
    # driver before the fix (the step's output is lost, the node runs on); it exists so that a
    # test can show the checker catches what that driver allowed.
    stop_on_store_failure = True

    def __init__(
        self,
        seed: int,
        voters: int = 3,
        observers: int = 0,
        timing: SimTiming | None = None,
        network: NetworkProfile | None = None,
        clock_drift: float = 0.0,
        dynamic: bool = False,
        joiners: int = 0,
    ) -> None:
        """`clock_drift`: each node's timers run at a rate drawn from [1 - d, 1 + d].
        `dynamic`: the voter set lives in the log (KIP-853), see the module docstring;
        `joiners` controllers start as observers (dynamic clusters only)."""
        if joiners and not dynamic:
            raise ValueError("only a dynamic cluster has joining controllers")
        super().__init__()
        self.seed = seed
        self.rng = random.Random(seed)
        # Directory ids come from their own RNG: the protocol's random choices stay the same.
        self._directory_rng = random.Random(f"directory-ids-{seed}")
        self.dynamic = dynamic
        self.timing = timing or SimTiming()
        self.network = SimNetwork(random.Random(self.rng.random()), network or NetworkProfile())
        voter_ids = list(range(1, voters + 1))
        self.controller_ids = frozenset(range(1, voters + joiners + 1))
        broker_ids = range(voters + joiners + 1, voters + joiners + observers + 1)
        self.nodes: dict[int, SimNode] = {}
        self._by_endpoint = {endpoint(i): i for i in [*self.controller_ids, *broker_ids]}
        for node_id in [*sorted(self.controller_ids), *broker_ids]:
            directory_id = self.new_directory_id() if dynamic else ""
            config = RaftConfig(
                cluster_id="sim-cluster",
                node_id=node_id,
                voters={} if dynamic else {v: endpoint(v) for v in voter_ids},
                local_endpoint=endpoint(node_id),
                bootstrap=self._bootstrap_servers(node_id) if dynamic else (),
                directory_id=directory_id,
                controller=node_id in self.controller_ids,
                election_timeout_ms=self.timing.election_timeout_ms,
                fetch_timeout_ms=self.timing.fetch_timeout_ms,
                request_timeout_ms=self.timing.request_timeout_ms,
                fetch_max_wait_ms=self.timing.fetch_max_wait_ms,
            )
            rate = 1.0 + self.rng.uniform(-clock_drift, clock_drift) if clock_drift else 1.0
            self.nodes[node_id] = SimNode(
                node_id, config, clock=NodeClock(rate), directory_id=directory_id
            )
        if dynamic:
            self.initial_voters = VoterSet.of(
                VoterNode(self.nodes[v].key, endpoint(v)) for v in voter_ids
            )
            for v in voter_ids:  # kraft-storage format --initial-controllers (or --standalone)
                self.nodes[v].snapshots.builder(
                    BOOTSTRAP_SNAPSHOT_ID, 0,
                    control_records=bootstrap_control_records(self.initial_voters),
                ).freeze()
        else:
            self.initial_voters = VoterSet.static({v: endpoint(v) for v in voter_ids})
        self.admin_clients: dict[int, SimClient] = {}
        self.checker = InvariantChecker(self)
        self.acknowledged: dict[int, bytes] = {}  # offset -> payload reported committed
        self.verified_acks = 0  # acknowledged appends found committed
        self._append_seq = 0
        self.refused: set[tuple[int, int]] = set()  # (source, destination): connect refused
        self.fetch_resets = 0
        self.power_losses = 0
        # Nodes that crash right after their next snapshot load (before the step's flush).
        self.crash_after_snapshot_load: set[int] = set()
        self.crashes_after_snapshot_load = 0

    def new_directory_id(self) -> str:
        """A Kafka Uuid (22 characters of unpadded URL-safe base64), drawn from the seed."""
        while True:
            text = base64.urlsafe_b64encode(
                self._directory_rng.getrandbits(128).to_bytes(16, "big")
            ).decode().rstrip("=")
            if not text.startswith("-") and text not in ("AAAAAAAAAAAAAAAAAAAAAA",
                                                          "AAAAAAAAAAAAAAAAAAAAAQ"):
                return text

    def _bootstrap_servers(self, node_id: int) -> tuple[tuple[int, str], ...]:
        """controller.quorum.bootstrap.servers: every controller but the node itself."""
        others = [c for c in sorted(self.controller_ids) if c != node_id]
        return tuple((-2 - i, endpoint(c)) for i, c in enumerate(others))

    @property
    def voter_ids(self) -> frozenset[int]:
        """The ids of the latest committed voter set (the static set in a static cluster)."""
        return self.checker.voters.latest_committed().ids

    # -- node lifecycle ------------------------------------------------------------------------

    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.alive:
            return
        node.incarnation += 1
        node.tick_at = float("inf")
        node.flush_job = None
        node.snapshot_jobs.clear()
        node.inbound.clear()
        node.inbound_requests.clear()
        node.pending_appends.clear()
        node.last_state = None
        try:
            node.log.reopen()  # recovery of what a power loss left past the durable image
        except CorruptRecordError as exc:
            raise SimViolation(f"node {node_id} refuses to open its log: {exc}", self.now,
                               self.event_count) from None
        align_log_with_snapshots(node.log, node.snapshots)
        node.core = RaftCore(
            node.config, node.log, node.store.read(), node.clock.local(self.now),
            random.Random(self.rng.random()), node.snapshots,
            snapshot_voters=snapshot_voters(node),
        )
        # As the real driver does: the state machine starts from the newest snapshot (before
        # the first step: a lone voter may lead already, and a leader loads no snapshot later).
        node.state_machine = SimStateMachine()
        latest = node.snapshots.latest_id()
        if latest is not None:
            node.state_machine.load(node.snapshots, latest)
            self.checker.on_state(node, node.state_machine.applied, node.state_machine.digest)
        self.checker.on_start(node)
        self._drain(node)

    def start_all(self) -> None:
        """Start every stopped node; a node still in a graceful shutdown finishes it first, as
        a real process does when its shutdown timeout expires."""
        for node in self.nodes.values():
            if node.core is not None and node.core.shutting_down:
                self._stop_gracefully(node)
        for node_id in sorted(self.nodes):
            self.start(node_id)

    def crash(self, node_id: int, power_loss: bool = False) -> None:
        """kill -9: every unflushed byte is lost; peers see their connections reset. With
        `power_loss`, the bytes of the flush job in flight reach the disk torn, zeroed or
        garbled (kraft/sim/power_loss.py), for the next start's recovery to sort out."""
        node = self.nodes[node_id]
        if not node.alive:
            return
        node.core = None
        node.incarnation += 1
        if power_loss:
            self.power_losses += 1
            node.log.crash(torn_writes(random.Random(self.rng.random())))
        else:
            node.log.crash()
        node.snapshots.crash()
        self.checker.on_crash(node)
        node.flush_job = None
        node.snapshot_jobs.clear()  # a partial file is lost; a frozen one is durable
        node.tick_at = float("inf")
        node.pending_appends.clear()
        for source, source_inc, cid in node.inbound.values():
            self._send_failure(node_id, source, source_inc, cid)
        node.inbound.clear()
        node.inbound_requests.clear()

    def wipe(self, node_id: int) -> None:
        """The loss of a node's whole disk (it must be down). In a dynamic cluster the new
        disk is formatted with `--no-initial-controllers`: a new directory id, no bootstrap
        snapshot, so the node is a new replica that starts as an observer."""
        node = self.nodes[node_id]
        assert not node.alive
        self.checker.on_wipe(node)
        node.log.wipe()
        node.snapshots.wipe()
        node.store = FaultyQuorumStateStore()
        if self.dynamic:
            node.directory_id = self.new_directory_id()
            node.config = dataclasses.replace(node.config, directory_id=node.directory_id)

    def shutdown(self, node_id: int) -> None:
        """SIGTERM: begin a graceful shutdown; the node stops once it may."""
        node = self.nodes[node_id]
        if node.core is None:
            return
        node.core.begin_shutdown(node.clock.local(self.now))
        self._drain(node)

    def give_up_shutdown(self, node_id: int) -> None:
        """The driver's shutdown timeout ran out (server/main.py's SHUTDOWN_TIMEOUT_S): a node
        still shutting down stops anyway, after its last flush, as the real process exits. A
        voter waiting for a leader that no one can elect (every voter shutting down) would
        otherwise wait forever."""
        node = self.nodes[node_id]
        if node.core is not None and node.core.shutting_down:
            self._stop_gracefully(node)

    # -- faults ----------------------------------------------------------------------------------

    def reset_fetch_streams(self, leader_id: int) -> int:
        """A transient reset of every Fetch stream parked at `leader_id` (a middlebox RST, a
        conntrack flush): each fetcher sees its connection reset, the leader lives on and its
        late answers are lost. Returns how many streams were reset."""
        node = self.nodes[leader_id]
        reset = 0
        for token, request in list(node.inbound_requests.items()):
            if not isinstance(request, FetchRequest):
                continue
            source, source_inc, cid = node.inbound.pop(token)
            del node.inbound_requests[token]
            self._refuse(source, source_inc, cid)
            reset += 1
        self.fetch_resets += reset
        return reset

    def _refuse(self, source: int, source_inc: int, cid: int) -> None:
        """The sender learns, one network delay later, that its connection was refused or
        reset (delivered as `unreachable`)."""
        delay = self.rng.randint(self.network.profile.min_delay_ms,
                                 self.network.profile.max_delay_ms)
        self.schedule(delay, ("failure", source, source_inc, cid))

    def refuse(self, source: int, destination: int) -> None:
        """Connections from `source` to `destination` are refused (a firewall, a bad
        certificate) until `heal_refusals`."""
        self.refused.add((source, destination))

    def heal_refusals(self) -> None:
        self.refused.clear()

    # -- the workload ---------------------------------------------------------------------------

    def append_to_leader(self) -> bool:
        leader = self.leader()
        if leader is None or leader.core is None:
            return False
        self._append_seq += 1
        payload = f"r{self._append_seq}".encode()
        try:
            offset = leader.core.append([payload], leader.clock.local(self.now))
        except (NotLeaderError, RaftError):
            return False
        leader.pending_appends.append(PendingAppend(leader.core.epoch, offset, payload))
        self._drain(leader)
        return True

    def write_steadily(self, interval_ms: int, until: int) -> None:
        def tick() -> None:
            self.append_to_leader()
            if self.now + interval_ms < until:
                self.at(interval_ms, tick)

        self.at(interval_ms, tick)

    # -- queries --------------------------------------------------------------------------------

    def leader(self) -> SimNode | None:
        """The live leader of the highest epoch, if any."""
        best: SimNode | None = None
        for node in self.nodes.values():
            core = node.core
            if core is None or not core.is_leader:
                continue
            if best is None or core.epoch > best.core.epoch:  # type: ignore[union-attr]
                best = node
        return best

    def committed_offset(self) -> int:
        return self.checker.committed_end

    # -- running --------------------------------------------------------------------------------

    def step(self) -> None:
        when, _, event = heapq.heappop(self.events)
        self.now = max(self.now, when)
        self.event_count += 1
        kind = event[0]
        touched: SimNode | None = None
        if kind in ("response", "failure") and event[1] in self.admin_clients:
            client = self.admin_clients[event[1]]
            if kind == "response":
                client.on_response(event[3], event[4])
            else:
                client.on_failure(event[3])
        elif kind == "request":
            touched = self._on_request(*event[1:])
        elif kind == "response":
            touched = self._on_response(*event[1:])
        elif kind == "failure":
            touched = self._on_failure(*event[1:])
        elif kind == "tick":
            touched = self._on_tick(*event[1:])
        elif kind == "flush":
            touched = self._on_flush(*event[1:])
        elif kind == "snapshot_job":
            touched = self._on_snapshot_job(*event[1:])
        elif kind == "action":
            event[1]()
        if touched is not None:
            self._drain(touched)
        self.checker.check()

    # -- event handlers ---------------------------------------------------------------------------

    def _live(self, node_id: int, incarnation: int) -> SimNode | None:
        node = self.nodes.get(node_id)
        if node is None or node.core is None or node.incarnation != incarnation:
            return None
        return node

    def _on_request(
        self, dest: int, source: int, source_inc: int, cid: int, request: Request
    ) -> SimNode | None:
        node = self.nodes[dest]
        if node.core is None:
            # The host answers for its dead process: connection refused.
            self._send_failure(dest, source, source_inc, cid)
            return None
        token = node.next_token
        node.next_token += 1
        node.inbound[token] = (source, source_inc, cid)
        node.inbound_requests[token] = request
        node.core.handle_request(token, request, node.clock.local(self.now))
        return node

    def _on_response(
        self, dest: int, dest_inc: int, cid: int, response: Response
    ) -> SimNode | None:
        node = self._live(dest, dest_inc)
        if node is None:
            return None
        node.core.handle_response(cid, response, node.clock.local(self.now))  # type: ignore[union-attr]
        return node

    def _on_failure(self, dest: int, dest_inc: int, cid: int) -> SimNode | None:
        node = self._live(dest, dest_inc)
        if node is None:
            return None
        node.core.handle_failure(  # type: ignore[union-attr]
            cid, node.clock.local(self.now), unreachable=True
        )
        return node

    def _on_tick(self, node_id: int, incarnation: int, at: float) -> SimNode | None:
        node = self._live(node_id, incarnation)
        if node is None or node.tick_at != at:
            return None
        node.tick_at = float("inf")
        node.core.poll(node.clock.local(self.now))  # type: ignore[union-attr]
        return node

    def _on_flush(self, node_id: int, incarnation: int, job: FlushJob) -> SimNode | None:
        node = self._live(node_id, incarnation)
        if node is None:
            return None
        job.run()
        node.log.complete_flush(job)
        node.flush_job = None
        node.core.on_log_flushed(node.clock.local(self.now))  # type: ignore[union-attr]
        return node

    def _on_snapshot_job(self, node_id: int, incarnation: int, job: SnapshotJob) -> SimNode | None:
        node = self._live(node_id, incarnation)
        if node is None:
            return None
        job.run()
        if job.ordered:
            assert node.snapshot_jobs and node.snapshot_jobs[0] is job
            node.snapshot_jobs.popleft()
            self._start_snapshot_job(node)
        node.core.on_snapshot_job_done(job, node.clock.local(self.now))  # type: ignore[union-attr]
        return node

    def _start_snapshot_job(self, node: SimNode) -> None:
        """Ordered jobs run one at a time: schedule the head of the queue."""
        if node.snapshot_jobs:
            self._schedule_snapshot_job(node, node.snapshot_jobs[0])

    def _schedule_snapshot_job(self, node: SimNode, job: SnapshotJob) -> None:
        delay = self.rng.randint(0, self.timing.max_snapshot_job_ms)
        self.schedule(delay, ("snapshot_job", node.node_id, node.incarnation, job))

    def _send_failure(self, dead: int, source: int, source_inc: int, cid: int) -> None:
        if self.network.connected(dead, source):
            self.schedule(self.timing.max_fsync_ms + 1, ("failure", source, source_inc, cid))

    # -- after every event at a node: persist, send, flush, re-arm its timer ---------------------

    def _drain(self, node: SimNode) -> None:
        core = node.core
        if core is None:
            return
        out = core.take_output()
        self._count_transitions(node)
        sendable = True
        if out.election_state is not None:
            try:
                node.store.write(out.election_state)
            except OSError:
                if self.stop_on_store_failure:
                    self.crash(node.node_id)  # the real node goes fatal and exits
                    return
                sendable = False  # the pre-fix driver: this step's output is lost
            else:
                core.election_state_persisted(out.election_state)
        if sendable:
            self.checker.check_durable_before_sending(node, out)
            for request in out.requests:
                self._route_request(node, request)
        for reply in out.replies:
            node.inbound_requests.pop(reply.token, None)
            origin = node.inbound.pop(reply.token, None)
            if origin is None:
                continue  # its connection was reset: the answer is lost
            source, source_inc, cid = origin
            for delay in self.network.delays(node.node_id, source) if sendable else []:
                self.schedule(delay, ("response", source, source_inc, cid, reply.response))
        for snapshot_job in out.snapshot_jobs:
            if not snapshot_job.ordered:
                self._schedule_snapshot_job(node, snapshot_job)
                continue
            node.snapshot_jobs.append(snapshot_job)
            if len(node.snapshot_jobs) == 1:
                self._start_snapshot_job(node)
        self._apply(node, out.snapshot_loaded)
        if out.snapshot_loaded is not None and node.node_id in self.crash_after_snapshot_load:
            # The fault: the process dies right after loading a snapshot it fetched, before
            # the emptied log (and anything else of this step) reaches the disk.
            self.crash_after_snapshot_load.discard(node.node_id)
            self.crashes_after_snapshot_load += 1
            self.crash(node.node_id)
            return
        if node.flush_job is None:
            job = node.log.begin_flush()
            if job is not None:
                node.flush_job = job
                delay = self.rng.randint(self.timing.min_fsync_ms, self.timing.max_fsync_ms)
                self.schedule(delay, ("flush", node.node_id, node.incarnation, job))
        self._settle_appends(node)
        if core.shutting_down and core.shutdown_complete():
            self._stop_gracefully(node)
            return
        deadline = core.next_deadline()
        if deadline < node.tick_at:
            node.tick_at = deadline
            self.schedule(
                node.clock.global_delay(deadline, self.now),
                ("tick", node.node_id, node.incarnation, deadline),
            )

    def _count_transitions(self, node: SimNode) -> None:
        state = node.core.state if node.core is not None else None
        if state is not node.last_state:
            node.last_state = state
            if isinstance(state, ProspectiveState):
                node.prospective_entries += 1

    def _apply(self, node: SimNode, snapshot_loaded: OffsetAndEpoch | None) -> None:
        """The state machine follows the log: a snapshot first, then what is committed."""
        core = node.core
        assert core is not None
        machine = node.state_machine
        if snapshot_loaded is not None:
            if core.is_leader:
                self.checker.fail(f"leader {node.node_id} loaded snapshot {snapshot_loaded}")
            machine.load(node.snapshots, snapshot_loaded)
            self.checker.on_state(node, machine.applied, machine.digest)
        if machine.catch_up(node.log, core.high_watermark):
            self.checker.on_state(node, machine.applied, machine.digest)
            # The checker learns this node's committed records before cleaning may drop them.
            self.checker.check_node(node)
            machine.maybe_snapshot(node.snapshots, node.log, core.snapshot_control_records)

    def _stop_gracefully(self, node: SimNode) -> None:
        """The process exits after a last flush, so a graceful stop loses nothing (snapshot
        jobs still queued are dropped, as the real driver's executor is not drained: a
        partial file is lost and a deletion is redone at the next start)."""
        if node.flush_job is not None:
            node.flush_job.run()
            node.log.complete_flush(node.flush_job)
            node.flush_job = None
        node.log.flush()
        self.crash(node.node_id)

    def send_from_client(self, client_id: int, dest: int, cid: int, request: Request) -> None:
        """A client's request to node `dest`; its answer (or the refusal of a dead node's
        host) comes back to `self.admin_clients[client_id]`."""
        for delay in self.network.delays(client_id, dest):
            self.schedule(delay, ("request", dest, client_id, 0, cid, request))

    def _route_request(self, node: SimNode, request: OutboundRequest) -> None:
        dest = request.destination
        if dest not in self.nodes:
            # A bootstrap server, known by its endpoint only (ids -2, -3, ...).
            dest = self._by_endpoint.get(request.endpoint, -1)
        if dest not in self.nodes:
            return
        if (node.node_id, dest) in self.refused:
            # Connection refused by the destination's host while its process lives on.
            self._refuse(node.node_id, node.incarnation, request.correlation_id)
            return
        for delay in self.network.delays(node.node_id, dest):
            self.schedule(
                delay,
                ("request", dest, node.node_id, node.incarnation, request.correlation_id,
                 request.request),
            )

    def _settle_appends(self, node: SimNode) -> None:
        core = node.core
        if core is None or not node.pending_appends:
            return
        still: list[PendingAppend] = []
        for pending in node.pending_appends:
            if not core.is_leader or core.epoch != pending.epoch:
                continue  # outcome unknown: the client would retry
            if core.high_watermark > pending.offset:
                self.acknowledged[pending.offset] = pending.payload
            else:
                still.append(pending)
        node.pending_appends = still


__all__ = ["SimClient", "SimCluster", "SimNode", "SimTiming", "endpoint"]  # importable from here
