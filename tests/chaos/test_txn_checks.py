"""The exactly-once checks of the campaign's transactional part (txn_checks.py), without a
cluster: a journal read back, then planted faults in what the consumers read — a committed
record twice, a committed one missing, records out of order, an aborted or unfinished
transaction visible, an unknown one partly visible, a record no transaction wrote, an aborted
record missing from the log, and the consume-transform-produce output's duplicates and gaps —
each fails its check, naming the transactional id, partition and offsets."""

from __future__ import annotations

import json

from tests.chaos.checks import Check
from tests.chaos.txn_checks import check_eos, check_transactions, check_txn_floor
from tests.chaos.txn_journal import (
    ABORTED,
    COMMITTED,
    UNFINISHED,
    UNKNOWN,
    Logged,
    Txn,
    next_txn,
    parse_journal,
    record_value,
)

TXN_ID = "chaos1-txn-0"


def txn(n: int, outcome: str, parts: list[int], first_offsets: dict[int, int] | None = None,
        reason: str = "") -> Txn:
    """Transaction n: one record per entry of `parts` (its partition); delivered offsets
    counted from `first_offsets` per partition when given (the records were acknowledged)."""
    records = [(p, record_value(TXN_ID, n, i)) for i, p in enumerate(parts)]
    offsets: dict[bytes, int] = {}
    if first_offsets is not None:
        next_at = dict(first_offsets)
        for p, value in records:
            offsets[value] = next_at[p]
            next_at[p] += 1
    return Txn(TXN_ID, n, records, outcome, reason, offsets, end_s=1.0 + n)


def history() -> tuple[list[Txn], Logged, Logged]:
    """Four transactions over partitions 0 and 1 — committed, aborted, committed, unknown and
    present — as the brokers hold them: each transaction's records then its marker (one
    offset); read_committed shows the committed ones, read_uncommitted every record."""
    txns = [txn(0, COMMITTED, [0, 1, 0], {0: 0, 1: 0}),
            txn(1, ABORTED, [1, 0], {0: 3, 1: 2}, "on purpose"),
            txn(2, COMMITTED, [0, 0, 1], {0: 5, 1: 4}),
            txn(3, UNKNOWN, [1], {1: 6}, "no outcome journaled after asking to commit")]
    uncommitted: Logged = {0: [], 1: []}
    for t in txns:
        for p, value in t.records:
            uncommitted[p].append((t.offsets[value], value))
    hidden = {v for t in txns if t.outcome == ABORTED for _, v in t.records}
    committed = {p: [(o, v) for o, v in rows if v not in hidden] for p, rows in uncommitted.items()}
    return txns, committed, uncommitted


def failed(checks: list[Check]) -> dict[str, Check]:
    return {c.name.split(":")[1].strip(): c for c in checks if not c.ok}


def test_a_clean_history_passes_every_check() -> None:
    txns, committed, uncommitted = history()
    checks = check_transactions(txns, committed, uncommitted)
    assert len(checks) == 4 and all(c.ok for c in checks), [c.summary for c in checks]
    assert "1 with unknown outcome: 1 present whole" in checks[2].summary


def test_a_committed_record_twice_fails_naming_its_transaction_and_offsets() -> None:
    txns, committed, uncommitted = history()
    value = record_value(TXN_ID, 2, 1)
    committed[0].append((9, value))
    bad = failed(check_transactions(txns, committed, uncommitted))
    assert list(bad) == ["every committed transaction exactly once, in order (read_committed)",
                         "aborted records in the log, marked aborted (read_uncommitted shows "
                         "them, read_committed does not)"]
    details = "\n".join(bad["every committed transaction exactly once, in order "
                            "(read_committed)"].details)
    assert f"{TXN_ID} txn 2 (committed): {value!r} 2 times, at partition 0 offsets 6, 9" \
        in details


