"""What one window without an acknowledgement was waiting for, step by step (availability.py).

The steps are read backwards from the window's end along the chain that ended it, from the
nodes' own log lines (node_events.py) and the campaign's record of its faults:

* after the last change of the partition the window holds (a new leader, a new ISR), the steps
  in time order (below); the last of them to the first acknowledgement is the **client**
  (librdkafka's metadata refresh and retries);
* a new ISR that holds a broker restarted in the window: **ISR change** from that broker's
  registration, **restart: registration** from its logs being loaded, **restart: log loading**
  from its process's first log line, **restart: process start** (the interpreter and its
  imports) from the campaign starting it again; a shrink: **ISR shrink (replica lag)** from
  when the dropped replica went down;
* a new leader after a replica's fencing: **partition leader election** from the fencing, and
  **fencing** from when the fenced broker went down;
* a controller election inside a step that is a metadata write (fencing, election, ISR change,
  registration) takes the part of it before the election;
* what is left at the window's start: **broker N out** when the broker the chain waited for
  (restarted, fenced, dropped) was down in it, else the **fault in effect** (the faults
  overlapping it).

A window in which the partition did not change at all is told step by step in time order
instead: the time before each node step or fault end counts for that step."""

from __future__ import annotations

import re
from collections.abc import Sequence

from tests.chaos.faults import FaultRecord, Outage
from tests.chaos.node_events import STEP_NAMES, NodeEvent

# A fault that ended this long before a window began is still listed with it: a restarted
# broker's registration can move leaderships seconds after its kill ended.
LOOKBACK_S = 5.0
CLIENT_STEP = "client: metadata refresh and retries"
OPEN_STEP = "no acknowledgement until the producers stopped"
RESTART_STEP = "restart: process start"
TIMELINE_LINES = 24
_ISR = re.compile(r"(?:is now|to|ISR) \[([\d, ]*)\]")

Steps = list[tuple[str, float]]


def isr_of(event: NodeEvent) -> list[int]:
    """The ISR a leader/ISR line ends with (the new one of a shrink)."""
    found = _ISR.findall(event.text)
    return [int(x) for x in found[-1].replace(" ", "").split(",") if x] if found else []


def attribute(a: float, b: float, closed: bool, tp: str, replicas: Sequence[int],
              events: Sequence[NodeEvent], outages: Sequence[Outage],
              faults: Sequence[FaultRecord]) -> tuple[list[str], Steps, list[str]]:
    """(faults near the window, steps longest first, the timeline of what happened in it)."""
    near = [r for r in faults if r.applied and r.started_s is not None
            and r.started_s < b and (r.ended_s is None or r.ended_s > a - LOOKBACK_S)]
    inside = [e for e in events if a < e.at_s <= b and _concerns(e, tp, replicas)]
    steps = _chain(a, b, closed, tp, replicas, inside, outages, near)
    if steps is None:
        steps = _in_order(a, b, closed, inside, near)
    took: dict[str, float] = {}
    for name, seconds in steps:
        took[name] = took.get(name, 0.0) + seconds
    ordered = sorted(((n, s) for n, s in took.items() if s > 0.0005), key=lambda x: -x[1])
    return [_fault_text(r, a) for r in near], ordered, _timeline(a, b, inside, near)


def _chain(a: float, b: float, closed: bool, tp: str, replicas: Sequence[int],
           inside: list[NodeEvent], outages: Sequence[Outage],
           near: list[FaultRecord]) -> Steps | None:
    changes = [e for e in inside if e.kind in ("leader", "isr") and e.subject == tp]
    if not changes:
        return None
    last = changes[-1]
    # After the partition's last change, the steps in time order (a follower restarting to
    # catch up is no change of the partition's); the client's is what follows the last one.
    steps: Steps = list(reversed(_in_order(last.at_s, b, closed, inside, near)))
    t = last.at_s

    def latest(kind: str, subject: str, after: float) -> NodeEvent | None:
        found = [e for e in inside if e.kind == kind and e.subject == subject
                 and after <= e.at_s <= t]
        return found[-1] if found else None

    def went_down(node: int) -> float:
        starts = [o.start_s for o in outages if o.node == node and o.start_s <= t
                  and (o.end_s is None or o.end_s >= a)]
        return max(a, max(starts)) if starts else a

    if len(changes) > 1 and "shrinking" in changes[-2].text and "shrinking" not in last.text:
        steps.append(("ISR change", t - changes[-2].at_s))  # the shrink's commit
        last = changes[-2]
        t = last.at_s
    restarted = [(r, n) for n in isr_of(last) if (r := latest("restart", str(n), a))]
    waited: list[int] = []  # the brokers the chain waited for
    if last.kind == "isr" and "shrinking" in last.text:
        dropped = [n for n in replicas if n not in isr_of(last)]
        waited = dropped
        since = min((went_down(n) for n in dropped), default=a)
        steps.append(("ISR shrink (replica lag)", t - since))
        t = since
    elif restarted:
        start, node = max(restarted, key=lambda x: x[0].at_s)
        waited = [node]
        for kind, name in (("registered", f"ISR change: broker {node} caught up"),
                           ("loaded", "restart: registration"),
                           ("up", "restart: log loading")):
            if (e := latest(kind, str(node), start.at_s)) is not None:
                steps.append((name, t - e.at_s))
                t = e.at_s
        steps.append((RESTART_STEP, t - start.at_s))
        t = start.at_s
    elif last.kind == "leader":
        fences = [e for e in inside if e.kind == "fence" and e.at_s <= t]
        if fences:
            steps.append(("partition leader election", t - fences[-1].at_s))
            t = fences[-1].at_s
            waited = [int(fences[-1].subject)]
            since = went_down(waited[0])
            steps.append(("fencing", t - since))
            t = since
    if t > a:
        steps.append((_before(a, t, waited, outages, near), t - a))
    return _split_by_elections(steps, b, inside)


