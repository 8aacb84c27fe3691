"""A member joining a 6-member group, KIP-848 against the classic protocol (issue 31):
`python -m bench.group_protocol_bench [--trials N] [--classic-assignor range|cooperative-sticky]
[--heartbeat-ms MS] [--rate R] [--json PATH]`.

One controller and one broker as `kraft-server` subprocesses; a topic of 60 partitions fed by
a producer process at --rate records/s in total (every partition in turn); two groups of 6
members consume it side by side, each member its own process (bench/group_protocol_worker.py,
confluent-kafka 2.16): one with `group.protocol=consumer` (the coordinator's uniform assignor),
one classic with --classic-assignor (default range: eager, the stop-the-world rebalance the
classic protocol does by default in librdkafka; cooperative-sticky is its incremental variant).
Both learn of a rebalance from a heartbeat every --heartbeat-ms (default 500: the broker's
group.consumer.heartbeat.interval.ms, the classic members' heartbeat.interval.ms).

A trial waits until the group has been steady for WINDOW_S, adds a 7th member, observes it for
WINDOW_S, and stops it again (it leaves); trials alternate between the groups (the order flips
each round), so both see the same machine. From the records the members read (the time each
was received), per partition:

* **gap on kept partitions**: the longest stretch without progress (a record past the
  partition's highest offset read so far) on the partitions whose owner is the same before the
  join and after it, in the WINDOW_S after the join (from the last progress before it); beside
  it the **baseline**, the same on the same partitions in the WINDOW_S before the join, what
  the loaded machine does without a rebalance (a record arrives every 60/rate s).
  KIP-848 target: no gap over 1 s. The longest is the loaded machine's worst moment; the
  median over the kept partitions of each one's longest gap says whether they all paused.
* **group stall**: the longest stretch in which no partition of the group made progress, the
  stop-the-world itself (baseline: the same before the join).
* **new member**: from its subscribe() to its first record. Target: within 2 s.
* gap on the moved partitions, the whole rebalance (the last assignment change), and whether a
  kept partition was revoked at all.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, NewTopic

from bench.log_bench import machine
from harness.cluster import kafka_cluster, wait_for

PYTHON = sys.executable
PARTITIONS, MEMBERS = 60, 6
WAIT_S = 60
WINDOW_S = 5.0  # observed after the join; the baseline is the same length before it
TARGETS = {"kept_gap_s": 1.0, "new_member_s": 2.0}


class MemberProcess:
    """A worker process and what it reported so far (its file read incrementally)."""

    def __init__(self, bootstrap: str, topic: str, group: str, protocol: str,
                 heartbeat_ms: int, path: Path) -> None:
        self.path = path
        self.process = subprocess.Popen(
            [PYTHON, "-m", "bench.group_protocol_worker", "consume", bootstrap, topic, group,
             protocol, str(heartbeat_ms), str(path)], stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        self.subscribed: float | None = None
        self.exited: float | None = None
        self.owned: set[int] = set()
        self.changes: list[tuple[float, str, set[int]]] = []  # (t, "A"/"R", partitions)
        self.read: dict[int, list[tuple[float, int, int]]] = {}  # p -> (t, offset, ts ms)
        self.first_read: float | None = None
        self._offset = 0

    def update(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as file:
            file.seek(self._offset)
            data = file.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        for line in data[:end].decode().splitlines():
            self._line(line.split(" "))

    def _line(self, fields: list[str]) -> None:
        kind, at = fields[0], float(fields[1])
        if kind == "C":
            self.read.setdefault(int(fields[2]), []).append(
                (at, int(fields[3]), int(fields[4])))
            if self.first_read is None:
                self.first_read = at
        elif kind in ("A", "R"):
            parts = {int(p) for p in fields[2].split(",")} if len(fields) > 2 and fields[2] \
                else set()
            self.changes.append((at, kind, parts))
            self.owned = self.owned | parts if kind == "A" else self.owned - parts
        elif kind == "S":
            self.subscribed = at
        elif kind == "X":
            self.exited = at

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.update()


class Group:
    def __init__(self, bootstrap: str, topic: str, protocol: str, heartbeat_ms: int,
                 root: Path) -> None:
        self.bootstrap, self.topic, self.protocol, self.root = bootstrap, topic, protocol, root
        self.heartbeat_ms = heartbeat_ms
        self.group_id = f"{protocol}-{uuid.uuid4().hex[:6]}"
        self.members: list[MemberProcess] = []
        self.gone: list[MemberProcess] = []  # stopped members: their reads still count
        for _ in range(MEMBERS):
            self.add()

    def add(self) -> MemberProcess:
        path = self.root / f"{self.group_id}-{len(self.members) + len(self.gone)}.log"
        member = MemberProcess(self.bootstrap, self.topic, self.group_id, self.protocol,
                               self.heartbeat_ms, path)
        self.members.append(member)
        return member

    def update(self) -> None:
        for member in self.members:
            member.update()

    def owners(self) -> dict[int, int] | None:
        """partition -> index of its member, when the members hold every partition once and
        each holds some; else None."""
        self.update()
        owners: dict[int, int] = {}
        for index, member in enumerate(self.members):
            if not member.owned:
                return None
            for p in member.owned:
                if p in owners:
                    return None
                owners[p] = index
        return owners if len(owners) == PARTITIONS else None

    def steady(self) -> dict[int, int] | None:
        """The owners, once no assignment changed for a window (the baseline's) and every
        partition made progress in the last second."""
        owners = self.owners()
        if owners is None:
            return None
        now = time.time()
        if any(at > now - WINDOW_S - 0.5 for m in self.members for at, _, _ in m.changes):
            return None
        recent = now - 1.0
        fresh = {p for m in self.members for p, reads in m.read.items()
                 if reads and reads[-1][0] > recent}
        return owners if len(fresh) == PARTITIONS else None

    def describe(self) -> str:
        self.update()
        return "; ".join(
            f"member {i}: owns {sorted(m.owned)}, read {sum(map(len, m.read.values()))}, "
            f"running {m.process.poll() is None}, log {m.path}"
            for i, m in enumerate(self.members))

    def progress(self, partition: int) -> list[tuple[float, int]]:
        """(time, ms the record waited) of each record that moved the partition past the
        highest offset its group had read, in time order."""
        reads = sorted(r for m in self.members + self.gone for r in m.read.get(partition, []))
        out, highest = [], -1
        for at, offset, timestamp_ms in reads:
            if offset > highest:
                highest = offset
                out.append((at, at * 1000 - timestamp_ms))
        return out


def longest_gap(progress: list[tuple[float, int]], start: float, end: float) -> float:
    """The longest stretch without progress in [start, end], from the last progress before
    start (a stall the window opens in counts whole)."""
    times = [t for t, _ in progress if start <= t <= end]
    before = [t for t, _ in progress if t < start]
    points = ([before[-1]] if before else [start]) + times + [end]
    return max(b - a for a, b in itertools.pairwise(points))


def join_trial(group: Group) -> dict[str, Any]:
    before = wait_for(group.steady, WAIT_S, f"{group.protocol}: 6 members consuming")
    joiner = group.add()
    wait_for(lambda: joiner.update() or joiner.subscribed, WAIT_S, "the new member's start")
    joined = joiner.subscribed
    assert joined is not None
    end = joined + WINDOW_S
    wait_for(lambda: time.time() >= end + 0.2, WAIT_S, "the observation")  # + the last flush
    after = wait_for(group.owners, WAIT_S, f"{group.protocol}: 7 owners after the window")
    if joiner.first_read is None or joiner.first_read > end:
        raise AssertionError(f"{group.protocol}: the new member read nothing in the window")
    settled = max(at for m in group.members for at, _, _ in m.changes if at <= end)
    kept = [p for p in range(PARTITIONS) if before[p] == after[p]]
    moved = [p for p in range(PARTITIONS) if before[p] != after[p]]
    revoked_kept = sorted({p for m_index, m in enumerate(group.members[:MEMBERS])
                           for at, kind, parts in m.changes if kind == "R" and at >= joined
                           for p in parts if p in kept and before[p] == m_index})
    progress = {p: group.progress(p) for p in range(PARTITIONS)}
    gaps = {p: longest_gap(progress[p], joined, end) for p in range(PARTITIONS)}
    baseline = [longest_gap(progress[p], joined - WINDOW_S, joined) for p in kept]
    anywhere = sorted(t for p in range(PARTITIONS) for t, _ in progress[p])
    waits = [w for p in kept for t, w in progress[p] if joined <= t <= end]
    result = {
        "kept": len(kept), "moved": len(moved),
        "kept_gap_s": round(max((gaps[p] for p in kept), default=0.0), 3),
        "baseline_gap_s": round(max(baseline, default=0.0), 3),
        "kept_gap_median_s": round(statistics.median([gaps[p] for p in kept] or [0.0]), 3),
        "baseline_gap_median_s": round(statistics.median(baseline or [0.0]), 3),
        "group_stall_s": round(longest_gap([(t, 0) for t in anywhere], joined, end), 3),
        "baseline_stall_s": round(longest_gap([(t, 0) for t in anywhere], joined - WINDOW_S,
                                              joined), 3),
        "moved_gap_s": round(max((gaps[p] for p in moved), default=0.0), 3),
        "kept_wait_max_ms": round(max(waits, default=0.0), 1),
        "new_member_s": round(joiner.first_read - joined, 3),
        "settled_s": round(settled - joined, 3),
        "kept_revoked": len(revoked_kept),
    }
    # The 7th leaves; the next trial starts once the 6 are steady again.
    group.members.remove(joiner)
    joiner.stop()
    group.gone.append(joiner)
    return result


def spread(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "all": values}


def run(args: argparse.Namespace) -> dict[str, Any]:
    arms = ["consumer", args.classic_assignor]
    results: dict[str, Any] = {"machine": machine(), "args": vars(args).copy(),
                               "load_before": os.getloadavg(), "trials": {a: [] for a in arms}}
    results["commit"] = subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                       capture_output=True, text=True).stdout.strip()
    settings = {"internal.test.hooks.enable": "false",
                "offsets.topic.num.partitions": "3", "offsets.topic.replication.factor": "1",
                "group.initial.rebalance.delay.ms": "0",
                "group.consumer.heartbeat.interval.ms": str(args.heartbeat_ms)}
    with tempfile.TemporaryDirectory(prefix="group-protocol-bench-") as tmp, \
            kafka_cluster(Path(args.root or tmp), [2], settings, WAIT_S) as cluster:
        root = args.root or tmp
        bootstrap = cluster.bootstrap_servers()
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic("feed", PARTITIONS, 1)])["feed"].result(WAIT_S)
        wait_for(lambda: all(p.leader >= 0 for p in admin.list_topics(
            "feed", timeout=10).topics["feed"].partitions.values()), WAIT_S, "leaders")
        producer = subprocess.Popen(
            [PYTHON, "-m", "bench.group_protocol_worker", "produce", bootstrap, "feed",
             str(PARTITIONS), str(args.rate)], stdout=subprocess.DEVNULL)
        groups = {arm: Group(bootstrap, "feed", arm, args.heartbeat_ms, Path(root))
                  for arm in arms}
        try:
            for trial in range(args.trials):
                for arm in arms if trial % 2 == 0 else arms[::-1]:
                    try:
                        outcome = join_trial(groups[arm])
                    except AssertionError as exc:
                        raise AssertionError(f"{exc}: {groups[arm].describe()}") from None
                    outcome["load"] = os.getloadavg()[0]
                    results["trials"][arm].append(outcome)
                    print(f"trial {trial} {arm}: {outcome}", flush=True)
        finally:
            for group in groups.values():
                for member in group.members:
                    member.stop()
            producer.send_signal(signal.SIGTERM)
            producer.wait(timeout=30)
    results["load_after"] = os.getloadavg()
    return results


def verdict(value: float, target: str) -> str:
    return "met" if value <= TARGETS[target] else "missed"


def summarize(results: dict[str, Any]) -> list[str]:
    lines = []
    for arm, trials in results["trials"].items():
        if not trials:
            continue
        figures = {key: spread([t[key] for t in trials]) for key in (
            "kept_gap_s", "baseline_gap_s", "kept_gap_median_s", "baseline_gap_median_s",
            "group_stall_s", "baseline_stall_s", "new_member_s", "moved_gap_s", "settled_s",
            "kept_wait_max_ms",
            "kept", "kept_revoked")}
        lines.append(f"{arm}: " + "; ".join(f"{k} {v}" for k, v in figures.items()))
        if arm == "consumer":
            worst_gap = figures["kept_gap_s"]["max"]
            worst_new = figures["new_member_s"]["max"]
            lines.append(
                f"  verdict (worst trial): kept partitions' longest gap {worst_gap} s "
                f"(target <= {TARGETS['kept_gap_s']}: {verdict(worst_gap, 'kept_gap_s')}), "
                f"new member's first record {worst_new} s (target <= "
                f"{TARGETS['new_member_s']}: {verdict(worst_new, 'new_member_s')})")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--rate", type=int, default=300, help="records/s over all partitions")
    parser.add_argument("--heartbeat-ms", type=int, default=500)
    parser.add_argument("--classic-assignor", choices=["range", "cooperative-sticky"],
                        default="range")
    parser.add_argument("--root", help="keep the cluster's and the members' files here")
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args(argv)
    results = run(args)
    for line in summarize(results):
        print(line)
    print(f"machine {results['machine']}; commit {results['commit']}; load average "
          f"{results['load_before']} -> {results['load_after']}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
