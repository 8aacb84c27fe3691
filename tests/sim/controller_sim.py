"""The real QuorumController inside the simulator, through leader changes.

Every node runs what a controller process runs above Raft — one MetadataLoader registered with
the Raft client and the QuorumController installed as its publisher — on simulated nodes
(kraft/sim/client.py) over a lossy network with crashes, restarts, partitions and graceful
resignations, all on virtual time. Clients keep creating topics through whichever controller
is active. Checked as it runs and at the end:

* at most one controller is active per epoch, and only on that epoch's Raft leader;
* every acknowledged write is in every node's final image;
* every node's image equals the image replayed from its committed log from scratch, and all
  nodes agree;
* once quiet, the active controller's speculative image equals the committed one.

`python -m tests.sim.controller_sim --seeds 200 [--seed S]`; a failure prints the command
that replays its seed. (It lives under tests/ because the Raft library may not import the
metadata layer: the layers are checked by `make lint`.)
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import logging
import random
import sys
import traceback
from dataclasses import dataclass, field

from kraft.errors import Errors
from kraft.sim.client import ClientCluster, SimRaftClient
from kraft.sim.invariants import SimViolation
from kraft.sim.network import NetworkProfile
from metadata.controller import QuorumController
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import MetadataImage
from metadata.loader import MetadataLoader
from metadata.records import TopicRecord

RUN_MS = 20_000
QUIET_BOUND_MS = 30_000
SHUTDOWN_TIMEOUT_MS = 5_000  # server/main.py's SHUTDOWN_TIMEOUT_S


@dataclass
class ControllerProcess:
    """What server/main.py composes on a controller, minus the network services."""

    loader: MetadataLoader
    controller: QuorumController
    closing: asyncio.Future[None] | None = None

    def crash(self) -> None:
        self.closing = asyncio.ensure_future(self.controller.close())


def attach(client: SimRaftClient) -> ControllerProcess:
    loader = MetadataLoader(off_loop_snapshots=False)
    client.register(loader)
    controller = QuorumController(client, noop_interval_ms=500)
    loader.install(controller)
    return ControllerProcess(loader, controller)


def topic_id(n: int) -> str:
    return base64.urlsafe_b64encode((n + 2).to_bytes(16, "big")).decode().rstrip("=")


def create_topic(n: int):  # type: ignore[no-untyped-def]
    name = f"topic-{n}"

    def rule(image: MetadataImage) -> ControllerResult[None]:
        if image.topic(name) is not None:
            raise ControllerApiError(Errors.TOPIC_ALREADY_EXISTS, name)
        return ControllerResult((TopicRecord(name, topic_id(n)),), None)

    return rule


@dataclass
class Run:
    cluster: ClientCluster
    rng: random.Random
    acknowledged: set[str] = field(default_factory=set)
    active_in_epoch: dict[int, int] = field(default_factory=dict)
    writes: int = 0

    def processes(self) -> dict[int, ControllerProcess]:
        return self.cluster.machines

    def check_one_active_per_epoch(self) -> None:
        c = self.cluster
        for node_id, process in self.processes().items():
            controller = process.controller
            if not controller.is_active:
                continue
            epoch = controller.active_epoch
            first = self.active_in_epoch.setdefault(epoch, node_id)
            if first != node_id:
                raise SimViolation(f"controllers {first} and {node_id} both active in epoch "
                                   f"{epoch}", c.now, c.event_count)
            core = c.nodes[node_id].core
            if core is None or core.epoch < epoch or (core.epoch == epoch and not core.is_leader):
                raise SimViolation(f"controller {node_id} active in epoch {epoch} but its Raft "
                                   "node is not that epoch's leader", c.now, c.event_count)

    async def client(self, stop: asyncio.Event) -> None:
        """A client that creates topics through the active controller, retrying elsewhere."""
        while not stop.is_set():
            await asyncio.sleep(self.rng.uniform(0.01, 0.05))
            self.check_one_active_per_epoch()
            active = [p.controller for p in self.processes().values() if p.controller.is_active]
            if not active:
                continue
            self.writes += 1
            n = self.writes
            with contextlib.suppress(ControllerApiError):
                await active[0].write(create_topic(n))
                self.acknowledged.add(f"topic-{n}")

    async def faults(self, stop: asyncio.Event) -> None:
        c, rng = self.cluster, self.rng
        while not stop.is_set():
            await asyncio.sleep(rng.uniform(0.5, 2.0))
            leader = c.leader()
            kind = rng.choice(["crash", "crash", "partition", "resign", "shutdown"])
            if leader is None:
                continue
            victim = leader.node_id
            if kind == "crash":
                c.crash(victim, power_loss=rng.random() < 0.3)
                c.at(rng.randint(100, 3000), lambda v=victim: c.start(v))
            elif kind == "partition":
                c.network.isolate(victim, set(c.nodes))
                c.at(rng.randint(500, 4000), c.network.heal)
            elif kind == "resign":
                process = self.processes().get(victim)
                if process is not None:
                    process.controller.client.resign(leader.core.epoch)  # type: ignore[union-attr]
            else:
                # SIGTERM: the real process exits once handed over or after its shutdown
                # timeout; the restart comes after that (a start while it still shuts down
                # would be a no-op, and the node would stay down for good).
                c.shutdown(victim)
                c.at(SHUTDOWN_TIMEOUT_MS, lambda v=victim: c.give_up_shutdown(v))
                c.at(SHUTDOWN_TIMEOUT_MS + rng.randint(100, 2000), lambda v=victim: c.start(v))

    async def quiesce(self) -> None:
        """Heal, restart everyone, wait for an active controller whose write commits, then
        until every node has applied the log up to that point. The target is fixed once: the
        controller's NoOps keep the log growing, and on a lossy network (a lost Fetch costs a
        request timeout) some node is nearly always a record behind the moving end."""
        c = self.cluster
        c.network.heal()
        for node in c.nodes.values():
            node.store.heal()
        c.start_all()
        target = None
        while True:
            await asyncio.sleep(0.05)
            self.check_one_active_per_epoch()
            if target is None:
                active = [p.controller for p in self.processes().values()
                          if p.controller.is_active]
                if not active:
                    continue
                try:
                    await active[0].write(create_topic(0))
                except ControllerApiError as exc:
                    if exc.code != Errors.TOPIC_ALREADY_EXISTS:
                        continue
                target = c.nodes[active[0].node_id].core.high_watermark  # type: ignore[union-attr]
            if all(p.loader.next_offset >= target for p in self.processes().values()):
                return

    def check_images(self) -> None:
        c = self.cluster
        images = {}
        for node_id, process in self.processes().items():
            loader = process.loader
            replayed = MetadataLoader(off_loop_snapshots=False).catch_up(
                c.nodes[node_id].log, loader.next_offset)
            if replayed != loader.image:
                raise SimViolation(f"node {node_id}: the image differs from its log replayed "
                                   "from scratch", c.now, c.event_count)
            images[node_id] = (loader.next_offset, loader.image)
            missing = [t for t in self.acknowledged if loader.image.topic(t) is None]
            if missing:
                raise SimViolation(f"node {node_id} lost acknowledged writes: {missing[:5]}",
                                   c.now, c.event_count)
            latest = process.controller.latest_image
            if latest is not None and latest.topics != loader.image.topics:
                raise SimViolation(f"active controller {node_id}: the speculative image "
                                   "differs from the committed one when quiet",
                                   c.now, c.event_count)
        ends = {offset for offset, _ in images.values()}
        if len(ends) == 1 and len({id(i) for _, i in images.values()}) > 1:
            first = next(iter(images.values()))[1]
            if any(image != first for _, image in images.values()):
                raise SimViolation("nodes disagree on the image at the same offset",
                                   c.now, c.event_count)


def _close(cluster: ClientCluster) -> None:
    """A failed run leaves coroutines waiting: cancel them before the loop goes."""
    loop = cluster.loop
    cluster.events.clear()
    tasks = asyncio.all_tasks(loop)
    for task in tasks:
        task.cancel()
    with contextlib.suppress(Exception):
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.close()


def run_seed(seed: int) -> Run:
    rng = random.Random(seed)
    profile = NetworkProfile(min_delay_ms=1, max_delay_ms=rng.choice([2, 5, 10]),
                             drop_rate=rng.choice([0.0, 0.01]),
                             duplicate_rate=rng.choice([0.0, 0.01]))
    cluster = ClientCluster(seed, attach, voters=rng.choice([3, 3, 5]), network=profile)
    run = Run(cluster, random.Random(seed ^ 0x5EED))

    async def scenario() -> None:
        cluster.start_all()
        stop = asyncio.Event()
        tasks = [asyncio.ensure_future(run.client(stop)), asyncio.ensure_future(run.faults(stop))]
        await asyncio.sleep(RUN_MS / 1000)
        stop.set()
        await asyncio.gather(*tasks)
        await asyncio.wait_for(run.quiesce(), QUIET_BOUND_MS / 1000)
        run.check_images()
        for process in list(run.processes().values()):
            await process.controller.close()
        await asyncio.sleep(0)  # the cancelled tasks finish

    try:
        cluster.run_async(scenario, RUN_MS + QUIET_BOUND_MS + 10_000)
    except TimeoutError:
        raise SimViolation("liveness: no active controller committed on every node within "
                           f"{QUIET_BOUND_MS} ms of healing", cluster.now,
                           cluster.event_count) from None
    finally:
        _close(cluster)
    if len(run.acknowledged) < 10:
        raise SimViolation(f"only {len(run.acknowledged)} writes acknowledged", cluster.now,
                           cluster.event_count)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--verbose", action="store_true", help="the protocol's own log too")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.CRITICAL)
    failures = 0
    for seed in range(args.seed, args.seed + args.seeds):
        try:
            run = run_seed(seed)
        except Exception as exc:
            failures += 1
            detail = str(exc) if isinstance(exc, SimViolation) else traceback.format_exc()
            print(f"seed {seed} FAILED: {detail}\n  replay: python -m tests.sim.controller_sim "
                  f"--seed {seed}", file=sys.stderr)
            continue
        if args.seeds == 1:
            print(f"seed {seed}: {len(run.acknowledged)} acknowledged writes, "
                  f"{run.cluster.event_count} events, {len(run.active_in_epoch)} epochs "
                  "with an active controller")
    print(f"{args.seeds - failures}/{args.seeds} seeds passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
