"""The safety checks: the writes the clients saw acknowledged against **every** node's
committed log and against what the nodes serve, and the campaign's own intensity floors."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field

from tests.chaos.committed import ChaosState, CommittedIndex, NodeIndex, NodeLog
from tests.chaos.partitions import Ack, Batch, Read, ReplicaLog, Watermark
from tests.chaos.writers import CONFIG_KEY, Write

MAX_DETAILS = 10

# Floors on a campaign's intensity, from measured runs (docs/chaos.md, "Floors"): about half
# of the rates measured on the shared 2-core machine. A schedule's lane holds one fault per
# 4.75 s on average (1-5 s long, 0.5-3 s apart); a writer acknowledged 4-8 writes per second.
FAULTS_PER_LANE_S = 0.1
WRITES_PER_WRITER_S = 2.0


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


def offsets_of(write: Write, index: NodeIndex) -> list[int]:
    if write.kind == "create":
        return [offset for offset, _ in index.topics.get(write.topic, [])]
    return index.configs.get((write.topic, write.value), [])


def _describe(write: Write) -> str:
    what = f"{write.kind} {write.topic}" + (f" {write.value}" if write.value else "")
    acked = f", acked at {write.end_s:.3f} s" if write.acked and write.end_s is not None else ""
    return f"{what} (writer {write.writer} #{write.seq}{acked})"


def _in_base(write: Write, base: ChaosState | None) -> bool:
    if base is None:
        return False
    if write.kind == "create":
        return write.topic in base.topics
    return base.config(write.topic, CONFIG_KEY) == write.value


def _missing_on_node(write: Write, log: NodeLog, base: ChaosState | None,
                     index: CommittedIndex) -> str | None:
    """Why an acknowledged write that the node's log does not hold is not on the node, or
    None when its snapshot covers it (a fetched snapshot replaced the log below `start`)."""
    found = offsets_of(write, index.canonical)
    at = found[0] if found else None
    where = (f"node {log.node_id} (log {log.start}..{log.committed_end - 1}, high-watermark "
             f"file {log.hw_file})")
    if at is not None and base is not None and at < log.start:
        snapshot = log.base_snapshot or f"the snapshot at {log.start}"
        if write.kind == "create":
            committed_id = index.canonical.topics[write.topic][0][1]
            if base.topics.get(write.topic) == committed_id:
                return None
            return (f"acknowledged {_describe(write)}, committed at offset {at}, is not in "
                    f"{where}: {snapshot} lacks it (or holds another id)")
        last = index.last_config_below(write.topic, CONFIG_KEY, log.start)
        expected = None if last is None else last[1]
        if base.config(write.topic, CONFIG_KEY) == expected:
            return None  # overwritten below the snapshot, which holds the last value
        return (f"acknowledged {_describe(write)}, committed at offset {at}: {snapshot} of "
                f"node {log.node_id} holds {CONFIG_KEY}="
                f"{base.config(write.topic, CONFIG_KEY)}, the log's last value below "
                f"{log.start} is {expected}")
    if at is None:
        return f"acknowledged {_describe(write)} is not in {where} (nor in any node's log)"
    if at >= log.committed_end:
        return (f"acknowledged {_describe(write)}, committed at offset {at}, is not in "
                f"{where}: the node has not caught up to it")
    return f"acknowledged {_describe(write)}, committed at offset {at}, is not in {where}"


def check_log(writes: list[Write], index: CommittedIndex) -> list[Check]:
    """Every acknowledged write exactly once in every node's committed log (its log up to
    its high watermark, and the snapshot its log starts at); any other write at most once
    anywhere; nothing nobody wrote; acknowledgement order for writes that did not overlap in
    time; every log readable up to its high watermark; the nodes agreeing."""
    unreadable = [p for n in sorted(index.nodes) for p in index.nodes[n].problems]
    missing, duplicated = [], []
    covered = 0
    for node_id in sorted(index.nodes):
        log, node_index = index.nodes[node_id], index.per_node[node_id]
        base = log.base_state(index.prefix)
        for write in writes:
            found = offsets_of(write, node_index)
            below = _in_base(write, base)
            if len(found) + below > 1:
                where = f"offsets {found}" + (f" and below its snapshot at {log.start}"
                                              if below else "")
                duplicated.append(f"{_describe(write)} is committed {len(found) + below} "
                                  f"times on node {node_id}: {where}")
            if write.acked and not found and not below:
                reason = _missing_on_node(write, log, base, index)
                if reason is None:
                    covered += 1
                else:
                    missing.append(reason)
    placed = [(w, found[0]) for w in writes
              if w.acked and len(found := offsets_of(w, index.canonical)) == 1]
    acked = sum(w.acked for w in writes)
    nodes = len(index.nodes)
    starts = {n: log.start for n, log in index.nodes.items() if log.start > 0}
    via = (f" ({covered} checked through the snapshot that replaced the log below "
           f"{starts} on node(s) {sorted(starts)})" if covered else "")
    return [
        _check("every node's log is readable up to its high watermark", unreadable,
               f"{nodes} nodes: every log reads without a gap or a bad batch up to its "
               "high-watermark file"),
        _check("acknowledged writes are committed", missing,
               f"all {acked} acknowledged writes are in the committed log of every one of "
               f"the {nodes} nodes{via}"),
        _check("no write is committed twice", duplicated,
               "every write at most once on every node"),
        _check("nothing committed that nobody wrote", phantoms(writes, index),
               "no phantom records"),
        _check("acknowledgement order", order_violations(placed),
               f"{len(placed)} acknowledged writes: non-overlapping ones committed in order"),
        _check("nodes agree on committed records", index.disagreements,
               "every offset any two nodes hold committed is the same record on both"),
    ]


def phantoms(writes: list[Write], index: CommittedIndex) -> list[str]:
    attempted_topics = {w.topic for w in writes if w.kind == "create"}
    attempted_values = {(w.topic, w.value) for w in writes if w.kind == "config"}
    where: dict[str, set[int]] = {}  # what -> the nodes whose committed log holds it
    for node_id, node_index in index.per_node.items():
        for name in node_index.topics:
            if name not in attempted_topics:
                where.setdefault(f"topic {name}", set()).add(node_id)
        for topic, value in node_index.configs:
            if (topic, value) not in attempted_values:
                where.setdefault(f"{topic} {CONFIG_KEY}={value}", set()).add(node_id)
    out = [f"{what} is committed on node(s) {sorted(nodes)} but was never written"
           for what, nodes in sorted(where.items())]
    out += [f"{topic} {key} is committed but no writer sets that key"
            for topic, key in index.config_history if key != CONFIG_KEY]
    for node_id, log in sorted(index.nodes.items()):
        base = log.base_state(index.prefix)
        if base is None:
            continue
        out += [f"topic {name} is in node {node_id}'s snapshot at {log.start} but was never "
                "written" for name in base.topics if name not in attempted_topics]
        out += [f"{topic} {key}={value} is in node {node_id}'s snapshot at {log.start} but "
                "was never written" for (topic, key), value in base.configs.items()
                if key != CONFIG_KEY or (topic, value) not in attempted_values]
    return out


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
    """What one node answers: chaos topics (name -> id) and, for the topics it was asked
    about (`described`), every dynamic topic config ((topic, key) -> value)."""

    node_id: int
    topics: dict[str, str]
    configs: dict[tuple[str, str], str | None]
    described: frozenset[str] = frozenset()


def check_served(served: list[Served], writes: list[Write], index: CommittedIndex) -> Check:
    """Both ways: everything committed (and every acknowledged topic) is served, and nothing
    is served that is not committed — topics with their ids, config keys with their values."""
    problems = []
    committed = index.state_below(index.end, index.prefix)
    acked_topics = {w.topic for w in writes if w.acked and w.kind == "create"}
    for view in served:
        n = view.node_id
        for name in sorted(acked_topics - view.topics.keys()):
            problems.append(f"node {n} does not serve acknowledged topic {name}")
        for name in sorted(committed.topics.keys() - view.topics.keys() - acked_topics):
            problems.append(f"node {n} does not serve topic {name}, which is committed")
        for name, topic_id in sorted(view.topics.items()):
            if name not in committed.topics:
                problems.append(f"node {n} serves topic {name}, which is not in the committed "
                                "log")
            elif committed.topics[name] != topic_id:
                problems.append(f"node {n} serves {name} as {topic_id}, the log has "
                                f"{committed.topics[name]}")
        want = {k: v for k, v in committed.configs.items() if k[0] in view.described}
        for (topic, key), value in sorted(want.items()):
            got = view.configs.get((topic, key))
            if (topic, key) not in view.configs:
                problems.append(f"node {n} serves no {key} for {topic}, the last committed "
                                f"value is {value}")
            elif got != value:
                problems.append(f"node {n} serves {topic} {key}={got}, the last committed "
                                f"value is {value}")
        for (topic, key), value in sorted(view.configs.items()):
            if (topic, key) not in want:
                problems.append(f"node {n} serves {topic} {key}={value}, which is not in the "
                                "committed log")
    nodes = ",".join(str(v.node_id) for v in served)
    described = max((len(v.described) for v in served), default=0)
    return _check("served metadata equals the committed log", problems,
                  f"nodes {nodes} serve exactly the {len(committed.topics)} committed chaos "
                  f"topics, and exactly the committed configs of the {described} topics that "
                  "have any")


def floors(duration_s: float, lanes: int, writers: int) -> tuple[int, int]:
    """(faults, writes): the least a campaign of this length must apply and acknowledge."""
    return (math.floor(FAULTS_PER_LANE_S * lanes * duration_s),
            math.floor(WRITES_PER_WRITER_S * writers * duration_s))


def check_floors(applied_faults: int, acked_writes: int, duration_s: float, lanes: int,
                 writers: int) -> list[Check]:
    """A campaign too gentle to prove anything fails: fewer confirmed faults or fewer
    acknowledged writes than its floors."""
    fault_floor, write_floor = floors(duration_s, lanes, writers)
    return [
        Check("enough faults applied", applied_faults >= fault_floor,
              f"{applied_faults} faults confirmed applied; the floor for {duration_s:g} s "
              f"and {lanes} lane(s) is {fault_floor} ({FAULTS_PER_LANE_S:g} per lane-second)"),
        Check("enough writes acknowledged", acked_writes >= write_floor,
              f"{acked_writes} writes acknowledged; the floor for {duration_s:g} s and "
              f"{writers} writer(s) is {write_floor} ({WRITES_PER_WRITER_S:g} per "
              "writer-second)"),
    ]


# Fault kinds that can kill -9 or SIGSTOP a broker (kill-leader and isolate-leader aim at the
# active controller).
BROKER_KILL_KINDS = ("kill", "kill-broker")
BROKER_PAUSE_KINDS = ("pause", "pause-broker")


def check_broker_faults(applied: list[tuple[str, int]], brokers: list[int],
                        kinds: tuple[str, ...]) -> Check:
    """With producers, the data part proves something only if partition leaders and
    followers died and hung: at least one kill -9 and one SIGSTOP of a broker confirmed
    applied (`applied`: (kind, target) of every applied fault), for each of the two that
    the campaign's fault kinds can cause at all. The fault floor counts faults of any kind."""
    kills = sum(kind in BROKER_KILL_KINDS and target in brokers for kind, target in applied)
    pauses = sum(kind in BROKER_PAUSE_KINDS and target in brokers for kind, target in applied)
    missing = [what for what, count, possible in (
        ("kill -9", kills, BROKER_KILL_KINDS), ("SIGSTOP", pauses, BROKER_PAUSE_KINDS))
        if count == 0 and any(k in kinds for k in possible)]
    summary = (f"{kills} broker kill(s) and {pauses} broker pause(s) confirmed applied "
               f"(brokers {brokers})")
    if missing:
        return Check("data: broker kills and pauses applied", False,
                     f"{summary}: no {' and no '.join(missing)} of a broker; a longer run or "
                     "another seed", [f"no {what} of a broker was applied" for what in missing])
    return Check("data: broker kills and pauses applied", True, summary)


