"""What the nodes' own log lines say happened, on the campaign's clock: the steps a partition's
outage is made of (a fencing, a controller or partition-leader election, an ISR change, a
broker's restart: its logs loaded, its registration). The lines are the product's
(metadata/controller.py, broker/replica/manager.py and isr.py, broker/lifecycle.py,
broker/log/log_loader.py); the timestamp is the process's wall clock (server/logging_setup.py,
`asctime`), which an injected clock step does not move (it offsets only the clock records are
stamped with, kraft/node/faults.py), so it converts to campaign time with the wall clock the
campaign read at its start."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from pathlib import Path

# A line's start: `2026-11-29 07:04:59,123 INFO [node=4 state=Follower epoch=7] name: message`.
_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) ")
# The campaign's marker before it starts a node again (faults.RUN_MARK); it has no timestamp
# but says the campaign time.
_RUN_MARK = re.compile(r"^=== chaos campaign: node started again .* at (-?[\d.]+) s\)")
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("fence", re.compile(r"fencing broker (\d+): (.*)")),
    ("controller", re.compile(r"active controller for epoch (\d+)")),
    ("leader", re.compile(r"leading (\S+)-(\d+) in epoch (\d+) from offset (\d+) \(ISR (.*)\)")),
    ("isr", re.compile(r"(?:shrinking the ISR of|ISR of) (\S+)-(\d+) (?:from|is now) (.*)")),
    ("loaded", re.compile(r"loaded (\d+) partition log\(s\) from")),
    ("registered", re.compile(r"registered broker (\d+) with epoch (\d+)")),
)
# What a step of each kind is, in the availability report.
STEP_NAMES = {
    "fence": "fencing",
    "controller": "controller election",
    "leader": "partition leader election",
    "isr": "ISR change",
    "loaded": "restart: log loading",
    "registered": "restart: registration",
    "restart": "restart issued",
    "up": "restart: process start",
}


@dataclass(frozen=True)
class NodeEvent:
    at_s: float  # campaign time
    node: int  # the node whose log holds the line
    kind: str  # a key of STEP_NAMES
    subject: str  # the broker id, `topic-partition` or epoch the line is about
    text: str  # the message, shortened

    def describe(self) -> str:
        return f"{self.at_s:.2f} s node {self.node}: {self.text}"


def line_time(line: str, wall_t0: float) -> float | None:
    """The campaign time of a timestamped log line, None for any other line."""
    match = _STAMP.match(line)
    if match is None:
        return None
    try:
        wall = time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None
    return wall + int(match.group(2)) / 1000 - wall_t0


def parse_line(line: str, node: int, wall_t0: float) -> NodeEvent | None:
    """One event of a node's log line, or None when the line is not a step we time."""
    if (mark := _RUN_MARK.match(line)) is not None:
        return NodeEvent(float(mark.group(1)), node, "restart", str(node), "started again")
    at = line_time(line, wall_t0)
    if at is None:
        return None
    message = line.split("] ", 1)[-1].split(": ", 1)[-1].strip()
    for kind, pattern in _PATTERNS:
        match = pattern.search(line)
        if match is None:
            continue
        if kind in ("leader", "isr"):
            subject = f"{match.group(1)}-{match.group(2)}"
        elif kind == "loaded":
            subject = str(node)
        else:
            subject = match.group(1)
        return NodeEvent(at, node, kind, subject, message[:160])
    return None


def read_events(log_paths: dict[int, Path], wall_t0: float) -> list[NodeEvent]:
    """Every timed step in the nodes' logs, sorted by time (an unreadable log gives none), and
    for each restart the first line its process wrote ("up")."""
    events: list[NodeEvent] = []
    for node, path in log_paths.items():
        try:
            text = path.read_text(errors="replace")
        except OSError:
            continue
        starting = False  # after the campaign's restart marker, before the run's first line
        for line in text.splitlines():
            event = parse_line(line, node, wall_t0)
            if starting and (at := line_time(line, wall_t0)) is not None:
                # The new process's first line: its interpreter and imports are done.
                events.append(NodeEvent(at, node, "up", str(node), "first log line"))
                starting = False
            if event is not None:
                events.append(event)
                starting = starting or event.kind == "restart"
    events.sort(key=lambda e: e.at_s)
    return events


def last_line_time(run: str, wall_t0: float, marker: str | None = None) -> float | None:
    """The campaign time of the last timestamped line of a node's run (of the last line
    holding `marker`, when given): when a process that exited by itself was last heard of."""
    for line in reversed(run.splitlines()):
        if marker is not None and marker not in line:
            continue
        at = line_time(line, wall_t0)
        if at is not None:
            return at
    return None
