"""Availability of the data partitions through the campaign (issue 28, item 4).

For every partition: the windows between consecutive acknowledged acks=all writes, each
measured only over the time a majority of the partition's replicas was up (no kill, pause,
disk stop or crash of the broker, from the campaign's own record of its faults) while a
producer was sending (every producer sends to every partition each tick), less the time in
which no member of the partition's last committed ISR was up: with unclean election off (as
Kafka's default) only such a member may lead again, so that wait is the design, reported apart
("waiting for the last in-sync replica"). The longest window must stay within a bound derived
from the product's timeouts (`derive_bound`, reasoning in docs/chaos.md "Availability"). Each
window of 3 s or more is attributed to the faults that overlap it and to the steps the nodes'
logs show in it (node_events.py): the time before each step counts for that step, and the time
after the last one for the client."""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from tests.chaos.causes import attribute
from tests.chaos.checks import Check
from tests.chaos.faults import FaultRecord, Outage
from tests.chaos.node_events import NodeEvent

Span = tuple[float, float]
# Windows of at least this long are listed and attributed (issue 28's goal for one partition
# without an acknowledgement, at scale and through a broker kill, is 3 s).
REPORT_FROM_S = 3.0
MAX_LISTED = 30


# -- spans ------------------------------------------------------------------------------------

def union(spans: Iterable[Span]) -> list[Span]:
    out: list[Span] = []
    for lo, hi in sorted(s for s in spans if s[1] > s[0]):
        if out and lo <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def intersect(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    out: list[Span] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo, hi = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if lo < hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def measure(spans: Sequence[Span], lo: float, hi: float) -> float:
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in spans)


def subtract(a: Sequence[Span], b: Sequence[Span]) -> list[Span]:
    """The parts of the spans `a` outside every span of `b` (both sorted and disjoint)."""
    out: list[Span] = []
    for lo, hi in a:
        at = lo
        for blo, bhi in b:
            if bhi <= at or blo >= hi:
                continue
            if blo > at:
                out.append((at, blo))
            at = max(at, bhi)
        if at < hi:
            out.append((at, hi))
    return out


def majority_up(replicas: Sequence[int], outages: Sequence[Outage], lo: float,
                hi: float) -> list[Span]:
    """The spans of [lo, hi] in which more than half of `replicas` were up."""
    down = [(o.start_s, hi if o.end_s is None else o.end_s, o.node) for o in outages
            if o.node in replicas]
    cuts = sorted({lo, hi, *(t for s, e, _ in down for t in (s, e) if lo < t < hi)})
    need = len(replicas) // 2 + 1
    up = []
    for a, b in itertools.pairwise(cuts):
        mid = (a + b) / 2
        if len(replicas) - len({n for s, e, n in down if s <= mid < e}) >= need:
            up.append((a, b))
    return union(up)


CUT_KINDS = ("partition", "isolate-leader")


def quorum_up(controllers: Sequence[int], outages: Sequence[Outage],
              faults: Sequence[FaultRecord], lo: float, hi: float) -> list[Span]:
    """The spans of [lo, hi] in which a majority of `controllers` could elect and commit: not
    killed, paused or stopped (`outages`), not cut off from the others' majority by a network
    fault, not stalled by a full disk (a controller's appends wait for room). Without them no
    ISR change, election or fencing can happen, whatever the brokers do: like a majority of a
    partition's replicas, a precondition of availability, not part of what the bound allows."""
    need = len(controllers) // 2 + 1
    impaired: list[tuple[float, float, frozenset[int]]] = [
        (o.start_s, hi if o.end_s is None else o.end_s, frozenset([o.node]))
        for o in outages if o.node in controllers]
    for record in faults:
        if record.started_s is None or not record.targets:
            continue
        end = hi if record.ended_s is None else record.ended_s
        if record.fault.kind == "disk-full":
            impaired.append((record.started_s, end,
                             frozenset(n for n in record.targets if n in controllers)))
        elif record.fault.kind in CUT_KINDS:
            side = [n for n in record.targets if n in controllers]
            other = [n for n in controllers if n not in side]
            minority = other if len(side) >= need else side
            impaired.append((record.started_s, end, frozenset(minority)))
    cuts = sorted({lo, hi, *(t for s, e, _ in impaired for t in (s, e) if lo < t < hi)})
    up = []
    for a, b in itertools.pairwise(cuts):
        mid = (a + b) / 2
        out = frozenset().union(*(nodes for s, e, nodes in impaired if s <= mid < e))
        if len(controllers) - len(out) >= need:
            up.append((a, b))
    return union(up)


