"""The log cleaner and transactions (broker/log/cleaner.py, cleaner_core.py): aborted
transactions' records are removed and never supersede a committed record of their key, markers
stay, and nothing at or past the last stable offset is cleaned (an open transaction may still
abort)."""

from __future__ import annotations

from pathlib import Path

from broker.log.producer_txn import marker_of
from broker.records import TRANSACTIONAL_BIT, Record, build_batch, scan_batches
from tests.unit.test_log_cleaner import NOW, append, clean, cleaner, open_log, records


def txn(key: str, value: str, seq: int, pid: int = 7) -> bytes:
    return build_batch([Record(value.encode(), key.encode())], base_timestamp=NOW,
                       producer_id=pid, producer_epoch=0, base_sequence=seq,
                       attributes=TRANSACTIONAL_BIT)


def markers(log: object) -> list[int]:
    data = log.read(0, 1 << 30, log.end_offset)  # type: ignore[attr-defined]
    return [frame.position for frame in scan_batches(data) if frame.control
            and marker_of(data[frame.position:frame.position + frame.size]) is not None]


def test_aborted_records_go_and_do_not_supersede_committed_ones(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "committed"), ("b", "1"))  # 0, 1
    log.append_as_leader(txn("a", "aborted", 0), 0, NOW)  # 2
    log.append_marker(7, 0, False, 1, 0, NOW)  # 3: ABORT
    log.append_as_leader(txn("b", "2", 1), 0, NOW)  # 4
    log.append_marker(7, 0, True, 1, 0, NOW)  # 5: COMMIT
    append(log, ("z", "1"), ("z", "2"))  # 6, 7 (the active segment)
    assert clean(cleaner(log)) > 0
    kept = [(offset, key, value) for offset, key, value in records(log)]
    assert (0, b"a", b"committed") in kept  # the aborted "a" did not remove it
    assert all(value != b"aborted" for _, _, value in kept)
    assert (4, b"b", b"2") in kept and (1, b"b", b"1") not in kept  # committed: as any data
    assert len(markers(log)) == 2  # both markers stay
    assert [t.first_offset for t in log.aborted_transactions(0, log.end_offset)] == [2]
    log.close()


def test_nothing_past_the_lso_is_cleaned(tmp_path: Path) -> None:
    log = open_log(tmp_path)
    append(log, ("a", "1"))  # 0
    log.append_as_leader(txn("a", "open", 0), 0, NOW)  # 1: an open transaction
    append(log, ("a", "2"), ("b", "1"), ("b", "2"), ("z", "1"))  # 2-5
    assert log.last_stable_offset(log.end_offset) == 1
    clean(cleaner(log))
    assert [offset for offset, _, _ in records(log)] == [0, 1, 2, 3, 4, 5]
    log.close()