# -- the data plane (docs/chaos.md, "Data") ------------------------------------------------------

# Floor on acknowledged records per producer-second: about half of the lowest rate measured
# (docs/chaos.md, "Floors").
RECORDS_PER_PRODUCER_S = 25.0

PartitionValues = dict[int, dict[int, bytes]]  # partition -> offset -> value


def _p(partition: int, offset: int) -> str:
    return f"{partition}@{offset}"


# librdkafka's debug line (facility ERRSEQ) for the epoch bump of issue #4953: a batch behind
# one that failed with a retriable error was refused OUT_OF_ORDER_SEQUENCE_NUMBER, and the
# client bumps its epoch and renumbers every record it still holds, the failed batch's too,
# although that batch's first attempt may have been written (the Java client retries without a
# bump). Kafka answers that batch so too (the sequence check follows the min-ISR check).
CLIENT_BUMP = "due to skipped sequence numbers"


def client_duplicates(replicas: dict[int, dict[int, ReplicaLog]],
                      client_lines: dict[int, list[str]]) -> tuple[Check, dict[bytes, str]]:
    """Values in a replica's files more than once, by the headers of their batches: copies
    that one producer id wrote under a later producer epoch each, by a producer whose client
    logged CLIENT_BUMP (`client_lines`: producer -> its journaled librdkafka lines), are the
    client's (returned with their cause; checks (a) and (d) leave them out); any other
    duplicate fails here with its headers (one epoch twice is a broker's bug)."""
    explained: dict[bytes, str] = {}
    problems: list[str] = []
    for p, by_broker in sorted(replicas.items()):
        for broker, log in sorted(by_broker.items()):
            where: dict[bytes, list[int]] = {}
            for offset, value in log.records.items():
                where.setdefault(value, []).append(offset)
            for value, offsets in sorted(where.items()):
                if len(offsets) < 2 or value in explained:
                    continue
                copies = sorted(offsets)
                origins = [log.origins.get(o, (-1, -1, -1)) for o in copies]
                shown = ", ".join(f"{_p(p, o)} (producer id {pid}, epoch {e}, sequence {s})"
                                  for o, (pid, e, s) in zip(copies, origins, strict=True))
                epochs = [e for _, e, _ in origins]
                one_id = len({pid for pid, _, _ in origins}) == 1 and origins[0][0] >= 0
                rising = all(a < b for a, b in itertools.pairwise(epochs))
                producer = _producer_of(value)
                bumps = [line for line in client_lines.get(producer, []) if CLIENT_BUMP in line]
                if one_id and rising and bumps:
                    explained[value] = (f"{value!r} at {shown}: producer {producer}'s client "
                                        f"bumped its epoch ({bumps[0][:160]})")
                else:
                    reason = ("one producer epoch twice: the broker's deduplication failed"
                              if not rising else "a later epoch, without the client's "
                              f"'{CLIENT_BUMP}' line journaled")
                    problems.append(f"broker {broker}: {value!r} at {shown}: {reason}")
    check = _check("data: every record written twice is the client's epoch bump "
                   "(librdkafka #4953)", problems,
                   f"{len(explained)} value(s) written again under a new producer epoch by "
                   "the client, none twice in one epoch")
    if check.ok:
        check.details = list(explained.values())[:MAX_DETAILS]
    return check, explained