_LEADER_EPOCH = re.compile(r" in epoch (\d+) ")
_ISR_LIST = re.compile(r"(?:is now|\(ISR) \[([\d, ]*)\]")


def committed_isrs(tp: str, events: Sequence[NodeEvent]) -> list[tuple[float, list[int]]]:
    """(time, ISR) of every committed ISR of partition `tp` the nodes' logs show: a leader's
    "leading T-p in epoch E ... (ISR [...])" (its metadata, committed) and "ISR of T-p is now
    [...]" (a committed AlterPartition); a proposed shrink is not committed. A "leading" line
    of an older leader epoch than one already seen is a stale view, skipped. A follower the
    controller drops on fencing leaves no line: the ISR kept is then a superset, which only
    makes less time count as waiting."""
    out: list[tuple[float, list[int]]] = []
    newest_epoch = -1
    for e in sorted(events, key=lambda e: e.at_s):
        if e.subject != tp:
            continue
        if e.kind == "leader":
            epoch = _LEADER_EPOCH.search(e.text)
            if epoch is None or int(epoch.group(1)) < newest_epoch:
                continue
            newest_epoch = int(epoch.group(1))
        elif not (e.kind == "isr" and "is now" in e.text):
            continue
        found = _ISR_LIST.findall(e.text)
        if found:
            out.append((e.at_s, [int(x) for x in found[-1].replace(" ", "").split(",") if x]))
    return out


def last_isr_down(replicas: Sequence[int], isrs: Sequence[tuple[float, list[int]]],
                  outages: Sequence[Outage], lo: float, hi: float) -> list[Span]:
    """The spans of [lo, hi] in which every member of the partition's last committed ISR (all
    of `replicas` before the first change: the campaign starts from a full ISR) was down. A
    broker restarting is up from the moment the campaign starts it (its restart is the
    product's cost)."""
    down = [(o.start_s, hi if o.end_s is None else o.end_s, o.node) for o in outages]
    cuts = sorted({lo, hi, *(t for s, e, _ in down for t in (s, e) if lo < t < hi),
                   *(t for t, _ in isrs if lo < t < hi)})
    times = [t for t, _ in isrs]
    out = []
    for a, b in itertools.pairwise(cuts):
        mid = (a + b) / 2
        at = bisect.bisect_right(times, mid)
        isr = isrs[at - 1][1] if at else list(replicas)
        if isr and all(any(s <= mid < e and n == m for s, e, n in down) for m in isr):
            out.append((a, b))
    return union(out)


# -- the bound --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Timeouts:
    """What the bound is made of, in seconds (the campaign's settings and Kafka's defaults)."""

    max_fault_s: float  # the schedule's longest fault (schedule.MAX_FAULT_S)
    session_timeout_s: float  # broker.session.timeout.ms
    heartbeat_interval_s: float  # broker.heartbeat.interval.ms
    liveness_grace_s: float  # broker.liveness.grace.ms (cut short when no listener answers)
    replica_lag_s: float  # replica.lag.time.max.ms (checked every half of it)
    replica_fetch_wait_s: float  # replica.fetch.wait.max.ms
    quorum_fetch_timeout_s: float  # controller.quorum.fetch.timeout.ms
    election_timeout_s: float  # controller.quorum.election.timeout.ms (waits in [T, 2T))
    metadata_refresh_s: float  # librdkafka topic.metadata.refresh.interval.ms (the producers')
    client_backoff_max_s: float  # librdkafka retry.backoff.max.ms (its default)
    restart_s: float  # a killed broker started again -> back in the ISR (no timeout bounds it)


