"""The fault schedule: a pure function of the seed, so a failing campaign replays exactly.

Faults run in `lanes` independent sequences (so up to `lanes` overlap). Process faults
(kill, pause) never overlap on one node; file faults compose (see faults.FaultFiles).
Targets named `leader` are resolved when the fault starts: whichever controller leads then.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field

KINDS = ("kill", "kill-leader", "pause", "partition", "isolate-leader", "disk-full",
         "slow-fsync", "clock-jump", "kill-broker", "pause-broker")
# Kills and partitions of the leader are what loses writes in a broken quorum: weight them.
WEIGHTS = {"kill": 3, "kill-leader": 3, "pause": 2, "partition": 2, "isolate-leader": 2,
           "disk-full": 2, "slow-fsync": 1, "clock-jump": 1,
           # Brokers hold the partition logs: every broker leads some data partition.
           "kill-broker": 3, "pause-broker": 2}
# Each fault lasts MIN_FAULT_S..MAX_FAULT_S, with GAP_S between two of one lane.
MIN_FAULT_S, MAX_FAULT_S = 1.0, 5.0
GAP_S = (0.5, 3.0)
PROCESS_KINDS = frozenset({"kill", "kill-leader", "pause", "kill-broker", "pause-broker"})
KILL_KINDS = frozenset({"kill", "kill-leader", "kill-broker"})
PAUSE_KINDS = frozenset({"pause", "pause-broker"})


@dataclass
class Fault:
    index: int
    kind: str
    start_s: float  # from the start of the fault phase
    end_s: float
    targets: list[int] = field(default_factory=list)  # empty for leader-resolved faults
    other_side: list[int] = field(default_factory=list)  # partitions: the nodes cut off
    value: int = 0  # fsync delay or clock offset, in ms

    def describe(self) -> str:
        what = ",".join(map(str, self.targets)) or "leader"
        if self.kind in ("partition", "isolate-leader"):
            what = f"{what} | {','.join(map(str, self.other_side)) or 'rest'}"
        if self.value:
            what += f" ({self.value} ms)"
        return f"#{self.index} {self.kind} {what} @{self.start_s:.1f}-{self.end_s:.1f}s"

    def to_json(self) -> dict[str, object]:
        return asdict(self)


def build_schedule(
    seed: int, duration_s: float, controllers: list[int], brokers: list[int],
    *, lanes: int = 2, kinds: tuple[str, ...] = KINDS,
) -> list[Fault]:
    """Faults that all end by `duration_s`, ordered by start time."""
    rng = random.Random(seed)
    nodes = controllers + brokers
    process_busy: dict[int, list[tuple[float, float]]] = {n: [] for n in nodes}
    faults: list[Fault] = []
    weights = [WEIGHTS[k] for k in kinds]
    for _lane in range(lanes):
        t = rng.uniform(1.0, 3.0)  # let the writers get going first
        while True:
            length = rng.uniform(MIN_FAULT_S, MAX_FAULT_S)
            if t + length > duration_s:
                break
            kind = rng.choices(kinds, weights)[0]
            fault = _make(rng, kind, t, t + length, controllers, nodes, process_busy, brokers)
            if fault is not None:
                faults.append(fault)
            t += length + rng.uniform(*GAP_S)
    faults.sort(key=lambda f: (f.start_s, f.kind))
    for i, fault in enumerate(faults):
        fault.index = i
    return faults


def _free(busy: list[tuple[float, float]], start: float, end: float) -> bool:
    # A restart needs a moment after the previous fault on the node ended.
    return all(end + 1.0 <= s or e + 1.0 <= start for s, e in busy)


def _make(
    rng: random.Random, kind: str, start: float, end: float, controllers: list[int],
    nodes: list[int], process_busy: dict[int, list[tuple[float, float]]], brokers: list[int],
) -> Fault | None:
    if kind in ("kill", "pause", "kill-broker", "pause-broker"):
        pool = brokers if kind.endswith("-broker") else nodes
        free = [n for n in pool if _free(process_busy[n], start, end)]
        if not free:
            return None
        target = rng.choice(free)
        process_busy[target].append((start, end))
        return Fault(0, kind, start, end, [target])
    if kind in ("kill-leader", "isolate-leader"):
        return Fault(0, kind, start, end)
    if kind == "partition":
        return _partition(rng, start, end, controllers, nodes)
    target = rng.choice(nodes)
    if kind == "slow-fsync":
        return Fault(0, kind, start, end, [target], value=rng.choice([20, 50, 100, 250, 500]))
    if kind == "clock-jump":
        sign = rng.choice([-1, 1])
        return Fault(0, kind, start, end, [target], value=sign * rng.randint(60_000, 7_200_000))
    return Fault(0, kind, start, end, [target])  # disk-full


def _partition(
    rng: random.Random, start: float, end: float, controllers: list[int], nodes: list[int],
) -> Fault:
    """One node cut off from everyone, or the controllers split into a minority and a
    majority with the brokers scattered over both sides."""
    if rng.random() < 0.5:
        target = rng.choice(nodes)
        return Fault(0, "partition", start, end, [target], [n for n in nodes if n != target])
    minority = rng.sample(controllers, (len(controllers) - 1) // 2)
    side_a = list(minority)
    side_b = [c for c in controllers if c not in minority]
    for broker in (n for n in nodes if n not in controllers):
        (side_a if rng.random() < 0.5 else side_b).append(broker)
    return Fault(0, "partition", start, end, sorted(side_a), sorted(side_b))