def _producer_of(value: bytes) -> int:
    """The producer of a campaign value p<producer>-<seq> (-1 for any other)."""
    head = value.split(b"-", 1)[0]
    return int(head[1:]) if head[:1] == b"p" and head[1:].isdigit() else -1


def check_acked_records(acks: list[Ack], sources: dict[str, PartitionValues],
                        hws: dict[int, int], attempted: set[bytes],
                        explained: dict[bytes, str] | None = None) -> Check:
    """(a) Every acknowledged record exactly once, at the offset its delivery report gave, in
    every source's log below the partition's high watermark (a source is the leaders' log as a
    consumer reads it back, or one ISR replica's files; it holds the partitions it is checked
    for); no value twice, but those `explained` (client_duplicates); no value no producer
    sent."""
    explained = explained or {}
    problems: list[str] = []
    checked = 0
    for source, partitions in sorted(sources.items()):
        where: dict[bytes, list[tuple[int, int]]] = {}
        for p, log in sorted(partitions.items()):
            for offset, value in sorted(log.items()):
                if offset < hws.get(p, 0):
                    where.setdefault(value, []).append((p, offset))
        for value, places in sorted(where.items()):
            if len(places) > 1 and value not in explained:
                problems.append(f"{source}: {value!r} is in the log {len(places)} times, at "
                                + ", ".join(_p(*x) for x in places))
            if value not in attempted:
                problems.append(f"{source}: {value!r} at {_p(*places[0])} was never produced")
        for ack in acks:
            if ack.partition not in partitions:
                continue
            checked += 1
            found = where.get(ack.value, [])
            if (ack.partition, ack.offset) in found:
                continue
            if ack.offset is None:
                # librdkafka reports some idempotent successes with no offset (a batch it
                # knows persisted because a later one of the producer was): once in its
                # partition, anywhere (twice is caught above).
                if not any(p == ack.partition for p, _ in found):
                    problems.append(f"{source}: acknowledged {ack.value!r} (partition "
                                    f"{ack.partition}, no offset reported, at {ack.at_s:.3f} "
                                    "s) is not in the log: lost")
                continue
            hw = hws.get(ack.partition, 0)
            held = partitions[ack.partition].get(ack.offset)
            if found:
                problems.append(f"{source}: acknowledged {ack.value!r} (producer "
                                f"{ack.producer}, at {ack.at_s:.3f} s) is at "
                                f"{', '.join(_p(*x) for x in found)}, its delivery report "
                                f"said {_p(ack.partition, ack.offset)}")
            elif ack.offset >= hw:
                problems.append(f"{source}: acknowledged {ack.value!r} at "
                                f"{_p(ack.partition, ack.offset)} (at {ack.at_s:.3f} s) is at "
                                f"or above the high watermark {hw}: lost")
            else:
                problems.append(f"{source}: acknowledged {ack.value!r} at "
                                f"{_p(ack.partition, ack.offset)} (at {ack.at_s:.3f} s) is "
                                f"lost: the offset holds {held!r}")
    return _check("data: acknowledged records present exactly once at their offsets", problems,
                  f"{len(acks)} acknowledged records, each exactly once at its offset in "
                  f"{len(sources)} logs ({checked} record-log pairs checked): "
                  + ", ".join(sorted(sources)))


