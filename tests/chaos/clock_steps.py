"""A step of the wall clock must fence nobody (issue 28, defect 3).

The controller times broker sessions on a monotonic clock and stamps records with the node's
wall clock, which the clock-jump fault offsets (kraft/node/faults.py). Every clock-jump also
reaches the active controller of the moment (faults.Injector), so a session timed on the wall
clock would show: a forward step (the start of a positive offset, the end of a negative one)
expires every session at once, and a backward one keeps a dead broker unfenced. The check:
no broker that was running is fenced by a controller while that controller's or that broker's
clock is stepped, or within one session timeout after the step ends (the end is a step too),
unless the controller had become active within one session timeout before (sessions restart
then), or a network partition had the two on opposite sides (no heartbeat got through)."""

from __future__ import annotations

from collections.abc import Sequence

from tests.chaos.checks import Check
from tests.chaos.faults import FaultRecord, Outage
from tests.chaos.node_events import NodeEvent

# A broker down (killed, paused, stopped) or a controller down this long before a fencing
# explains it without the clock: a session's timeout and heartbeat, and a restarted broker's
# start until it registers again.
RESTART_ALLOWANCE_S = 5.0


def _down(outages: Sequence[Outage], node: int, lo: float, hi: float) -> Outage | None:
    for o in outages:
        if o.node == node and o.start_s <= hi and (o.end_s is None or o.end_s >= lo):
            return o
    return None


def _separated(records: Sequence[FaultRecord], a: int, b: int, lo: float,
               hi: float) -> FaultRecord | None:
    """A network partition with `a` and `b` on opposite sides during [lo, hi]: no heartbeat
    of one reaches the other then, whatever the clocks say."""
    for r in records:
        if r.fault.kind not in ("partition", "isolate-leader") or r.started_s is None:
            continue
        if r.started_s > hi or (r.ended_s is not None and r.ended_s < lo):
            continue
        sides = (set(r.targets), set(r.other_side))
        if any(a in side and b in other for side, other in (sides, sides[::-1])):
            return r
    return None


def check_clock_steps(records: Sequence[FaultRecord], outages: Sequence[Outage],
                      events: Sequence[NodeEvent], session_timeout_s: float,
                      heartbeat_interval_s: float,
                      scheduled: int) -> tuple[Check, dict[str, object]]:
    """`scheduled`: clock-jump faults in the schedule; when there were any, at least one must
    have reached the active controller, or the campaign proved nothing about its clock."""
    name = "clock steps fence no running broker"
    steps = [r for r in records if r.fault.kind == "clock-jump" and r.applied
             and r.started_s is not None]
    on_active = [r for r in steps if r.active_controller is not None]
    after = session_timeout_s + heartbeat_interval_s + 1.0
    lookback = session_timeout_s + heartbeat_interval_s + RESTART_ALLOWANCE_S
    problems: list[str] = []
    fences = [e for e in events if e.kind == "fence" and e.subject.isdigit()]
    activations = [(e.node, e.at_s) for e in events if e.kind == "controller"]
    during = 0
    for e in fences:
        broker, controller = int(e.subject), e.node
        covering = [r for r in steps
                    if (r.started_s or 0.0) <= e.at_s <= (r.ended_s or float("inf")) + after
                    and (controller in r.targets or broker in r.targets)]
        if not covering:
            continue
        during += 1
        if _down(outages, broker, e.at_s - lookback, e.at_s) is not None \
                or _down(outages, controller, e.at_s - lookback, e.at_s) is not None:
            continue  # the broker (or the controller) was down: not the clock
        if _separated(records, controller, broker, e.at_s - lookback, e.at_s) is not None:
            # A partition kept the broker's heartbeats from that controller (seed 1 with two
            # test files at a time: the controller cut off alone, fencing every broker while
            # it could still act as active).
            continue
        if any(node == controller and 0 <= e.at_s - at <= after for node, at in activations):
            # The controller had just become active: every session starts afresh then, and a
            # broker that has not found the new controller within one session is fenced
            # (seed 418577 at load average 22: 2.3 s after a step began, 3.1 s after the
            # activation).
            continue
        r = covering[0]
        problems.append(
            f"controller {controller} fenced running broker {broker} at {e.at_s:.2f} s "
            f"({e.text}) during clock step #{r.fault.index} ({r.fault.value:+d} ms on "
            f"{r.targets}, {r.started_s:.2f}-{r.ended_s or 0.0:.2f} s); neither was down in "
            f"the {lookback:g} s before")
    if scheduled and not on_active:
        problems.append(f"none of the {scheduled} scheduled clock step(s) reached the active "
                        f"controller ({len(steps)} applied, to no active controller)")
    report: dict[str, object] = {
        "applied": len(steps), "onActiveController": len(on_active),
        "fencingsInAll": len(fences), "fencingsDuringSteps": during,
        "steps": [{"index": r.fault.index, "valueMs": r.fault.value, "targets": r.targets,
                   "activeController": r.active_controller,
                   "startedS": round(r.started_s or 0.0, 2),
                   "endedS": None if r.ended_s is None else round(r.ended_s, 2)}
                  for r in steps]}
    if problems:
        return Check(name, False, f"{len(problems)} problem(s); first: {problems[0]}",
                     problems), report
    return Check(name, True, f"{len(steps)} clock step(s) applied, {len(on_active)} on the "
                             f"active controller; {during} fencing(s) in their windows, each "
                             "explained by an outage or a newly active controller"), report