def test_a_committed_transaction_partly_missing_fails() -> None:
    txns, committed, _ = history()
    committed[1] = [(o, v) for o, v in committed[1] if v != record_value(TXN_ID, 2, 2)]
    [bad] = failed(check_transactions(txns, committed, None)).values()
    assert f"{TXN_ID} txn 2 (committed at 3.00 s): 1 of 3 record(s) missing: " \
           f"{record_value(TXN_ID, 2, 2)!r} (partition 1, delivered at offset 4)" in bad.summary


def test_records_out_of_transaction_order_fail() -> None:
    txns, committed, _ = history()
    (o1, v1), (o5, v5) = committed[0][1], committed[0][2]
    assert (o1, o5) == (1, 5)
    committed[0][1], committed[0][2] = (o1, v5), (o5, v1)  # txn 0's last and txn 2's first
    bad = failed(check_transactions(txns, committed, None))
    details = "\n".join(bad["every committed transaction exactly once, in order "
                            "(read_committed)"].details)
    assert f"{TXN_ID} partition 0: txn 0 record 2 at offset 5 after txn 2 record 0 at " \
           "offset 1" in details


def test_an_aborted_transaction_visible_read_committed_fails() -> None:
    txns, _, uncommitted = history()
    bad = failed(check_transactions(txns, uncommitted, uncommitted))
    assert "nothing of an aborted or unfinished transaction visible (read_committed)" in bad
    summary = bad["nothing of an aborted or unfinished transaction visible "
                  "(read_committed)"].summary
    assert f"{TXN_ID} txn 1 (aborted: on purpose): 2 of 2 record(s) visible read_committed, " \
           "at partition 0 offset 3; partition 1 offset 2" in summary


def test_an_unfinished_transaction_visible_fails() -> None:
    txns, committed, _ = history()
    txns.append(txn(4, UNFINISHED, [0], reason="the writer stopped before asking to commit"))
    committed[0].append((8, record_value(TXN_ID, 4, 0)))
    bad = failed(check_transactions(txns, committed, None))
    assert f"{TXN_ID} txn 4 (unfinished: the writer stopped before asking to commit): 1 of 1" \
        in bad["nothing of an aborted or unfinished transaction visible (read_committed)"].summary


def test_a_transaction_with_unknown_outcome_partly_visible_fails_absent_passes() -> None:
    txns, committed, _ = history()
    txns.append(txn(4, UNKNOWN, [0, 1], {0: 8, 1: 7}, "fatal _FENCED"))
    assert all(c.ok for c in check_transactions(txns, committed, None))  # absent: fine
    committed[1].append((7, record_value(TXN_ID, 4, 1)))
    [bad] = failed(check_transactions(txns, committed, None)).values()
    assert bad.name.endswith("a transaction whose commit outcome is unknown is all or nothing")
    assert f"{TXN_ID} txn 4 (commit outcome unknown: fatal _FENCED): partly visible, 1 of 2 " \
           "record(s) at partition 1 offset 7" in bad.summary


def test_a_record_no_transaction_wrote_fails() -> None:
    txns, committed, _ = history()
    committed[1].append((8, b"stray"))
    bad = failed(check_transactions(txns, committed, None))
    assert "partition 1 offset 8: b'stray' belongs to no journaled transaction" in \
        bad["every committed transaction exactly once, in order (read_committed)"].summary


def test_an_aborted_record_missing_read_uncommitted_fails() -> None:
    txns, committed, uncommitted = history()
    uncommitted[1] = [(o, v) for o, v in uncommitted[1] if o != 2]
    [bad] = failed(check_transactions(txns, committed, uncommitted)).values()
    assert f"{TXN_ID} txn 1 (aborted: on purpose): {record_value(TXN_ID, 1, 0)!r} delivered " \
           "at partition 1 offset 2 is not there read_uncommitted" in bad.summary