def check_replicas_agree(replicas: dict[int, dict[int, ReplicaLog]], hws: dict[int, int],
                         isr: dict[int, list[int]], min_isr: int = 2) -> Check:
    """(b) Every ISR replica of a partition holds the same batches (bytes from byte 12 on:
    epoch, CRC, records) at the same offsets from 0 up to the high watermark, without a gap
    or a bad batch there. Every partition must have at least `min_isr` ISR members to
    compare (min.insync.replicas: an acknowledged record is on that many): an unknown or
    short ISR compares nothing, and fails rather than passing empty."""
    problems: list[str] = []
    compared = 0
    if not hws:
        problems.append("no partition's high watermark is known: nothing compared")
    for p, hw in sorted(hws.items()):
        members = sorted(isr.get(p, []))
        if len(members) < min_isr:
            problems.append(f"partition {p}: ISR {members} after healing, fewer than "
                            f"{min_isr} replicas to compare (HW {hw})")
        logs = {b: replicas.get(p, {}).get(b) for b in members}
        ranges: dict[int, dict[int, Batch]] = {}
        for broker, log in logs.items():
            if log is None:
                if hw > 0:
                    problems.append(f"partition {p}: ISR member {broker} has no log directory")
                continue
            problems += [f"partition {p}, broker {broker}: {x}" for x in log.problems]
            below = [b for b in log.batches if b.base < hw]
            if hw > 0 and (not below or below[0].base != 0):
                problems.append(f"partition {p}, broker {broker}: the log starts at "
                                f"{below[0].base if below else log.end}, not 0")
            end = below[-1].last + 1 if below else 0
            if end < hw:
                problems.append(f"partition {p}, broker {broker}: the log ends at {end}, below "
                                f"the high watermark {hw}")
            ranges[broker] = {b.base: b for b in below}
        if len(ranges) < 2:
            continue
        reference, *others = sorted(ranges)
        for broker in others:
            for base in sorted(ranges[reference].keys() | ranges[broker].keys()):
                a, b = ranges[reference].get(base), ranges[broker].get(base)
                if a is None or b is None:
                    holder = reference if b is None else broker
                    problems.append(f"partition {p}: only broker {holder} has a batch at "
                                    f"offset {base} (below HW {hw}); brokers {reference} and "
                                    f"{broker} split the log differently")
                elif (a.last, a.body) != (b.last, b.body):
                    problems.append(f"partition {p}: offsets {base}..{max(a.last, b.last)} differ "
                                    f"between broker {reference} (epoch {a.epoch}, last "
                                    f"{a.last}) and broker {broker} (epoch {b.epoch}, last "
                                    f"{b.last})")
                else:
                    compared += 1
    where = ", ".join(f"{p}: HW {hw}, ISR {sorted(isr.get(p, []))}"
                      for p, hw in sorted(hws.items()))
    return _check("data: ISR replicas hold the same batches below the high watermark", problems,
                  f"{len(hws)} partitions: {compared} batch pairs identical on the ISR "
                  f"replicas up to the high watermark ({where})")


