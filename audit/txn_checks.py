"""Transactions in the partition logs (KIP-98), checked on every replica of every partition from
the `kraft-partitions` rows (audit/partition_source.py: `is_transactional`, `producer_epoch`,
`control_type`) and the replica's aborted-transaction index:

* every transaction ends with one marker (`txn-marker`): a transaction is a producer id and
  epoch from its first transactional batch on the partition to its COMMIT/ABORT control batch.
  A violation: the producer's next transactional batch at another epoch with no marker between
  (the coordinator aborts a fenced transaction with a marker before the new epoch writes), or
  a marker below the transaction's epoch. A warning: a transaction still open at the end of
  the log (running, or hanging: `kraft-admin transactions find-hanging`), and a second marker
  at the same epoch with no batch of the producer between (a retried WriteTxnMarkers, or a
  later transaction that wrote nothing here, or one whose batches the cleaner removed: these
  cannot be told apart from the log, so a COMMIT then an ABORT is no violation either). A
  transaction whose batches and marker the cleaner both removed leaves nothing to check; the
  cleaner never removes a marker while a batch of its transaction is left;
* read_committed never exposes aborted data (`txn-aborted-exposed`, `txn-index-mismatch`): a
  read_committed Fetch names the aborted transactions from the index, and the consumer drops a
  producer's batches from an entry's first offset to its ABORT marker. So the aborted batches,
  each ABORT transaction's from its first batch to its marker, must be exactly the index's
  entries: one missing or starting late exposes aborted records, one starting early or naming
  no ABORT marker hides committed ones. An ABORT marker with no batch of its transaction left
  needs no entry (the cleaner removes the entry with the last batch, the marker after its delete
  horizon: broker/log/cleaner_txn.py), though it may keep one (a crash between the cleaner's
  swap and its index step). A missing index file is no finding (the broker rebuilds it from the
  log on first use); entries wholly below the log start or at its end are skipped (the broker
  drops them when it loads the file);
* the LSO never passes an open transaction (`txn-lso-past-open`): each index entry records
  the last stable offset at its ABORT marker; it must not lie past the first offset of any
  transaction still open there (nor past the marker). The LSO a Fetch answered is not on disk:
  checking every served LSO would need the broker to log it (see docs/audit.md).

The walk runs per replica in a Spark task (groupBy + applyInPandas over the transactional
batches only); `walk_replica` is the rule, plain Python.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from audit.findings import VIOLATION, WARNING, Finding
from audit.partition_source import ABORT, COMMIT, Replica

INDEX_FILE = "aborted-transactions.txnindex"  # the broker's (broker/log/txn_index.py)
_ENTRY = struct.Struct(">hqqqq")  # Kafka's AbortedTxn: version, producer id, first, last, LSO
_NAMES = {ABORT: "ABORT", COMMIT: "COMMIT"}
FINDING_DDL = "severity string, check string, node_id int, offset bigint, detail string"
COLUMNS = ("base_offset", "producer_id", "producer_epoch", "is_control", "control_type")


@dataclass(frozen=True)
class IndexEntry:
    producer_id: int
    first_offset: int
    last_offset: int  # the ABORT marker's offset
    last_stable_offset: int


def read_index(directory: str) -> list[IndexEntry] | None:
    """The replica's aborted-transaction index (None: no file); a partial last entry and
    everything from an entry of another version on are left out, as the broker reads it."""
    try:
        with open(os.path.join(directory, INDEX_FILE), "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    out = []
    for position in range(0, len(data) - len(data) % _ENTRY.size, _ENTRY.size):
        version, producer_id, first, last, lso = _ENTRY.unpack_from(data, position)
        if version != 0:
            break
        out.append(IndexEntry(producer_id, first, last, lso))
    return out


@dataclass(frozen=True)
class _Abort:
    producer_id: int
    first: int | None  # None: the transaction began below the log start
    marker: int
    open_first: int | None  # the first offset of the oldest other transaction open there


def walk_replica(node: int, name: str, rows: Iterable[tuple[int, int, int, bool, int | None]],
                 index: list[IndexEntry] | None, log_start: int, log_end: int
                 ) -> list[Finding]:
    """The three rules on one replica (`name` is `topic-partition`): `rows` are its
    transactional batches (base offset, producer id, producer epoch, is control, control
    type) in offset order, `index` its aborted-transaction index, [log_start, log_end) its
    batches' offsets."""
    out: list[Finding] = []

    def find(severity: str, check: str, offset: int, producer: int, text: str) -> None:
        out.append(Finding(severity, check, node, offset,
                           f"{name}: producer {producer}: {text}"))

    open_txns: dict[int, tuple[int, int]] = {}  # producer id -> (first offset, epoch)
    last_marker: dict[int, tuple[int, int, int]] = {}  # producer id -> (offset, epoch, type)
    aborts: list[_Abort] = []
    for base, pid, epoch, control, kind in rows:
        if not control:
            began = open_txns.get(pid)
            if began is not None and began[1] != epoch:
                find(VIOLATION, "txn-marker", began[0], pid,
                     f"the transaction at epoch {began[1]} from offset {began[0]} has no "
                     f"marker before the producer's batch at epoch {epoch} (offset {base})")
            if began is None or began[1] != epoch:
                open_txns[pid] = (base, epoch)
            continue
        if kind not in _NAMES:
            continue  # another control type, or one that does not decode: no marker
        began = open_txns.pop(pid, None)
        if began is not None and epoch < began[1]:
            find(VIOLATION, "txn-marker", base, pid,
                 f"{_NAMES[kind]} marker at offset {base} has epoch {epoch}, below the "
                 f"transaction's epoch {began[1]} (from offset {began[0]})")
        previous = last_marker.get(pid)
        if began is None and previous is not None and previous[1] == epoch:
            find(WARNING, "txn-marker", base, pid,
                 f"{_NAMES[kind]} marker at offset {base} after the {_NAMES[previous[2]]} "
                 f"marker at offset {previous[0]} (epoch {epoch}) with no batch of the "
                 "producer between: a retried marker, a transaction that wrote nothing here, "
                 "or one whose batches were cleaned")
        last_marker[pid] = (base, epoch, kind)
        if kind == ABORT:
            aborts.append(_Abort(pid, None if began is None else began[0], base,
                                 min((f for f, _ in open_txns.values()), default=None)))
    for pid, (first, epoch) in sorted(open_txns.items(), key=lambda x: x[1]):
        find(WARNING, "txn-marker", first, pid,
             f"the transaction at epoch {epoch} from offset {first} has no marker by the end "
             f"of the log (offset {log_end}): still running, or hanging")
    if index is not None:
        out += _compare_index(node, name, aborts, index, log_start, log_end)
    return out


