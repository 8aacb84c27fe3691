"""Exactly once, end to end (issue 30): the transactional writers' journals (txn_journal.py)
and the consume-transform-produce app's output against what a read_committed and a
read_uncommitted consumer read back after healing. No Kafka client here, so the checks and
their unit tests need none. Every failure names the transactional id, the transaction, the
partition and the offsets."""

from __future__ import annotations

import itertools

from tests.chaos.checks import MAX_DETAILS, Check
from tests.chaos.txn_journal import (
    ABORTED,
    COMMITTED,
    OUTCOMES,
    UNFINISHED,
    UNKNOWN,
    Logged,
    Txn,
)


def _where(p: int, offsets: list[int]) -> str:
    return f"partition {p} offset{'s' if len(offsets) > 1 else ''} " + ", ".join(map(str, offsets))


def _check(name: str, problems: list[str], summary: str) -> Check:
    if problems:
        return Check(name, False, f"{len(problems)} problem(s); first: {problems[0]}",
                     problems[:MAX_DETAILS * 5])
    return Check(name, True, summary)


def _occurrences(read: Logged) -> dict[bytes, list[tuple[int, int]]]:
    found: dict[bytes, list[tuple[int, int]]] = {}
    for p, records in sorted(read.items()):
        for offset, value in records:
            found.setdefault(value, []).append((p, offset))
    return found


def _by_partition(places: list[tuple[int, int]]) -> str:
    return "; ".join(_where(p, [o for _, o in group])
                     for p, group in itertools.groupby(sorted(places), key=lambda x: x[0]))


def check_transactions(txns: list[Txn], committed: Logged,
                       uncommitted: Logged | None) -> list[Check]:
    """Every committed transaction's records exactly once, in its partitions, at the offsets of
    their delivery reports and in transaction order per writer and partition; nothing of an
    aborted or unfinished one; all or nothing of one whose outcome is unknown; no record no
    transaction planned. With a read_uncommitted read: the acknowledged records of aborted
    transactions are in the log at their offsets (read_committed hides them: marked)."""
    owner = {value: (txn, i) for txn in txns for i, (_, value) in enumerate(txn.records)}
    seen = _occurrences(committed)
    once: list[str] = []
    hidden: list[str] = []
    whole: list[str] = []
    for value, places in sorted(seen.items()):
        if value not in owner:
            once.append(f"{_by_partition(places)}: {value!r} belongs to no journaled "
                        "transaction")
        elif len(places) > 1:
            txn, _ = owner[value]
            once.append(f"{txn.name()} ({txn.outcome}): {value!r} {len(places)} times, at "
                        f"{_by_partition(places)}")
    for txn in txns:
        present = [(p, v, seen[v]) for p, v in txn.records if v in seen]
        if txn.outcome == COMMITTED:
            missing = [(p, v) for p, v in txn.records if v not in seen]
            if missing:
                once.append(f"{txn.name()} (committed at {txn.end_s or 0:.2f} s): "
                            f"{len(missing)} of {len(txn.records)} record(s) missing: "
                            + ", ".join(f"{v!r} (partition {p}, delivered at offset "
                                        f"{txn.offsets.get(v, '?')})" for p, v in missing))
            for p, v, places in present:
                at = txn.offsets.get(v)
                if any(q != p or (at is not None and o != at) for q, o in places):
                    once.append(f"{txn.name()}: {v!r} at {_by_partition(places)}, produced to "
                                f"partition {p}, delivered at offset {at}")
        elif txn.outcome in (ABORTED, UNFINISHED) and present:
            hidden.append(f"{txn.name()} ({txn.outcome}: {txn.reason}): {len(present)} of "
                          f"{len(txn.records)} record(s) visible read_committed, at "
                          + _by_partition([x for _, _, places in present for x in places]))
        elif txn.outcome == UNKNOWN and 0 < len(present) < len(txn.records):
            gone = [v for _, v in txn.records if v not in seen]
            whole.append(f"{txn.name()} (commit outcome unknown: {txn.reason}): partly visible, "
                         f"{len(present)} of {len(txn.records)} record(s) at "
                         + _by_partition([x for _, _, places in present for x in places])
                         + f"; missing {gone[:5]}")
    once.extend(_order(committed, owner))
    counts = {o: sum(t.outcome == o for t in txns) for o in OUTCOMES}
    unknown_in = sum(1 for t in txns if t.outcome == UNKNOWN
                     and all(v in seen for _, v in t.records))
    checks = [
        _check("transactions: every committed transaction exactly once, in order (read_committed)",
               once, f"{counts[COMMITTED]} committed transaction(s) of {len(txns)}, "
                     f"{sum(len(v) for v in committed.values())} records read, each once, in "
                     "transaction order per writer and partition, at its delivered offset"),
        _check("transactions: nothing of an aborted or unfinished transaction visible "
               "(read_committed)", hidden,
               f"{counts[ABORTED]} aborted and {counts[UNFINISHED]} unfinished transaction(s), "
               "none of their records visible"),
        _check("transactions: a transaction whose commit outcome is unknown is all or nothing",
               whole, f"{counts[UNKNOWN]} with unknown outcome: {unknown_in} present whole, "
                      f"{counts[UNKNOWN] - unknown_in} absent"),
    ]
    if uncommitted is not None:
        checks.append(check_aborted_marked(txns, committed, uncommitted))
    return checks