def hw_regressions(seen: list[Watermark]) -> list[str]:
    """Each time the high watermark a consumer saw for a partition went below the highest it
    had seen before (a new leader must not show the HW it learnt as a follower, which can be
    behind what the old leader served: docs/data-plane.md, "ISR by lag, high watermark")."""
    out: list[str] = []
    highest: dict[tuple[int, int], Watermark] = {}
    for w in seen:
        key = (w.consumer, w.partition)
        before = highest.get(key)
        if before is not None and w.high < before.high:
            out.append(f"consumer {w.consumer}, partition {w.partition}: high watermark "
                       f"{w.high} at {w.at_s:.3f} s after {before.high} at {before.at_s:.3f} s")
        if before is None or w.high > before.high:
            highest[key] = w
    return out


def check_watermarks(seen: list[Watermark], hws: dict[int, int]) -> Check:
    """(c) No high watermark a consumer saw is above the one after healing: what any leader
    told a consumer was committed stays committed (with (d), readable at the same offsets);
    and the HW a consumer saw never went back, not even for a moment after a leader change."""
    problems: list[str] = []
    for w in seen:
        final = hws.get(w.partition)
        if final is not None and w.high > final:
            problems.append(f"consumer {w.consumer}, partition {w.partition}: saw high "
                            f"watermark {w.high} at {w.at_s:.3f} s, above the {final} after "
                            "healing")
    problems += hw_regressions(seen)
    return _check("data: the high watermark consumers saw never went back", problems,
                  f"{len(seen)} high-watermark changes seen by {len({w.consumer for w in seen})}"
                  " consumer(s), none above the final HW, none going back")


