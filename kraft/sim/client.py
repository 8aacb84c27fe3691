"""The Raft client API (kraft/client.py) on simulated nodes, for state machines written against
it — the real QuorumController — to run inside the simulator.

`ClientCluster` is a SimCluster whose events run as callbacks of a `VirtualTimeLoop`, so the
asyncio code of a state machine interleaves deterministically with the Raft traffic. Each live
node incarnation gets a `SimRaftClient`; `attach` (the scenario's) builds the state machine on
it, as a process would at start-up, and gets a fresh one after every restart. Deliveries
follow the real node's rules: the same ListenerContext after every step of the node.

Snapshots are not taken here (the simulator's own digest snapshots mean nothing to a
metadata state machine), so the log is replayed from its start after a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from kraft.client import RaftClient, RaftClientListener
from kraft.core.errors import NotLeaderError, RaftError
from kraft.core.raft import LeaderAndEpoch
from kraft.delivery import ListenerContext, announcement
from kraft.log.base import OffsetAndEpoch, SnapshotInfo
from kraft.sim.cluster import SimCluster, SimNode
from kraft.sim.virtual_loop import VirtualTimeLoop


@dataclass
class _Append:
    last_offset: int
    epoch: int
    future: asyncio.Future[int]


class SimRaftClient:
    """One incarnation of one simulated node, as its state machine sees it."""

    def __init__(
        self, cluster: ClientCluster[Any], node: SimNode, incarnation: int  # any state machine
    ) -> None:
        self._cluster = cluster
        self._node = node
        self._incarnation = incarnation
        self._contexts: list[ListenerContext] = []
        self._appends: list[_Append] = []
        self.closed = False

    @property
    def node_id(self) -> int | None:
        return self._node.node_id

    @property
    def alive(self) -> bool:
        return (not self.closed and self._node.core is not None
                and self._node.incarnation == self._incarnation)

    def register(self, listener: RaftClientListener) -> None:
        self._contexts.append(ListenerContext(listener))

    async def append(self, records: list[bytes]) -> int:
        return await self.submit(records)

    def submit(self, records: list[bytes]) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        cluster, node = self._cluster, self._node
        core = node.core
        if not self.alive or core is None:
            future.set_exception(NotLeaderError("the node is down"))
            return future
        cluster.sync_clock()
        try:
            last = core.append(records, node.clock.local(cluster.now))
        except RaftError as exc:  # NotLeaderError among them
            future.set_exception(exc)
            return future
        self._appends.append(_Append(last, core.epoch, future))
        cluster.drain_node(node)
        return future

    def voter_endpoints(self) -> dict[int, str]:
        core = self._node.core
        return core.voters.endpoints() if core is not None else {}

    def control_records_appended(self) -> int:
        core = self._node.core
        return core.leader_control_records if self.alive and core is not None else 0

    def leader_and_epoch(self) -> LeaderAndEpoch:
        core = self._node.core
        if not self.alive or core is None:
            return LeaderAndEpoch(-1, -1)
        status = core.status()
        return LeaderAndEpoch(status.leader_id, status.epoch)

    def high_watermark(self) -> int:
        core = self._node.core
        return core.high_watermark if self.alive and core is not None else 0

    def log_end_offset(self) -> int:
        return self._node.log.end_offset

    def leader_endpoint(self) -> str:
        core = self._node.core
        return core.leader_endpoint() if self.alive and core is not None else ""

    def resign(self, epoch: int) -> None:
        core = self._node.core
        if not self.alive or core is None or not (core.is_leader and core.epoch == epoch):
            return
        self._cluster.sync_clock()
        core.resign(epoch, self._node.clock.local(self._cluster.now))
        self._cluster.drain_node(self._node)

    def latest_snapshot_id(self) -> OffsetAndEpoch | None:
        return self._node.snapshots.latest_id()

    async def create_snapshot(
        self, snapshot_id: OffsetAndEpoch, last_contained_timestamp_ms: int,
        records: Callable[[], Iterable[bytes]],
    ) -> SnapshotInfo | None:
        return None  # see the module's docstring

    # -- driven by the cluster after every step of the node --------------------------------------

    def after_step(self) -> None:
        core = self._node.core
        if not self.alive or core is None:
            return
        self._settle(core.high_watermark, core.is_leader, core.epoch)
        leader, epoch_start = announcement(core)
        for context in self._contexts:
            while context.poll(self._node.log, self._node.snapshots, core.high_watermark,
                               leader, epoch_start):
                pass

    def _settle(self, high_watermark: int, is_leader: bool, epoch: int) -> None:
        still = []
        for pending in self._appends:
            if pending.future.done():
                continue
            if not is_leader or epoch != pending.epoch:
                pending.future.set_exception(NotLeaderError("leadership changed"))
            elif high_watermark > pending.last_offset:
                pending.future.set_result(pending.last_offset)
            else:
                still.append(pending)
        self._appends = still

    def close(self) -> None:
        """The process died: nothing it was waiting for will be answered."""
        self.closed = True
        for pending in self._appends:
            if not pending.future.done():
                pending.future.set_exception(NotLeaderError("the node crashed"))
        self._appends = []


M = TypeVar("M")  # the state machine a scenario attaches to each node incarnation
T = TypeVar("T")


class ClientCluster(SimCluster, Generic[M]):
    """`attach(client)` is called for every node incarnation once it starts; what it returns
    is kept in `machines` (node id -> state machine) until the node crashes."""

    def __init__(
        self, seed: int, attach: Callable[[SimRaftClient], M], **options: Any
    ) -> None:
        super().__init__(seed, **options)
        self.loop = VirtualTimeLoop()
        self._attach = attach
        self.clients: dict[int, SimRaftClient] = {}
        self.machines: dict[int, M] = {}
        self._timer: asyncio.TimerHandle | None = None

    # -- time: the loop's clock is the simulator's (seconds vs milliseconds) ----------------------

    def sync_clock(self) -> None:
        self.now = max(self.now, round(self.loop.time() * 1000))

    def drain_node(self, node: SimNode) -> None:
        """After the state machine touched a node's core (an append, a resignation)."""
        self._drain(node)
        self._rearm()

    def _pump(self) -> None:
        self._timer = None
        self.sync_clock()
        while self.events and self.events[0][0] <= self.now:
            self.step()
        self._rearm()

    def _rearm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.events:
            self._timer = self.loop.call_at(self.events[0][0] / 1000, self._pump)

    def run_async(self, scenario: Callable[[], Awaitable[T]], until_ms: int) -> T:
        """Run the coroutine function `scenario` on the virtual loop with the cluster's
        events interleaved, for at most `until_ms` of virtual time."""
        self.loop.advance(self.now / 1000 - self.loop.time())
        self._rearm()
        return self.loop.run_until_complete(
            asyncio.wait_for(scenario(), (until_ms - self.now) / 1000))

    # -- node lifecycle ---------------------------------------------------------------------------

    def start(self, node_id: int) -> None:
        node = self.nodes[node_id]
        if node.alive:
            return
        client = SimRaftClient(self, node, node.incarnation + 1)  # start() counts it up
        self.clients[node_id] = client
        self.machines[node_id] = self._attach(client)
        super().start(node_id)  # its first step delivers to the new listeners
        self._rearm()

    def crash(self, node_id: int, power_loss: bool = False) -> None:
        client = self.clients.pop(node_id, None)
        machine = self.machines.pop(node_id, None)
        super().crash(node_id, power_loss)
        if client is not None:
            client.close()
        close = getattr(machine, "crash", None)
        if callable(close):
            close()

    def _apply(self, node: SimNode, snapshot_loaded: OffsetAndEpoch | None) -> None:
        """The digest state machine follows the log for the invariant checker (without its
        snapshots), then the node's client delivers to its listeners."""
        core = node.core
        assert core is not None
        machine = node.state_machine
        if machine.catch_up(node.log, core.high_watermark):
            self.checker.on_state(node, machine.applied, machine.digest)
            self.checker.check_node(node)
        client = self.clients.get(node.node_id)
        if client is not None and client.alive:
            client.after_step()


if TYPE_CHECKING:  # mypy proves that the simulated node implements the Raft client API

    def _implements_raft_client(client: SimRaftClient) -> RaftClient:
        return client
