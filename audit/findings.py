"""Findings: what the audit reports. A violation breaks a rule and makes `kraft-audit` exit 2;
a warning is worth a look but can be legitimate (an uncommitted tail, an unclean election the
topic allowed)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pyarrow as pa

VIOLATION = "violation"
WARNING = "warning"

SCHEMA = pa.schema([
    ("severity", pa.string()),
    ("check", pa.string()),
    ("node_id", pa.int32()),
    ("offset", pa.int64()),
    ("detail", pa.string()),
])


@dataclass(frozen=True)
class Finding:
    severity: str
    check: str
    node_id: int | None
    offset: int | None
    detail: str

    def line(self) -> str:
        where = []
        if self.node_id is not None:
            where.append(f"node {self.node_id}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.severity} {self.check} ({', '.join(where) or 'log-wide'}): {self.detail}"


def to_table(findings: list[Finding]) -> pa.Table:
    return pa.Table.from_pylist([asdict(f) for f in findings], schema=SCHEMA)
