"""One chaos campaign: cluster up, writers + seeded faults for `duration_s`, heal, then the
liveness, log, served-state and audit checks."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from harness.cluster import ProcessCluster, add_fault_dirs, wait_for
from kraft.errors import Errors
from metadata.topics import METADATA_PARTITION_DIR
from server.admin_client import AdminClient, CommandError
from tests.chaos.availability import derive_bound
from tests.chaos.checks import (
    Check,
    Served,
    check_broker_faults,
    check_floors,
    check_log,
    check_served,
    floors,
)
from tests.chaos.clock_steps import check_clock_steps
from tests.chaos.committed import (
    CommittedIndex,
    build_index,
    read_hw,
    read_node_log,
)
from tests.chaos.data import MIN_INSYNC, partition_states
from tests.chaos.data_phase import DataPart, HealedData, campaign_timeouts
from tests.chaos.faults import FaultFiles, Injector, find_leader
from tests.chaos.node_events import read_events
from tests.chaos.report import fault_timings, recovery_stats, summary_lines, write_counts
from tests.chaos.schedule import KINDS, build_schedule
from tests.chaos.served import served_by, unfenced_brokers
from tests.chaos.snapshots import to_check as snapshot_check
from tests.chaos.txn_phase import TxnPart
from tests.chaos.writers import (
    CONFIG_KEY,
    Refused,
    Write,
    Writer,
    config_topic,
    create_topic,
)

# Liveness bounds after healing: generous, for a loaded 2-core machine.
LEADER_BOUND_S = 30.0
WRITE_BOUND_S = 30.0
BROKERS_BOUND_S = 60.0
CATCH_UP_BOUND_S = 60.0
# A running node's log is read after its high-watermark file: records below that HW that it
# had appended but not yet written out reach the file within milliseconds; re-read a log that
# falls short of its HW for this long before calling it unreadable.
READ_BOUND_S = 10.0
SETUP_S = 60.0
AUDIT_TIMEOUT_S = 900.0

CLUSTER_CONFIG = {
    "internal.test.hooks.enable": "false",  # the real controller, not raw Raft appends
    # Logs keep everything, so the committed records can be read back from offset 0.
    "metadata.max.retention.bytes": "-1",
    "metadata.max.retention.ms": "-1",
    # Kafka's (and the product's) defaults, written out for the bound and the clock check: a
    # killed broker is fenced at once by the controller's listener probe and its restart
    # registers a new incarnation without waiting for the old session; the 3-s sessions used
    # before fenced live, CPU-starved brokers (52 of 80 fencings in a 900-s run), each a
    # leadership move and an availability window of its own.
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    # A paused follower leaves the ISR after 3 s (not Kafka's 30), so acks=all goes on.
    "replica.lag.time.max.ms": "3000",
}
SNAPSHOT_BYTES = 65_536  # a snapshot every few hundred writes: restarts load one


@dataclass
class Options:
    seed: int
    duration_s: float = 60.0
    controllers: int = 3
    brokers: int = 3
    writers: int = 4
    lanes: int = 2
    pace_s: float = 0.05
    audit: bool = True
    work_dir: Path | None = None
    keep: bool = False
    kinds: tuple[str, ...] = KINDS
    snapshot_bytes: int = SNAPSHOT_BYTES
    producers: int = 2  # data writers; 0: no data part
    consumers: int = 1
    partitions: int = 3
    # The longest a partition may go without an acknowledgement while a majority of its
    # replicas is up; None: derived from the product's timeouts (availability.derive_bound).
    availability_bound_s: float | None = None
    # Fault a broker again while it recovers from a fault that took it down (the old, harsher
    # model; service.py): the availability bound does not apply then.
    refault_recovering: bool = False
    # Transactional writers (processes, txn_writer.py) and the consume-transform-produce app
    # (of the data topic; needs producers): off here, on in `python -m tests.chaos`.
    txn_writers: int = 0
    eos: bool = False

    def replay_command(self) -> str:
        parts = [f"{sys.executable} -m tests.chaos", f"--seed {self.seed}",
                 f"--duration {self.duration_s:g}", f"--controllers {self.controllers}",
                 f"--writers {self.writers}", f"--lanes {self.lanes}"]
        if self.kinds != KINDS:
            parts.append(f"--faults {','.join(self.kinds)}")
        if self.snapshot_bytes != SNAPSHOT_BYTES:
            parts.append(f"--snapshot-bytes {self.snapshot_bytes}")
        if (self.producers, self.consumers, self.partitions) != (2, 1, 3):
            parts.append(f"--producers {self.producers} --consumers {self.consumers} "
                         f"--partitions {self.partitions}")
        if self.availability_bound_s is not None:
            parts.append(f"--availability-bound {self.availability_bound_s:g}")
        if self.refault_recovering:
            parts.append("--refault-recovering")
        parts.append(f"--txn-writers {self.txn_writers}")
        if not self.eos:
            parts.append("--no-eos")
        if not self.audit:
            parts.append("--no-audit")
        return " ".join(parts)


class Campaign:
    def __init__(self, options: Options, say: Callable[[str], None] = print) -> None:
        self.o = options
        self.say = say
        self.root = options.work_dir or Path(
            tempfile.mkdtemp(prefix=f"kraft-chaos-{options.seed}-"))
        self.root.mkdir(parents=True, exist_ok=True)
        self.prefix = f"chaos{options.seed}"
        self.controllers = list(range(1, options.controllers + 1))
        self.brokers = list(range(options.controllers + 1,
                                  options.controllers + 1 + options.brokers))
        self.cluster = ProcessCluster(self.root / "cluster", options.controllers, {
            **CLUSTER_CONFIG,
            "metadata.log.max.record.bytes.between.snapshots": str(options.snapshot_bytes)})
        self.cluster.add_brokers(self.brokers)
        # Not under the prefix: the metadata checks own every topic and config under it.
        self.data = DataPart(self.cluster, self.brokers, f"kdata{options.seed}",
                             options.producers, options.consumers, options.partitions,
                             options.duration_s)
        self.txn = TxnPart(self.cluster, self.root, options.seed, options.txn_writers,
                           options.partitions, options.eos and options.producers > 0,
                           self.data.topic, options.partitions)
        self.transactional = options.txn_writers > 0 or self.txn.eos
        derived, terms = derive_bound(campaign_timeouts(CLUSTER_CONFIG))
        self.bound_s: float | None = derived if options.availability_bound_s is None \
            else options.availability_bound_s
        self.bound_terms = [f"derived {derived:g} s = the sum of:", *terms]
        if options.availability_bound_s is not None:
            self.bound_terms.insert(0, f"given {options.availability_bound_s:g} s "
                                       "(--availability-bound)")
        elif options.refault_recovering:
            self.bound_s = None  # its premise, one fault then one recovery, does not hold
            self.bound_terms.insert(0, "not applicable: --refault-recovering faults brokers "
                                       "again while they recover, a harsher model than the "
                                       "bound's")
        self.files = FaultFiles(add_fault_dirs(self.cluster))
        self.writes: list[Write] = []
        self.checks: list[Check] = []
        self.liveness: dict[str, str] = {}
        self.t0 = 0.0  # the campaign clock's zero: writes and faults are timed from it

    # -- helpers -------------------------------------------------------------------------------

    def servers(self) -> list[str]:
        return [self.cluster.nodes[n].endpoint for n in self.controllers + self.brokers]

    def active_endpoint(self) -> str:
        leader = wait_for(lambda: find_leader(self.cluster, self.controllers), LEADER_BOUND_S,
                          "an active controller")
        return self.cluster.nodes[leader].endpoint

    def _data_partitions(self) -> dict[int, tuple[list[int], list[int]]] | None:
        """The data partitions' replicas and ISRs as the active controller holds them: another
        node may answer from an older image (one just restarted and replaying, or cut off)."""
        leader = find_leader(self.cluster, self.controllers)
        if leader is None:
            return None
        client = AdminClient([self.cluster.nodes[leader].endpoint],
                             cluster_id=self.cluster.cluster_id)
        return partition_states(client, self.data.topic)

    def _timed(self, name: str, bound_s: float, condition: Callable[[], object],
               start: float, explain: Callable[[], str] | None = None) -> bool:
        """Wait for `condition` within `bound_s`; a liveness check either way (`explain`
        says what was still wrong when the bound passed)."""
        looked = time.monotonic() - start
        try:
            wait_for(condition, bound_s, name, poll_s=0.05)
        except AssertionError as exc:
            why = f": {explain()}" if explain is not None else ""
            self.checks.append(Check(f"liveness: {name}", False, f"{exc}{why}"))
            return False
        took = time.monotonic() - start
        if looked <= bound_s:
            detail = f"{took:.2f} s ≤ {bound_s:g} s"
        else:  # first looked at after the bound: when it came true is not known
            detail = (f"held {took:.2f} s after the heal, first looked at {looked:.2f} s (the "
                      f"bound {bound_s:g} s was not timed: the writers finished first)")
        self.liveness[name] = detail
        self.checks.append(Check(f"liveness: {name}", True, detail))
        return True

    # -- phases --------------------------------------------------------------------------------

    def run(self) -> dict:  # type: ignore[type-arg]
        schedule = build_schedule(self.o.seed, self.o.duration_s, self.controllers,
                                  self.brokers, lanes=self.o.lanes, kinds=self.o.kinds)
        self.say(f"chaos: seed {self.o.seed}, {len(schedule)} faults scheduled over "
                 f"{self.o.duration_s:g} s, work dir {self.root}")
        bound = "not applicable" if self.bound_s is None else f"{self.bound_s:g} s"
        self.say(f"availability bound {bound}: " + "; ".join(self.bound_terms))
        injector: Injector | None = None
        data: HealedData | None = None
        crashes: list[dict[str, object]] = []
        disk_stops = 0
        served: list[Served] = []
        index: CommittedIndex | None = None
        stop = threading.Event()
        try:
            self.cluster.format()
            self.cluster.start_all()
            self._setup()
            t0 = time.monotonic()
            for write in self.writes:  # the set-up writes, on the campaign clock
                write.start_s -= t0 - self.t0
                write.end_s = (write.end_s or 0.0) - (t0 - self.t0)
            self.t0 = t0
            injector = Injector(self.cluster, self.controllers, self.files, schedule, t0,
                                self.say, refault_recovering=self.o.refault_recovering)
            if self.o.producers:  # one fault, one recovery: also the data partitions'
                injector.service.data_partitions = self._data_partitions
                injector.service.min_isr = MIN_INSYNC
            writers = [Writer(k, self.prefix, self.servers(), t0, stop, self.o.pace_s,
                              cluster_id=self.cluster.cluster_id)
                       for k in range(self.o.writers)]
            injector.start()
            for writer in writers:
                writer.start()
            if self.o.producers:
                self.data.start(t0, stop)
            if self.transactional:
                self.txn.start(t0)
            self._run_for(t0, writers, injector)
            stop.set()
            self.txn.stop()  # the writers finish their transaction; waited for after the heal
            healed_at = injector.heal()
            self.say(f"{healed_at:8.2f} s  healed: fault files removed, paused nodes "
                     "continued, dead nodes restarted")
            # Timed from the heal while the writers finish (a transactional writer may take
            # long): waited for after the joins, the bounds were not measured.
            recovered = self._recovered(t0 + healed_at)
            for writer in writers:
                writer.join(timeout=120)
                if writer.is_alive() or writer.error is not None:
                    raise RuntimeError(f"writer {writer.writer} failed: {writer.error}")
                self.writes.extend(writer.writes)
            self.data.join()
            self.txn.join()
            if injector.error is not None:
                raise RuntimeError(f"the fault injector failed: {injector.error!r}")
            served, index = self._converged(t0 + healed_at) if recovered else ([], None)
            if self.o.producers:
                data = self.data.after_heal(t0 + healed_at, self.servers(), self._timed,
                                            self.checks)
                if data is not None:
                    self.say(f"data: high watermarks {data[0]}, ISRs {data[2]}")
            if self.transactional:
                self.txn.after_heal(self._timed, t0 + healed_at,
                                    None if data is None else data[1])
            injector.confirm_file_faults()  # the nodes' confirmations, long written by now
            injector.check_crashes()
            crashes = [{"nodeId": c.node_id, "exitCode": c.exit_code, "atS": round(c.at_s, 2),
                        "logTail": c.log_tail} for c in injector.crashes]
            disk_stops = injector.disk_stops
        finally:
            stop.set()  # on an error too: no thread keeps writing or faulting
            if injector is not None:
                injector.stop()
            self.txn.kill()
            self.cluster.stop_all()
        if index is None:  # the cluster never converged: read what the files hold now
            index = self._read_logs(retry=False)
        self._check_logs(index, served)
        events = read_events({n: node.log_path for n, node in self.cluster.nodes.items()},
                             injector.wall_t0)
        availability: dict[str, object] = {}
        if self.o.producers:
            self.checks.extend(self.data.checks(data))
            check, availability = self.data.availability(
                injector.outages, injector.records, events, self.bound_s, self.bound_terms)
            self.checks.append(check)
        if self.transactional:
            self.checks.extend(self.txn.checks(None if data is None else data[1]))
        clock_check, clock = check_clock_steps(
            injector.records, injector.outages, events,
            int(CLUSTER_CONFIG["broker.session.timeout.ms"]) / 1000,
            int(CLUSTER_CONFIG["broker.heartbeat.interval.ms"]) / 1000,
            sum(f.kind == "clock-jump" for f in schedule))
        self.checks.append(clock_check)
        applied = len(injector.applied())
        acked = sum(w.acked for w in self.writes if w.writer >= 0 and w.seq >= 0)
        self.checks.extend(check_floors(applied, acked, self.o.duration_s, self.o.lanes,
                                        self.o.writers))
        if self.o.producers:
            self.checks.append(check_broker_faults(
                [(r.fault.kind, r.targets[0]) for r in injector.applied() if r.targets],
                self.brokers, self.o.kinds))
        self.checks.append(Check("no node exited by itself", not crashes,
                                 f"{len(crashes)} unexpected exit(s)" if crashes else
                                 "every exit was an injected kill"))
        if self.o.audit:
            self.checks.append(self._audit())
        report = {
            "seed": self.o.seed, "durationS": self.o.duration_s,
            "controllers": self.o.controllers, "brokers": self.o.brokers,
            "writers": self.o.writers, "lanes": self.o.lanes,
            "ok": all(c.ok for c in self.checks),
            "faults": fault_timings(injector.records, self.writes),
            "faultsApplied": applied,
            "floors": dict(zip(("faults", "writes"),
                               floors(self.o.duration_s, self.o.lanes, self.o.writers),
                               strict=True)),
            "writes": write_counts(self.writes),
            "recovery": {}, "liveness": self.liveness,
            "checks": [c.to_json() for c in self.checks], "crashes": crashes,
            "brokerDiskStops": disk_stops,
            "snapshots": self._snapshots(),
            "data": self.data.counts() if self.o.producers else {},
            "transactions": self.txn.counts() if self.transactional else {},
            "availability": availability, "clockSteps": clock,
            "outages": [o.to_json() for o in injector.outages],
            "wallT0": injector.wall_t0,  # node log times minus this: campaign times
            "workDir": str(self.root), "replay": self.o.replay_command(),
        }
        report["recovery"] = recovery_stats(report["faults"])
        (self.root / "writes.json").write_text(json.dumps([w.to_json() for w in self.writes]))
        if self.o.producers:
            (self.root / "records.json").write_text(json.dumps(self.data.journal()))
        return report

    def _setup(self) -> None:
        wait_for(lambda: find_leader(self.cluster, self.controllers), SETUP_S, "a leader")
        wait_for(lambda: unfenced_brokers(self.active_endpoint()) == set(self.brokers),
                 SETUP_S, "every broker registered and unfenced")
        client = AdminClient(self.servers(), cluster_id=self.cluster.cluster_id)
        self.t0 = time.monotonic()  # moved to the fault phase's start once set up

        def created(name: str) -> bool:
            try:
                create_topic(client, name)
            except Refused as exc:  # a unique name that exists: an earlier try landed
                return exc.code == Errors.TOPIC_ALREADY_EXISTS
            except CommandError:
                return False  # e.g. the quorum still settling: try again
            return True

        for k in range(self.o.writers):
            name = config_topic(self.prefix, k)
            start = time.monotonic() - self.t0
            wait_for(lambda n=name: created(n), SETUP_S, f"topic {name} created")
            self.writes.append(Write(k, -1, "create", name, "", start,
                                     time.monotonic() - self.t0, True))
        if self.o.producers:
            self.data.setup(client)
        if self.transactional:
            self.txn.setup(client)
        self.say(f"cluster up: controllers {self.controllers}, brokers {self.brokers}")

    def _run_for(self, t0: float, writers: list[Writer], injector: Injector) -> None:
        end = t0 + self.o.duration_s
        next_report = t0 + 10
        while (now := time.monotonic()) < end:
            # The campaign's own clock: wake for progress lines, not to synchronise anything.
            threading.Event().wait(min(1.0, end - now))
            if time.monotonic() >= next_report:
                acked = sum(w.acked for writer in writers for w in list(writer.writes))
                self.say(f"{time.monotonic() - t0:8.2f} s  {acked} writes acknowledged")
                next_report += 10
            if injector.error is not None:
                raise RuntimeError(f"the fault injector failed: {injector.error!r}")

    def _recovered(self, healed: float) -> bool:
        """Liveness within bounds of the heal: a leader, an acknowledged write, every broker
        unfenced."""
        if not self._timed("leader elected", LEADER_BOUND_S,
                           lambda: self.cluster.leader(among=set(self.controllers)), healed):
            return False
        if not self._probe(healed):
            return False
        self._timed("brokers unfenced", BROKERS_BOUND_S,
                    lambda: unfenced_brokers(self.active_endpoint()) == set(self.brokers),
                    healed)
        return True

    def _converged(self, healed: float) -> tuple[list[Served], CommittedIndex | None]:
        """Once the writers are done and every node has caught up with the leader, every
        node's committed log and what every node serves."""
        if not self._caught_up(healed):
            return [], None
        index = self._read_logs(retry=True)
        return self._served(index), index

    def _caught_up(self, healed: float) -> bool:
        """Every node's high-watermark file reaches the leader's high watermark, taken once
        the probe was acknowledged and the brokers unfenced: then each node's committed log
        holds every acknowledged write (all were committed below it)."""
        partitions = {n: node.config_path.parent / f"node-{n}" / METADATA_PARTITION_DIR
                      for n, node in self.cluster.nodes.items()}
        target = -1

        def leader_hw() -> int | None:
            leader = find_leader(self.cluster, self.controllers)
            try:
                return None if leader is None else self.cluster.status(leader).high_watermark
            except grpc.RpcError:
                return None

        def lagging() -> dict[int, int | None]:
            hws = {n: read_hw(p) for n, p in partitions.items()}
            return {n: hw for n, hw in hws.items() if hw is None or hw < target}

        def explain() -> str:
            return ", ".join(f"node {n} at {hw}" for n, hw in sorted(lagging().items()))

        try:
            target = wait_for(leader_hw, LEADER_BOUND_S, "the leader's high watermark")
        except AssertionError as exc:
            self.checks.append(Check("liveness: every node caught up with the leader", False,
                                     str(exc)))
            return False
        self.say(f"waiting for every node's high-watermark file to reach the leader's, {target}")
        return self._timed("every node caught up with the leader", CATCH_UP_BOUND_S,
                           lambda: not lagging(), healed,
                           lambda: f"the leader's high watermark is {target}; lagging: "
                                   f"{explain()}")

    def _read_logs(self, retry: bool) -> CommittedIndex:
        """Every node's committed log; while the nodes run (`retry`), a log that cannot be read
        up to its high watermark is read again for up to READ_BOUND_S (see there)."""
        dirs = {n: node.config_path.parent / f"node-{n}" for n, node in self.cluster.nodes.items()}
        logs = {n: read_node_log(d, n) for n, d in dirs.items()}
        deadline = time.monotonic() + READ_BOUND_S
        while retry and time.monotonic() < deadline:
            short = [n for n, log in logs.items() if log.problems and self.cluster.nodes[n].alive]
            if not short:
                break
            threading.Event().wait(0.2)  # polling interval of a bounded wait
            logs.update({n: read_node_log(dirs[n], n) for n in short})
        return build_index(logs, self.prefix, CONFIG_KEY)

    def _probe(self, healed: float) -> bool:
        """A write after healing, acknowledged within the bound."""
        client = AdminClient(self.servers(), cluster_id=self.cluster.cluster_id)
        attempt = 0

        def write() -> bool:
            nonlocal attempt
            name = f"{self.prefix}-probe-{attempt}"
            probe = Write(-1, attempt, "create", name, "", time.monotonic() - self.t0)
            self.writes.append(probe)
            attempt += 1
            try:
                create_topic(client, name)
            except CommandError as exc:
                probe.error = str(exc)[:300]
                return False
            finally:
                probe.end_s = time.monotonic() - self.t0
            probe.acked = True
            return True

        return self._timed("a write acknowledged", WRITE_BOUND_S, write, healed)

    def _served(self, index: CommittedIndex) -> list[Served]:
        # Configs are asked for the writers' topics and any other topic with a committed
        # config (describing every topic would cost seconds per node).
        topics = sorted({config_topic(self.prefix, k) for k in range(self.o.writers)}
                        | {topic for topic, _ in index.config_history})

        def views() -> list[Served]:
            # Every controller answers reads from its own committed image, a broker from its
            # cache: ask each one directly.
            return [served_by(n, self.cluster.nodes[n].endpoint, self.prefix, topics)
                    for n in self.controllers + self.brokers]

        def converged() -> list[Served] | None:
            try:
                got = views()
            except (grpc.RpcError, AssertionError):
                return None  # a broker not serving yet
            same = all(v.topics == got[0].topics and v.configs == got[0].configs for v in got)
            return got if same else None

        try:
            return wait_for(converged, CATCH_UP_BOUND_S, "every node to serve the same")
        except AssertionError:
            try:
                return views()  # check_served names the differences
            except (grpc.RpcError, AssertionError):
                return []

    def _check_logs(self, index: CommittedIndex, served: list[Served]) -> None:
        dirs = {n: node.config_path.parent / f"node-{n}" for n, node in self.cluster.nodes.items()}
        self.checks.extend(check_log(self.writes, index))
        self.checks.append(snapshot_check(dirs, index))
        if served:
            self.checks.append(check_served(served, self.writes, index))
        else:
            self.checks.append(Check("served metadata equals the committed log", False,
                                     "no node answered after healing"))

    def _snapshots(self) -> dict[int, int]:
        """Snapshot files per node at the end (restarts loaded the newest before replaying)."""
        return {n: len(list((node.config_path.parent / f"node-{n}" / METADATA_PARTITION_DIR)
                            .glob("*.checkpoint")))
                for n, node in sorted(self.cluster.nodes.items())}

    def _audit(self) -> Check:
        out = self.root / "audit"
        cmd = [sys.executable, "-m", "audit.cli", "--out", str(out)]
        for n, node in sorted(self.cluster.nodes.items()):
            cmd += ["--log-dir", str(node.config_path.parent / f"node-{n}")]
        start = time.monotonic()
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=AUDIT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return Check("audit (kraft-audit)", False, f"no answer in {AUDIT_TIMEOUT_S:g} s")
        took = time.monotonic() - start
        lines = (done.stdout.strip().splitlines() or done.stderr.strip().splitlines()[-5:])
        if done.returncode == 0:
            return Check("audit (kraft-audit)", True,
                         f"no violation ({took:.0f} s); report in {out}", lines)
        what = "violations found" if done.returncode == 2 else f"exit {done.returncode}"
        return Check("audit (kraft-audit)", False, f"{what} ({took:.0f} s); report in {out}",
                     lines + done.stderr.strip().splitlines()[-5:])


def run_campaign(options: Options, say: Callable[[str], None] = print) -> dict:  # type: ignore[type-arg]
    campaign = Campaign(options, say)
    report = campaign.run()
    if report["ok"] and not options.keep and options.work_dir is None:
        shutil.rmtree(campaign.root, ignore_errors=True)
        report["workDir"] = None
    return report


__all__ = ["Options", "run_campaign", "summary_lines"]