def _order(read: Logged, owner: dict[bytes, tuple[Txn, int]]) -> list[str]:
    """Per partition and writer, the records in offset order follow (transaction, record)."""
    problems: list[str] = []
    for p, records in sorted(read.items()):
        last: dict[str, tuple[int, int, int]] = {}  # txn id -> (n, i, offset)
        for offset, value in records:
            if value not in owner:
                continue
            txn, i = owner[value]
            before = last.get(txn.txn_id)
            if before is not None and (txn.n, i) <= before[:2]:
                problems.append(f"{txn.txn_id} partition {p}: txn {txn.n} record {i} at offset "
                                f"{offset} after txn {before[0]} record {before[1]} at offset "
                                f"{before[2]}")
            last[txn.txn_id] = (txn.n, i, offset)
    return problems


def check_aborted_marked(txns: list[Txn], committed: Logged, uncommitted: Logged) -> Check:
    """An aborted transaction's records that the brokers acknowledged are in the log
    (read_uncommitted shows them at their offsets) and hidden from read_committed; every
    record read_committed shows, read_uncommitted shows at the same place."""
    problems: list[str] = []
    everything = _occurrences(uncommitted)
    shown = 0
    for txn in txns:
        if txn.outcome != ABORTED:
            continue
        for p, value in txn.records:
            at = txn.offsets.get(value)
            if at is None:
                continue  # never acknowledged: it may not have been written
            shown += 1
            if (p, at) not in everything.get(value, []):
                problems.append(f"{txn.name()} (aborted: {txn.reason}): {value!r} delivered at "
                                f"partition {p} offset {at} is not there read_uncommitted "
                                f"(found at {_by_partition(everything.get(value, [])) or '-'})")
    for value, places in sorted(_occurrences(committed).items()):
        if not set(places) <= set(everything.get(value, [])):
            problems.append(f"{value!r} read_committed at {_by_partition(places)} but not "
                            "there read_uncommitted")
    return _check("transactions: aborted records in the log, marked aborted (read_uncommitted "
                  "shows them, read_committed does not)", problems,
                  f"{shown} acknowledged record(s) of aborted transactions at their offsets "
                  f"read_uncommitted, hidden read_committed; "
                  f"{sum(len(v) for v in uncommitted.values())} records read_uncommitted")


def check_txn_floor(txns: list[Txn], writers: int) -> Check:
    """The campaign did what it says: every writer committed transactions and aborted some."""
    problems = []
    for k in range(writers):
        mine = [t for t in txns if t.txn_id.endswith(f"-txn-{k}")]
        for outcome in (COMMITTED, ABORTED):
            if not any(t.outcome == outcome for t in mine):
                problems.append(f"transactional writer {k}: no transaction {outcome}")
    return _check("transactions: every writer committed and aborted transactions", problems,
                  f"{writers} writer(s), each with committed and aborted transactions")


def check_eos(inputs: dict[int, dict[int, bytes]], group_offsets: dict[int, int],
              output: Logged, prefix: bytes = b"transformed ") -> Check:
    """Consume-transform-produce: every input record below the group's committed offset of its
    partition is in the output (read_committed) exactly once, transformed; no output record
    comes from an input record at or above those offsets (its transaction committed the
    offsets with it), none from no input record. Records are matched by value: an input value
    the idempotent producers wrote twice (librdkafka's epoch bump, check
    "data: every record written twice ...") must be in the output twice."""
    below: dict[bytes, list[tuple[int, int]]] = {}
    above: dict[bytes, list[tuple[int, int]]] = {}
    for p, log in sorted(inputs.items()):
        for o, value in sorted(log.items()):
            side = below if o < group_offsets.get(p, 0) else above
            side.setdefault(value, []).append((p, o))
    written: dict[bytes, list[tuple[int, int]]] = {}
    problems: list[str] = []
    for q, records in sorted(output.items()):
        for offset, value in records:
            if value.startswith(prefix) and (value[len(prefix):] in below
                                             or value[len(prefix):] in above):
                written.setdefault(value[len(prefix):], []).append((q, offset))
            else:
                problems.append(f"output partition {q} offset {offset}: {value!r} is no "
                                "input record transformed")
    for value in sorted(below.keys() | written.keys()):
        sources, places = below.get(value, []), written.get(value, [])
        if len(places) == len(sources):
            continue
        if not sources:
            (p, o), *_ = above[value]
            problems.extend(f"output partition {q} offset {offset}: input partition {p} offset "
                            f"{o}, at or above the group's committed offset "
                            f"{group_offsets.get(p, 0)}" for q, offset in places)
            continue
        where = ", ".join(f"input partition {p} offset {o}" for p, o in sources)
        twice = f" ({len(sources)} times in the input)" if len(sources) > 1 else ""
        what = "missing from" if not places else f"{len(places)} times in"
        problems.append(f"{where} ({value!r}){twice} {what} the output"
                        + (f": {_by_partition(places)}" if places else ""))
    expected = sum(len(v) for v in below.values())
    return _check("eos: each input record below the group's committed offsets exactly once "
                  "in the output (read_committed)", problems,
                  f"{expected} input records, each exactly once in the output "
                  f"(committed offsets {dict(sorted(group_offsets.items()))})")