def derive_bound(t: Timeouts) -> tuple[float, list[str]]:
    """The longest outage the product is built to end, with a majority of the replicas up and a
    member of the last ISR up, in the campaign's fault model (two lanes: at most one other
    fault at the same time; one fault, one recovery: a broker taken down is not taken down
    again before it is back in service, service.py): each stage once at its longest. What
    gives the partition back its in-sync majority is either the fault being detected (or
    ending) or a restarted replica rejoining, whichever is longer. Returns the bound and its
    terms, as printed."""
    detect = max(t.max_fault_s, t.session_timeout_s + t.heartbeat_interval_s,
                 1.5 * t.replica_lag_s, t.liveness_grace_s)
    recover = max(detect, t.restart_s)
    controller = t.quorum_fetch_timeout_s + 2 * t.election_timeout_s
    propagate = t.replica_fetch_wait_s
    client = t.metadata_refresh_s + t.client_backoff_max_s
    terms = [
        f"recover {recover:g} s = max(restart {t.restart_s:g} s (a broker started again while "
        "the partition's other in-sync replica is lost: process start, log loading, "
        "registration, catching up; issue 28's goal for a kill -9 and restart), detect "
        f"{detect:g} s = max(longest fault {t.max_fault_s:g} s (a paused leader holds "
        f"the producer's requests, an isolated one is never fenced: heartbeats pass), session "
        f"{t.session_timeout_s:g} + heartbeat {t.heartbeat_interval_s:g} s, replica lag "
        f"{t.replica_lag_s:g} s + its check every {t.replica_lag_s / 2:g} s, liveness grace "
        f"{t.liveness_grace_s:g} s (a killed broker: ended at once, ~30 ms, when its listeners "
        "all refuse; the grace when they do not answer)))",
        f"controller failover {controller:g} s = quorum fetch timeout "
        f"{t.quorum_fetch_timeout_s:g} s + election wait up to 2 x {t.election_timeout_s:g} s "
        "(the other lane may take the active controller; fencing, election and ISR changes "
        "wait for it)",
        f"propagate {propagate:g} s = replica.fetch.wait.max.ms",
        f"client {client:g} s = librdkafka topic.metadata.refresh.interval.ms "
        f"{t.metadata_refresh_s:g} s + retry.backoff.max.ms {t.client_backoff_max_s:g} s",
    ]
    return recover + controller + propagate + client, terms


# -- windows ----------------------------------------------------------------------------------

@dataclass
class Window:
    partition: int
    start_s: float  # the acknowledgement before it, or when the producers started
    end_s: float  # the next acknowledgement, or when the producers stopped
    # Time in it with a majority of replicas up, a member of the last ISR up, producers sending.
    eligible_s: float
    closed: bool  # ended by an acknowledgement
    # Time in it with a majority up and producers sending but no member of the last ISR up.
    waiting_s: float = 0.0
    faults: list[str] = field(default_factory=list)
    steps: list[tuple[str, float]] = field(default_factory=list)  # longest first
    timeline: list[str] = field(default_factory=list)

    @property
    def cause(self) -> str:
        if not self.steps:
            return "no fault and no node step in it"
        name, took = self.steps[0]
        return f"{name} ({took:.1f} s of {self.end_s - self.start_s:.1f} s)"

    def to_json(self) -> dict[str, object]:
        return {"partition": self.partition, "startS": round(self.start_s, 3),
                "endS": round(self.end_s, 3), "lengthS": round(self.end_s - self.start_s, 3),
                "withMajorityS": round(self.eligible_s, 3),
                "waitingForLastIsrS": round(self.waiting_s, 3), "closed": self.closed,
                "cause": self.cause, "faults": self.faults,
                "steps": [[n, round(s, 3)] for n, s in self.steps], "timeline": self.timeline}


def gaps(acks: Sequence[float], sending: Sequence[Span]) -> list[tuple[float, float, bool]]:
    """(start, end, closed by an acknowledgement) of every stretch without an acknowledgement
    from the first send to the last stop (its end is the next acknowledgement, even a late
    one after the stop)."""
    if not sending:
        return []
    first, last = sending[0][0], sending[-1][1]
    times = sorted(acks)
    out = []
    at = first
    for t in times[bisect.bisect_right(times, first):]:
        out.append((at, t, True))
        at = t
        if t >= last:
            return out
    out.append((at, last, False))
    return out


def partition_windows(partition: int, acks: Sequence[float], sending: Sequence[Span],
                      up: Sequence[Span], waiting: Sequence[Span] = ()) -> list[Window]:
    """The windows, each measured over `sending` and `up` less `waiting` (no member of the
    last ISR up), with the time `waiting` took out of it."""
    counted = intersect(sending, up)
    eligible = subtract(counted, waiting)
    waited = intersect(counted, waiting)
    return [Window(partition, a, b, measure(eligible, a, b), closed, measure(waited, a, b))
            for a, b, closed in gaps(acks, sending)]


# -- the check --------------------------------------------------------------------------------