def _compare_index(node: int, name: str, aborts: list[_Abort], index: list[IndexEntry],
                   log_start: int, log_end: int) -> list[Finding]:
    out = []
    entries = {(e.producer_id, e.last_offset): e for e in index
               if log_start <= e.last_offset < log_end}
    for a in aborts:
        entry = entries.pop((a.producer_id, a.marker), None)
        where = f"transaction aborted at offset {a.marker}"
        if a.first is not None:
            where += f" (its batches from offset {a.first})"
        if entry is None and a.first is None:
            continue  # no batch of it is left (the cleaner removed them): nothing to expose
        if entry is None:
            out.append(Finding(VIOLATION, "txn-aborted-exposed", node, a.first or a.marker,
                               f"{name}: producer {a.producer_id}: {where} has no entry in "
                               f"{INDEX_FILE}: read_committed consumers read its records"))
            continue
        if a.first is not None and entry.first_offset > a.first:
            out.append(Finding(VIOLATION, "txn-aborted-exposed", node, a.first,
                               f"{name}: producer {a.producer_id}: {where}: the index entry "
                               f"starts at offset {entry.first_offset}, so read_committed "
                               "consumers read its batches in "
                               f"{a.first}..{entry.first_offset - 1}"))
        elif a.first is not None and entry.first_offset < a.first:
            out.append(Finding(VIOLATION, "txn-index-mismatch", node, entry.first_offset,
                               f"{name}: producer {a.producer_id}: {where}: the index entry "
                               f"starts at offset {entry.first_offset}, so read_committed "
                               "consumers drop the producer's committed batches before it"))
        bound = a.marker + 1 if a.open_first is None else min(a.open_first, a.marker + 1)
        if entry.last_stable_offset > bound:
            out.append(Finding(VIOLATION, "txn-lso-past-open", node, a.marker,
                               f"{name}: producer {a.producer_id}: the last stable offset "
                               f"recorded at the ABORT marker at offset {a.marker} is "
                               f"{entry.last_stable_offset}, past offset {bound} (the first "
                               "offset of a transaction still open there, or the marker's "
                               "next)"))
    for (pid, last), entry in sorted(entries.items()):
        out.append(Finding(VIOLATION, "txn-index-mismatch", node, entry.first_offset,
                           f"{name}: producer {pid}: {INDEX_FILE} names an aborted transaction "
                           f"from offset {entry.first_offset} to an ABORT marker at offset "
                           f"{last} that the log does not hold: read_committed consumers "
                           "drop the producer's batches from there"))
    return out


def run_txn_checks(batches: DataFrame, replicas: list[Replica],
                   spans: dict[tuple[int, str, int], Any]) -> list[Finding]:
    """The transaction rules over every replica's transactional batches (`batches`: the
    kraft-partitions rows without errors; `spans`: each replica's start and end offsets)."""
    directories = {(r.node_id, r.topic, r.partition): r.directory for r in replicas}
    bounds = {key: (int(s["start"]), int(s["end"])) for key, s in spans.items()}

    def per_replica(frame: Any) -> Any:  # a pandas DataFrame in, one out (in a Spark task)
        import pandas as pd  # type: ignore[import-untyped]
        first = frame.iloc[0]
        key = (int(first["node_id"]), str(first["topic"]), int(first["partition"]))
        frame = frame.sort_values("base_offset")
        rows = [(int(b), int(p), int(e), bool(c), None if pd.isna(t) else int(t))
                for b, p, e, c, t in zip(*(frame[c] for c in COLUMNS), strict=True)]
        start, end = bounds[key]
        found = walk_replica(key[0], f"{key[1]}-{key[2]}", rows,
                             read_index(directories[key]), start, end)
        return pd.DataFrame([asdict(f) for f in found],
                            columns=["severity", "check", "node_id", "offset", "detail"])

    transactional = batches.where(F.col("is_transactional")).select(
        "node_id", "topic", "partition", *COLUMNS)
    found = transactional.groupBy("node_id", "topic", "partition").applyInPandas(
        per_replica, FINDING_DDL)
    return [Finding(r["severity"], r["check"], r["node_id"], r["offset"], r["detail"])
            for r in found.orderBy("node_id", "offset", "detail").collect()]
