"""The audit's outputs: Parquet tables, report.md, report.html and three PNG plots, in a
local directory or at a URI (written locally, then copied through Hadoop's FileSystem).
The reports show every time as epoch milliseconds with ISO-8601 UTC beside it; the Parquet
tables keep the raw milliseconds."""

from __future__ import annotations

import html
import os
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

import matplotlib

matplotlib.use("Agg")  # files only, no display
import matplotlib.pyplot as plt
import pyarrow as pa
import pyarrow.parquet as pq

from audit.findings import VIOLATION, WARNING, to_table
from audit.fs import output_dir
from audit.job import AuditResult

if TYPE_CHECKING:
    from matplotlib.figure import Figure

SHOWN = 200  # findings listed in the reports; the Parquet table has all of them
REPLICAS_SCHEMA = pa.schema([
    ("node_id", pa.int32()), ("topic", pa.string()), ("partition", pa.int32()),
    ("topic_id", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("hw", pa.int64()),
    ("batches", pa.int64())])
CUTS_SCHEMA = pa.schema([
    ("topic", pa.string()), ("partition", pa.int32()), ("epoch", pa.int32()),
    ("leader", pa.int32()), ("election_offset", pa.int64()), ("leader_log_end", pa.int64()),
    ("node_id", pa.int32()), ("first", pa.int64()), ("last", pa.int64()),
    ("node_hw", pa.int64())])
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def iso_utc(ms: int | None) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds: `2024-11-23T08:20:00.123Z`."""
    if ms is None:
        return "—"
    try:
        moment = _EPOCH + timedelta(milliseconds=ms)  # exact: no float seconds
    except OverflowError:
        return "out of range"
    return moment.isoformat(timespec="milliseconds").removesuffix("+00:00") + "Z"


def when(ms: int | None) -> str:
    """`1732350000123 (2024-11-23T08:20:00.123Z)`: the raw value and what it means."""
    return "—" if ms is None else f"{ms} ({iso_utc(ms)})"


def write_report(result: AuditResult, out: str, spark: Any = None) -> list[str]:
    """Write every output into `out`, a local directory or a URI (through `spark`'s Hadoop
    FileSystem, default the active session's); returns the file names."""
    with output_dir(out, spark) as local:
        return _write(result, local)


def _write(result: AuditResult, out_dir: str) -> list[str]:
    tables = {
        "findings": to_table(result.findings),
        "nodes": pa.Table.from_pylist([asdict(n) for n in result.nodes]),
        "controller_leadership": pa.Table.from_pylist(
            [{**asdict(x), "nodes": list(x.nodes)} for x in result.leadership]),
        "broker_events": pa.Table.from_pylist(result.broker_events),
        "partition_leader_changes": result.leader_changes,
    }
    if result.partitions is not None:
        tables["partition_replicas"] = pa.Table.from_pylist(
            [asdict(r) for r in result.partitions.replicas], schema=REPLICAS_SCHEMA)
        tables["unclean_cuts"] = pa.Table.from_pylist(
            [asdict(c) for c in result.partitions.cuts], schema=CUTS_SCHEMA)
    names = []
    for name, table in tables.items():
        pq.write_table(table, os.path.join(out_dir, f"{name}.parquet"))
        names.append(f"{name}.parquet")
    plots = [_leadership_plot(result, out_dir), _leader_changes_plot(result, out_dir),
             _fenced_plot(result, out_dir)]
    with open(os.path.join(out_dir, "report.md"), "w") as file:
        file.write(_markdown(result, plots))
    with open(os.path.join(out_dir, "report.html"), "w") as file:
        file.write(_html(result, plots))
    return [*names, *plots, "report.md", "report.html"]


def summary_lines(result: AuditResult) -> list[str]:
    violations = len(result.violations)
    warnings = sum(1 for f in result.findings if f.severity == WARNING)
    nodes = ", ".join(f"node {n.node_id} [{n.start}, {n.end}) committed end "
                      f"{'unknown' if n.committed_end is None else n.committed_end}"
                      for n in result.nodes)
    return [
        f"verdict: {'VIOLATIONS FOUND' if violations else 'no violations'}",
        f"violations: {violations}, warnings: {warnings}",
        f"log records replayed: {result.records:,}; batches compared across "
        f"{len(result.nodes)} node(s): {nodes}",
        f"controller epochs: {len(result.leadership)}; broker events: "
        f"{len(result.broker_events)}; partition leader changes: "
        f"{result.leader_changes.num_rows:,}",
        f"metadata replay from offset {result.replay_start}; audit took {result.seconds:.1f} s",
        *_span(result),
        *_partition_summary(result),
        *result.notes,
    ]


def _partition_summary(result: AuditResult) -> list[str]:
    p = result.partitions
    if p is None:
        return ["partition logs: none in the log dirs"]
    partitions = len({(r.topic, r.partition) for r in p.replicas})
    return [f"partition logs: {len(p.replicas)} replica(s) of {partitions} partition(s), "
            f"{p.batches:,} batches; unclean-election cuts: {len(p.cuts)}"]


def _partitions_markdown(result: AuditResult) -> list[str]:
    p = result.partitions
    if p is None:
        return []
    out = ["", "## Partition logs", "", *_partition_summary(result), ""]
    if p.cuts:
        out += ["Offsets cut by unclean elections:", ""]
        out += [f"* {c.line()}" for c in p.cuts[:SHOWN]]
        out.append("")
    out += ["| partition | node | topic id | start | end | HW | batches |",
            "|---|---:|---|---:|---:|---:|---:|"]
    out += [f"| {r.topic}-{r.partition} | {r.node_id} | {_dash(r.topic_id)} | {_dash(r.start)} "
            f"| {_dash(r.end)} | {_dash(r.hw)} | {r.batches} |" for r in p.replicas[:SHOWN]]
    if len(p.replicas) > SHOWN:
        out.append(f"\n… {len(p.replicas) - SHOWN} more in partition_replicas.parquet")
    return out


def _partitions_html(result: AuditResult) -> str:
    p = result.partitions
    if p is None:
        return ""
    esc = html.escape
    cuts = "".join(f"<li>{esc(c.line())}</li>" for c in p.cuts[:SHOWN])
    rows = "".join(
        f"<tr><td>{esc(r.topic)}-{r.partition}</td><td>{r.node_id}</td>"
        f"<td>{esc(_dash(r.topic_id))}</td><td>{_dash(r.start)}</td><td>{_dash(r.end)}</td>"
        f"<td>{_dash(r.hw)}</td><td>{r.batches}</td></tr>" for r in p.replicas[:SHOWN])
    return (f"<h2>Partition logs</h2><p>{esc(' '.join(_partition_summary(result)))}</p>"
            + (f"<ul>{cuts}</ul>" if cuts else "")
            + "<table><tr><th>partition</th><th>node</th><th>topic id</th><th>start</th>"
            f"<th>end</th><th>HW</th><th>batches</th></tr>{rows}</table>")


def _span(result: AuditResult) -> list[str]:
    """The time span the controller epochs cover, when there are any."""
    times = [x.timestamp_ms for x in result.leadership if x.timestamp_ms is not None]
    if not times:
        return []
    return [f"controller epochs from {when(min(times))} to {when(max(times))}"]


def _markdown(result: AuditResult, plots: list[str]) -> str:
    out = ["# kraft-audit report", "", *[f"* {line}" for line in summary_lines(result)], "",
           "## Findings", ""]
    if not result.findings:
        out.append("None.")
    for f in result.findings[:SHOWN]:
        out.append(f"* **{f.severity}** `{f.check}` node {_dash(f.node_id)} offset "
                   f"{_dash(f.offset)}: {f.detail}")
    if len(result.findings) > SHOWN:
        out.append(f"* … {len(result.findings) - SHOWN} more in findings.parquet")
    out += ["", "## Controller leadership", "",
            "| epoch | leader | start offset | time (epoch ms, UTC) |", "|---:|---:|---:|---|"]
    out += [f"| {x.epoch} | {x.leader_id} | {x.start_offset} | {when(x.timestamp_ms)} |"
            for x in result.leadership]
    out += ["", "## Broker events", "",
            "| offset | time (epoch ms, UTC) | broker | event | epoch |",
            "|---:|---|---:|---|---:|"]
    out += [f"| {e['offset']} | {when(e['timestamp_ms'])} | {e['broker_id']} | {e['event']} "
            f"| {e['broker_epoch']} |" for e in result.broker_events[:SHOWN]]
    if len(result.broker_events) > SHOWN:
        out.append(f"\n… {len(result.broker_events) - SHOWN} more in broker_events.parquet")
    out += _partitions_markdown(result)
    out += ["", "## Plots", "", *[f"![{p}]({p})" for p in plots], ""]
    return "\n".join(out)


def _html(result: AuditResult, plots: list[str]) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr class='{f.severity}'><td>{f.severity}</td><td>{esc(f.check)}</td>"
        f"<td>{_dash(f.node_id)}</td><td>{_dash(f.offset)}</td><td>{esc(f.detail)}</td></tr>"
        for f in result.findings[:SHOWN])
    leaders = "".join(f"<tr><td>{x.epoch}</td><td>{x.leader_id}</td><td>{x.start_offset}</td>"
                      f"<td>{when(x.timestamp_ms)}</td></tr>" for x in result.leadership)
    brokers = "".join(
        f"<tr><td>{e['offset']}</td><td>{when(e['timestamp_ms'])}</td><td>{e['broker_id']}"
        f"</td><td>{esc(e['event'])}</td><td>{e['broker_epoch']}</td></tr>"
        for e in result.broker_events[:SHOWN])
    summary = "".join(f"<li>{esc(line)}</li>" for line in summary_lines(result))
    images = "".join(f"<figure><img src='{p}' alt='{p}'><figcaption>{p}</figcaption></figure>"
                     for p in plots)
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>kraft-audit report</title>"
        "<style>body{font-family:sans-serif;margin:2em}td,th{border:1px solid #ccc;"
        f"padding:2px 6px}}table{{border-collapse:collapse}}.{VIOLATION}{{background:#fdd}}"
        f".{WARNING}{{background:#ffd}}img{{max-width:900px}}</style></head><body>"
        f"<h1>kraft-audit report</h1><ul>{summary}</ul><h2>Findings</h2>"
        "<table><tr><th>severity</th><th>check</th><th>node</th><th>offset</th>"
        f"<th>detail</th></tr>{rows}</table><h2>Controller leadership</h2><table><tr>"
        "<th>epoch</th><th>leader</th><th>start offset</th><th>time (epoch ms, UTC)</th></tr>"
        f"{leaders}</table><h2>Broker events</h2><table><tr><th>offset</th>"
        "<th>time (epoch ms, UTC)</th><th>broker</th><th>event</th><th>epoch</th></tr>"
        f"{brokers}</table>{_partitions_html(result)}<h2>Plots</h2>{images}</body></html>")


