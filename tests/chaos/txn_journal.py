"""A transactional writer's journal (txn_writer.py writes it, txn_phase.py reads it back for
txn_checks.py): JSON lines, flushed one by one, so a writer killed at any moment leaves every
finished line. Its own module, importing only the standard library, so the writer process
starts without the campaign's checks (six nodes share two cores with it).

Events: `begin` (transaction n and the records it will produce: partition, value
`<transactional id>/<n>/<i>`), `commit` (it is about to ask to commit), `end` (the outcome it
learned, the offsets of the delivery reports and, for a transaction that did not go as planned,
librdkafka's last `debug=eos` lines under `client`), `error` (a client error, n = -1) and
`exit`.

A transaction's **outcome** is what its writer learned: `committed` (commit_transaction
returned), `aborted` (abort_transaction returned: on purpose, or after an abortable error),
`unfinished` (the writer failed or was stopped before it asked to commit: nothing of it may
show, since only EndTxn(commit) commits and the coordinator aborts the rest on fencing or
timeout) or `unknown` (it asked to commit and never learned the answer: a fatal error, a
timeout; all of its records or none may show, never part)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

COMMITTED, ABORTED, UNFINISHED, UNKNOWN = "committed", "aborted", "unfinished", "unknown"
OUTCOMES = (COMMITTED, ABORTED, UNFINISHED, UNKNOWN)

# partition -> [(offset, value)] as a consumer read them, in offset order
Logged = dict[int, list[tuple[int, bytes]]]


@dataclass
class Txn:
    txn_id: str
    n: int  # the writer's transaction number: its order
    records: list[tuple[int, bytes]]  # (partition, value), in produce order
    outcome: str
    reason: str = ""
    offsets: dict[bytes, int] = field(default_factory=dict)  # from the delivery reports
    end_s: float | None = None

    def name(self) -> str:
        return f"{self.txn_id} txn {self.n}"


def record_value(txn_id: str, n: int, i: int) -> bytes:
    return f"{txn_id}/{n}/{i}".encode()


def parse_event(line: str) -> dict[str, object]:
    """One journal line; {} for a torn one (the line being written when the process was
    killed)."""
    try:
        event = json.loads(line)
    except ValueError:
        return {}
    return event if isinstance(event, dict) else {}


def parse_journal(txn_id: str, lines: list[str]) -> list[Txn]:
    """The transactions of one writer's journal (JSON lines: `begin` with the records it will
    produce, `commit` before it asks to commit, `end` with the outcome). A transaction without
    an `end` (the process was killed) is `unknown` when it asked to commit, else `unfinished`;
    a torn last line is skipped."""
    txns: dict[int, Txn] = {}
    asked: set[int] = set()
    for line in lines:
        event: dict[str, Any] = parse_event(line)
        n = event.get("txn")
        if event.get("e") == "begin":
            txns[n] = Txn(txn_id, n, [(p, v.encode()) for p, v in event["records"]],
                          UNFINISHED, "no outcome journaled: the writer stopped before asking "
                                      "to commit")
        elif event.get("e") == "commit" and n in txns:
            asked.add(n)
            txns[n].outcome, txns[n].reason = UNKNOWN, "no outcome journaled after asking to commit"
        elif event.get("e") == "end" and n in txns:
            txn = txns[n]
            txn.outcome, txn.reason = event["outcome"], event.get("reason", "")
            txn.offsets = {v.encode(): o for v, o in event.get("offsets", [])}
            txn.end_s = event.get("t")
    return [txns[n] for n in sorted(txns)]


def next_txn(journal: list[str]) -> int:
    """The number after the last transaction a writer's journal began."""
    numbers = [t for t in (parse_event(line).get("txn") for line in journal)
               if isinstance(t, int)]
    return max(numbers, default=-1) + 1