def test_the_journal_gives_each_transaction_its_outcome() -> None:
    def line(event: str, n: int, **more: object) -> str:
        return json.dumps({"e": event, "txn": n, "t": 0.5, **more})

    lines = [line("begin", 0, records=[[0, "a"], [1, "b"]]), line("commit", 0),
             line("end", 0, outcome=COMMITTED, offsets=[["a", 0], ["b", 0]]),
             line("error", -1, what="_TRANSPORT"),
             line("begin", 1, records=[[0, "c"]]),
             line("end", 1, outcome=ABORTED, reason="on purpose", offsets=[["c", 2]]),
             line("begin", 2, records=[[1, "d"]]), line("commit", 2),
             line("begin", 3, records=[[1, "e"]]),  # a new producer after 2's fatal error
             '{"e": "end", "tx']  # torn by a kill
    txns = parse_journal(TXN_ID, lines)
    assert [(t.n, t.outcome) for t in txns] == [(0, COMMITTED), (1, ABORTED), (2, UNKNOWN),
                                                (3, UNFINISHED)]
    assert txns[0].offsets == {b"a": 0, b"b": 0} and txns[1].reason == "on purpose"
    assert next_txn(lines) == 4 and next_txn([]) == 0


def test_a_writer_without_aborts_fails_the_floor() -> None:
    txns, _, _ = history()
    assert check_txn_floor(txns, 1).ok
    only_committed = [t for t in txns if t.outcome == COMMITTED]
    bad = check_txn_floor(only_committed, 2)
    assert not bad.ok and "transactional writer 0: no transaction aborted" in bad.details
    assert "transactional writer 1: no transaction committed" in bad.details


def test_consume_transform_produce_output_exactly_once_below_the_committed_offsets() -> None:
    inputs = {0: {0: b"p0-0", 1: b"p0-3", 2: b"p1-0"}, 1: {0: b"p0-1", 1: b"p1-1"}}
    output: Logged = {0: [(0, b"transformed p0-0"), (1, b"transformed p0-1")],
                      1: [(0, b"transformed p0-3")]}
    offsets = {0: 2, 1: 1}  # input 0@2 and 1@1 not processed yet
    assert check_eos(inputs, offsets, output).ok
    twice = {**output, 1: [*output[1], (2, b"transformed p0-0")]}
    bad = check_eos(inputs, offsets, twice)
    assert not bad.ok and "input partition 0 offset 0 (b'p0-0') 2 times in the output: " \
        "partition 0 offset 0; partition 1 offset 2" in bad.details
    gap = {0: output[0], 1: []}
    bad = check_eos(inputs, offsets, gap)
    assert "input partition 0 offset 1 (b'p0-3') missing from the output" in bad.summary
    ahead = {**output, 1: [*output[1], (3, b"transformed p1-1")]}
    bad = check_eos(inputs, offsets, ahead)
    assert "output partition 1 offset 3: input partition 1 offset 1, at or above the group's " \
           "committed offset 1" in bad.summary


def test_an_input_value_written_twice_must_be_in_the_output_twice() -> None:
    """The idempotent producers may write a value twice (librdkafka's epoch bump): each copy
    is an input record of its own (seed 32, 180 s: kdata32 partition 2 held p1-4625 at 3092
    and 3101, and the output had it twice, rightly)."""
    inputs = {0: {0: b"p1-7", 1: b"p1-8", 2: b"p1-7"}}
    output: Logged = {0: [(0, b"transformed p1-7"), (1, b"transformed p1-8"),
                          (2, b"transformed p1-7")]}
    assert check_eos(inputs, {0: 3}, output).ok
    once = {0: output[0][:2]}
    bad = check_eos(inputs, {0: 3}, once)
    assert not bad.ok and "input partition 0 offset 0, input partition 0 offset 2 (b'p1-7') " \
        "(2 times in the input) 1 times in the output: partition 0 offset 0" in bad.summary
    assert check_eos(inputs, {0: 2}, once).ok  # the second copy not consumed yet
