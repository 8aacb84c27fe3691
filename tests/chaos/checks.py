"""The safety checks: the writes the clients saw acknowledged against the committed log and
against what the nodes serve."""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.chaos.committed import CommittedIndex
from tests.chaos.writers import Write

MAX_DETAILS = 10


@dataclass
class Check:
    name: str
    ok: bool
    summary: str
    details: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "summary": self.summary,
                "details": self.details[:MAX_DETAILS]}


def _check(name: str, problems: list[str], summary: str) -> Check:
    if problems:
        return Check(name, False, f"{len(problems)} problem(s); first: {problems[0]}", problems)
    return Check(name, True, summary)


def offsets_of(write: Write, index: CommittedIndex) -> list[int]:
    if write.kind == "create":
        return [offset for offset, _ in index.topics.get(write.topic, [])]
    return index.configs.get((write.topic, write.value), [])


def check_log(writes: list[Write], index: CommittedIndex) -> list[Check]:
    """Every acknowledged write exactly once, any other at most once, nothing nobody wrote,
    and acknowledgement order for writes that did not overlap in time."""
    missing, duplicated, phantom = [], [], []
    placed: list[tuple[Write, int]] = []
    for write in writes:
        found = offsets_of(write, index)
        if write.acked and not found:
            missing.append(f"acknowledged {write.kind} {write.topic} {write.value} "
                           f"(writer {write.writer} #{write.seq}, acked at "
                           f"{write.end_s:.3f} s) is not in the committed log")
        if len(found) > 1:
            duplicated.append(f"{write.kind} {write.topic} {write.value} is committed "
                              f"{len(found)} times, at offsets {found}")
        if write.acked and len(found) == 1:
            placed.append((write, found[0]))
    attempted_topics = {w.topic for w in writes if w.kind == "create"}
    attempted_values = {(w.topic, w.value) for w in writes if w.kind == "config"}
    phantom += [f"topic {name} is committed but was never written" for name in index.topics
                if name not in attempted_topics]
    phantom += [f"{topic} {value} is committed but was never written"
                for topic, value in index.configs if (topic, value) not in attempted_values]
    acked = sum(w.acked for w in writes)
    return [
        _check("acknowledged writes are committed", missing,
               f"all {acked} acknowledged writes are in the committed log of node "
               f"{index.reference} (offsets < {index.end})"),
        _check("no write is committed twice", duplicated, "every write at most once"),
        _check("nothing committed that nobody wrote", phantom, "no phantom records"),
        _check("acknowledgement order", order_violations(placed),
               f"{len(placed)} acknowledged writes: non-overlapping ones committed in order"),
        _check("nodes agree on committed records", index.disagreements,
               "every node's committed records equal the reference node's"),
    ]


def order_violations(placed: list[tuple[Write, int]]) -> list[str]:
    """A write acknowledged before another started must sit at a lower offset."""
    by_end = sorted(placed, key=lambda p: p[0].end_s or 0.0)
    by_start = sorted(placed, key=lambda p: p[0].start_s)
    problems = []
    k = 0
    latest: tuple[Write, int] | None = None  # the highest offset among writes acked so far
    for write, offset in by_start:
        while k < len(by_end) and (by_end[k][0].end_s or 0.0) < write.start_s:
            if latest is None or by_end[k][1] > latest[1]:
                latest = by_end[k]
            k += 1
        if latest is not None and latest[1] > offset:
            before, before_offset = latest
            problems.append(
                f"{before.kind} {before.topic} {before.value} was acked at "
                f"{before.end_s:.3f} s (offset {before_offset}) before {write.kind} "
                f"{write.topic} {write.value} started at {write.start_s:.3f} s, but the "
                f"latter is at offset {offset}")
    return problems


@dataclass
class Served:
    """What one node answers: chaos topics (name -> id) and writer topics' config values."""

    node_id: int
    topics: dict[str, str]
    configs: dict[str, str | None]


def check_served(served: list[Served], writes: list[Write], index: CommittedIndex) -> Check:
    problems = []
    acked_topics = {w.topic for w in writes if w.acked and w.kind == "create"}
    for view in served:
        for name in sorted(acked_topics - view.topics.keys()):
            problems.append(f"node {view.node_id} does not serve acknowledged topic {name}")
        for name, topic_id in view.topics.items():
            committed = index.topics.get(name)
            if not committed:
                problems.append(f"node {view.node_id} serves topic {name}, which is not in "
                                "the committed log")
            elif committed[0][1] != topic_id:
                problems.append(f"node {view.node_id} serves {name} as {topic_id}, the log "
                                f"has {committed[0][1]}")
        for topic, value in view.configs.items():
            last = index.last_config.get(topic)
            if last is not None and last[1] != value:
                problems.append(f"node {view.node_id} serves {topic} retention.ms={value}, "
                                f"the last committed value is {last[1]}")
    nodes = ",".join(str(v.node_id) for v in served)
    return _check("served metadata equals the committed log", problems,
                  f"nodes {nodes} serve every acknowledged topic and the last committed "
                  "config values")