def check_reads(reads: list[Read], final: PartitionValues, hws: dict[int, int],
                attempted: set[bytes], explained: dict[bytes, str] | None = None) -> Check:
    """(d) No phantom read: every record a consumer read is, after healing, in the log below
    the high watermark at the offset it was read at, with the same value, and was produced;
    none read at two offsets but those `explained` (client_duplicates)."""
    explained = explained or {}
    problems: list[str] = []
    offsets_of: dict[bytes, set[tuple[int, int]]] = {}
    for r in reads:
        offsets_of.setdefault(r.value, set()).add((r.partition, r.offset))
        held = final.get(r.partition, {}).get(r.offset)
        if r.value not in attempted:
            problems.append(f"consumer {r.consumer} read {r.value!r} at "
                            f"{_p(r.partition, r.offset)} ({r.at_s:.3f} s), which no producer "
                            "sent")
        elif r.offset >= hws.get(r.partition, 0):
            problems.append(f"consumer {r.consumer} read {r.value!r} at "
                            f"{_p(r.partition, r.offset)} ({r.at_s:.3f} s), at or above the "
                            f"high watermark after healing, {hws.get(r.partition, 0)}")
        elif held != r.value:
            problems.append(f"consumer {r.consumer} read {r.value!r} at "
                            f"{_p(r.partition, r.offset)} ({r.at_s:.3f} s); after healing "
                            f"the offset holds {held!r}")
    for value, places in sorted(offsets_of.items()):
        if len(places) > 1 and value not in explained:
            problems.append(f"{value!r} was read at {len(places)} offsets: "
                            + ", ".join(_p(*x) for x in sorted(places)))
    return _check("data: consumers read no record that is not in the log", problems,
                  f"{len(reads)} records read, {len(offsets_of)} distinct, each at its offset "
                  "in the log after healing")


def check_data_floor(acked: int, duration_s: float, producers: int) -> Check:
    floor = math.floor(RECORDS_PER_PRODUCER_S * producers * duration_s)
    return Check("enough records acknowledged", acked >= floor,
                 f"{acked} records acknowledged; the floor for {duration_s:g} s and "
                 f"{producers} producer(s) is {floor} ({RECORDS_PER_PRODUCER_S:g} per "
                 "producer-second)")