def _dash(value: object) -> str:
    return "—" if value is None else str(value)


def _leadership_plot(result: AuditResult, out_dir: str) -> str:
    fig, ax = plt.subplots(figsize=(9, 3))
    spans = result.leadership
    end = max((n.end for n in result.nodes), default=0)
    for i, x in enumerate(spans):
        stop = spans[i + 1].start_offset if i + 1 < len(spans) else max(end, x.start_offset + 1)
        ax.barh(x.leader_id, stop - x.start_offset, left=x.start_offset, height=0.6)
        ax.text(x.start_offset, x.leader_id + 0.35, f"e{x.epoch}", fontsize=7)
    ax.set_yticks(sorted({x.leader_id for x in spans}))
    ax.set_xlabel("offset")
    ax.set_ylabel("leader node")
    ax.set_title("Controller leadership by epoch")
    return _save(fig, out_dir, "leadership_timeline.png")


def _leader_changes_plot(result: AuditResult, out_dir: str) -> str:
    fig, ax = plt.subplots(figsize=(9, 3))
    counts: dict[str, int] = {}
    table = result.leader_changes
    if table.num_rows:
        names = table.column("topic_name").to_pylist()
        parts = table.column("partition").to_pylist()
        for name, part in zip(names, parts, strict=True):
            key = f"{name}-{part}"
            counts[key] = counts.get(key, 0) + 1
    top = sorted(counts.items(), key=lambda kv: -kv[1])[:30]
    ax.bar([k for k, _ in top], [v for _, v in top])
    ax.tick_params(axis="x", labelrotation=90, labelsize=6)
    ax.set_ylabel("leader changes")
    ax.set_title(f"Leader changes per partition (top {len(top)} of {len(counts)})")
    return _save(fig, out_dir, "leader_changes_per_partition.png")


def _fenced_plot(result: AuditResult, out_dir: str) -> str:
    fig, ax = plt.subplots(figsize=(9, 3))
    state: dict[int, str] = {}
    xs, ys = [], []
    for e in sorted(result.broker_events, key=lambda e: e["offset"]):
        state[e["broker_id"]] = e["state"]
        xs.append(e["offset"])
        ys.append(sum(1 for s in state.values() if s == "fenced"))
    if xs:
        end = max((n.end for n in result.nodes), default=xs[-1])
        ax.step([*xs, max(end, xs[-1])], [*ys, ys[-1]], where="post")
    ax.set_xlabel("offset")
    ax.set_ylabel("fenced brokers")
    ax.set_title("Fenced brokers over time")
    return _save(fig, out_dir, "fenced_brokers.png")


def _save(fig: Figure, out_dir: str, name: str) -> str:
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, name), dpi=100)
    plt.close(fig)
    return name