def _before(a: float, t: float, waited: list[int], outages: Sequence[Outage],
            near: list[FaultRecord]) -> str:
    """What the start of a window, before its chain of steps, is put down to: the brokers the
    chain waited for when they were out in it (killed, paused or stopped, and restarted),
    else the faults in effect."""
    out = sorted({o.node for o in outages if o.node in waited and o.start_s < t
                  and (o.end_s is None or o.end_s > a)})
    active = [r for r in near if (r.started_s or 0.0) < t and (r.ended_s is None or r.ended_s > a)]
    if out:
        kinds = sorted({r.fault.kind for r in active if set(r.targets) & set(out)})
        return f"broker {', '.join(map(str, out))} out ({', '.join(kinds) or 'exited'})"
    kinds = sorted({r.fault.kind for r in active})
    return f"fault in effect: {', '.join(kinds)}" if kinds else "before any node step"


def _needs_controller(step: str) -> bool:
    """Steps that are metadata writes (a process start, a client and a fault do not wait for
    an active controller)."""
    return step in ("fencing", "partition leader election", "restart: registration") \
        or step.startswith("ISR")


def _split_by_elections(steps: Steps, b: float, inside: list[NodeEvent]) -> Steps:
    """Steps laid end to end back from `b`; a controller election inside one that is a
    metadata write takes the part of it before the election (no write without an active
    controller)."""
    out: Steps = []
    end = b
    for name, seconds in steps:
        start = end - seconds
        elections = [e.at_s for e in inside if e.kind == "controller" and start < e.at_s < end]
        if elections and _needs_controller(name):
            out.append((name, end - elections[-1]))
            out.append((STEP_NAMES["controller"], elections[-1] - start))
        else:
            out.append((name, seconds))
        end = start
    return out


def _in_order(a: float, b: float, closed: bool, inside: list[NodeEvent],
              near: list[FaultRecord]) -> Steps:
    marks = [(r.ended_s, f"fault in effect: {r.fault.kind}") for r in near
             if r.ended_s is not None and a < r.ended_s <= b]
    marks += [(e.at_s, STEP_NAMES[e.kind]) for e in inside if a < e.at_s <= b]
    steps: Steps = []
    at = a
    for t, name in sorted(marks):
        steps.append((name, t - at))
        at = t
    steps.append((CLIENT_STEP if closed else OPEN_STEP, b - at))
    return steps


def _timeline(a: float, b: float, inside: list[NodeEvent], near: list[FaultRecord]) -> list[str]:
    marks = [(e.at_s, e.describe()) for e in inside]
    for r in near:
        what = f"#{r.fault.index} {r.fault.kind} on {r.targets}"
        if r.started_s is not None and a < r.started_s <= b:
            marks.append((r.started_s, f"{r.started_s:.2f} s start {what}"))
        if r.ended_s is not None and a < r.ended_s <= b:
            marks.append((r.ended_s, f"{r.ended_s:.2f} s end {what}"))
    lines = [line for _, line in sorted(marks)]
    if len(lines) <= TIMELINE_LINES:
        return lines
    # The end says what finally ended the window; the start what began it.
    head = TIMELINE_LINES // 3
    tail = TIMELINE_LINES - head
    return [*lines[:head], f"... {len(lines) - TIMELINE_LINES} more ...", *lines[-tail:]]


def _concerns(event: NodeEvent, tp: str, replicas: Sequence[int]) -> bool:
    if event.kind in ("leader", "isr"):
        return event.subject == tp
    if event.kind == "controller":
        return True
    return event.subject.isdigit() and int(event.subject) in replicas  # fence, restart, ...


def _fault_text(r: FaultRecord, a: float) -> str:
    when = f"{r.started_s:.2f}-" + ("heal" if r.ended_s is None else f"{r.ended_s:.2f}") + " s"
    before = (f", ended {a - r.ended_s:.1f} s before"
              if r.ended_s is not None and r.ended_s <= a else "")
    value = f" {r.fault.value} ms" if r.fault.value else ""
    return f"#{r.fault.index} {r.fault.kind} {r.targets}{value} {when}{before}"