@dataclass
class DataTimes:
    """What the campaign knows about the data partitions' availability."""

    topic: str
    replicas: dict[int, list[int]]  # partition -> replica brokers (from the metadata)
    acks: dict[int, list[float]]  # partition -> acknowledgement times
    sending: list[Span]  # when producers were sending (every partition each tick)


def check_availability(data: DataTimes, outages: Sequence[Outage],
                       faults: Sequence[FaultRecord], events: Sequence[NodeEvent],
                       bound_s: float | None, terms: Sequence[str],
                       controllers: Sequence[int] = (),
                       controller_outages: Sequence[Outage] = (),
                       ) -> tuple[Check, dict[str, object]]:
    """The check (every partition's longest window with a majority up within `bound_s`) and the
    report: one row per partition and the windows of REPORT_FROM_S or more, longest first.
    `bound_s` None: the bound does not apply to the campaign's fault model (the windows are
    reported; only a partition never acknowledged fails). With `controllers`, time without a
    working majority of them (`quorum_up`) is not counted either."""
    name = "data: availability (longest window without an acknowledgement, majority up)"
    sending = union(data.sending)
    rows: list[dict[str, object]] = []
    listed: list[Window] = []
    problems = []
    if not data.replicas:
        problems.append("the partitions' replica sets were never described")
    for p in sorted(data.replicas):
        replicas, tp = data.replicas[p], f"{data.topic}-{p}"
        lo, hi = (sending[0][0], sending[-1][1]) if sending else (0.0, 0.0)
        up = majority_up(replicas, outages, lo, hi)
        quorum = quorum_up(controllers, controller_outages, faults, lo, hi) if controllers \
            else [(lo, hi)]
        up = intersect(up, quorum)
        waiting = last_isr_down(replicas, committed_isrs(tp, events), outages, lo, hi)
        windows = partition_windows(p, data.acks.get(p, []), sending, up, waiting)
        worst = max(windows, key=lambda w: w.eligible_s, default=None)
        long = [w for w in windows if w.eligible_s >= REPORT_FROM_S]
        for w in {id(w): w for w in [*long, *([worst] if worst else [])]}.values():
            w.faults, w.steps, w.timeline = attribute(
                w.start_s, w.end_s, w.closed, tp, replicas, events, outages, faults)
        listed.extend(long)
        counted = intersect(sending, up)
        row: dict[str, object] = {
            "partition": p, "replicas": replicas, "acks": len(data.acks.get(p, [])),
            "majorityUpS": round(measure(counted, lo, hi), 1),
            "noControllerQuorumS": round(measure(subtract(sending, quorum), lo, hi), 1),
            "waitingForLastIsrS": round(measure(intersect(counted, waiting), lo, hi), 1),
            "windowsFrom3S": len(long),
            "longestS": None if worst is None else round(worst.eligible_s, 3),
            "longest": None if worst is None else worst.to_json()}
        rows.append(row)
        if bound_s is not None and worst is not None and worst.eligible_s > bound_s:
            problems.append(
                f"partition {p}: {worst.eligible_s:.2f} s with a majority of {replicas} and a "
                f"last-ISR member up and no acknowledgement ({worst.start_s:.2f}-"
                f"{worst.end_s:.2f} s) > bound {bound_s:g} s; cause: {worst.cause}; faults: "
                f"{'; '.join(worst.faults) or '-'}")
        if not data.acks.get(p):
            problems.append(f"partition {p}: no acknowledgement at all")
    listed.sort(key=lambda w: -w.eligible_s)
    report: dict[str, object] = {
        "boundS": bound_s, "boundTerms": list(terms), "reportFromS": REPORT_FROM_S,
        "partitions": rows, "windows": [w.to_json() for w in listed[:MAX_LISTED]],
        "windowsListed": len(listed)}
    longest = max((r["longestS"] for r in rows if isinstance(r["longestS"], float)),
                  default=0.0)
    waited = max((r["waitingForLastIsrS"] for r in rows
                  if isinstance(r["waitingForLastIsrS"], float)), default=0.0)
    against = "bound not applicable" if bound_s is None else f"≤ bound {bound_s:g} s"
    summary = (f"longest {longest:.2f} s {against} over {len(rows)} partition(s); "
               f"{len(listed)} window(s) of {REPORT_FROM_S:g} s or more; up to {waited:.1f} s "
               "waiting for the last in-sync replica (by design, not counted)")
    if problems:
        return Check(name, False, f"{len(problems)} problem(s); first: {problems[0]}",
                     problems), report
    return Check(name, True, summary), report
