"""Tables (markdown, to stdout), ratios, plots and the raw JSON of a peer benchmark run."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

IN_PROCESS = "kraft append (in process)"
USER_PATHS = ("kraft Admin API", "kraft append (gRPC)")  # what a client of this product calls
KRAFT_WRITES = (IN_PROCESS, *USER_PATHS)
ETCD_GRPC = "etcd put (gRPC)"
ETCD_GATEWAY = "etcd put (JSON gateway)"
# Rows shown but never a ratio's denominator: etcd's gateway adds a JSON hop etcdctl and the Go
# client do not take ("etcd" is an older run's name for it).
NOT_A_REFERENCE = (ETCD_GATEWAY, "etcd", "etcd (gRPC)")


def fmt(value: float | None) -> str:
    if value is None or value != value:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 1:
        return f"{value:.2f}"
    return f"{value:.3f}"


def _real(values: Sequence[float | None]) -> list[float]:
    """Drop NaN and None (a NaN reads back from the JSON as null)."""
    return [v for v in values if v is not None and v == v]


def med(values: list[float]) -> float:
    values = _real(values)
    return statistics.median(values) if values else float("nan")


def spread(values: list[float]) -> str:
    values = _real(values)
    if not values:
        return "-"
    if len(values) == 1:
        return fmt(values[0])
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}–{fmt(max(values))})"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if _real([a]) and _real([b]) and b else "-"


def _row(rows: list[dict[str, Any]], writers: int) -> dict[str, Any] | None:
    return next((r for r in rows if r["writers"] == writers), None)


def _system_rows(writes: dict[str, list[dict[str, Any]]], systems: list[str]) -> list[str]:
    out = ["| system | writers | writes/s | p50 ms | p99 ms | client CPU | server CPU |",
           "|---|---:|---:|---:|---:|---:|---:|"]
    for system in systems:
        for row in writes[system]:
            runs = row["runs"]
            out.append(f"| {system} | {row['writers']} "
                       f"| {spread([r['writes_per_s'] for r in runs])} "
                       f"| {spread([r['p50_ms'] for r in runs])} "
                       f"| {spread([r['p99_ms'] for r in runs])} "
                       f"| {fmt(med([r['client_cpu'] for r in runs]))} "
                       f"| {fmt(med([r['server_cpu'] for r in runs]))} |")
    return out


def writes_tables(writes: dict[str, list[dict[str, Any]]]) -> list[str]:
    """The user paths and the peers, with ratios to the peers (etcd over gRPC first); the
    in-process append apart, in no ratio."""
    outside = [s for s in writes if s != IN_PROCESS]
    out = ["### Writes: 100-byte values, closed-loop writers, 3 voters", "",
           *_system_rows(writes, outside)]
    peers = sorted((s for s in writes if s not in KRAFT_WRITES and s not in NOT_A_REFERENCE),
                   key=lambda s: s != ETCD_GRPC)
    ours = [s for s in USER_PATHS if s in writes]
    if peers and ours:
        out += ["", "Ratios, this project ÷ peer (medians of the same run; writes/s above 1 "
                "and p50 below 1 favour this project):", "",
                "| this project | writers | " + " | ".join(
                    f"writes/s ÷ {p} | p50 ÷ {p}" for p in peers) + " |",
                "|---|---:|" + "---:|---:|" * len(peers)]
        for system in ours:
            for row in writes[system]:
                cells = []
                for peer in peers:
                    other = _row(writes[peer], row["writers"])
                    if other is None:
                        cells += ["-", "-"]
                        continue
                    cells.append(ratio(med([r["writes_per_s"] for r in row["runs"]]),
                                       med([r["writes_per_s"] for r in other["runs"]])))
                    cells.append(ratio(med([r["p50_ms"] for r in row["runs"]]),
                                       med([r["p50_ms"] for r in other["runs"]])))
                out.append(f"| {system} | {row['writers']} | " + " | ".join(cells) + " |")
    if IN_PROCESS in writes:
        out += ["", "### Inside one process (not a user path; never in a verdict)", "",
                "The leader's append API called by writers in the benchmark's own process "
                "(the leader runs in its event loop; client CPU is that whole process, server "
                "CPU the two followers):", "", *_system_rows(writes, [IN_PROCESS])]
    return out


KIND_NAMES = {"kill": "kill -9 of the leader", "stop": "SIGSTOP of the leader",
              "handover": "graceful handover"}
ACTIONS = {"kill": "kill -9", "stop": "SIGSTOP (SIGCONT after)"}
HANDOVER = {"kraft": "SIGTERM (resign, EndQuorumEpoch)", "etcd": "move-leader",
            "pysyncobj": "transferLeadership (TimeoutNow)"}


def failover_tables(failover: dict[str, dict[str, Any]]) -> list[str]:
    out = ["### Failover: the action on the leader → first successful write", "",
           "| system | action | trials | median ms | p90 ms | p99 ms | min ms | max ms "
           "| timeouts |", "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for system, kinds in failover.items():
        for kind, data in kinds.items():
            s = data["summary"]
            action = ACTIONS.get(kind) or HANDOVER.get(system, kind)
            out.append(f"| {system} | {action} | {s['n']} | {fmt(s['median'])} "
                       f"| {fmt(s['p90'])} | {fmt(s['p99'])} | {fmt(s['min'])} "
                       f"| {fmt(s['max'])} | {data['timeouts']} |")
    if "kraft" in failover:
        out += ["", "| this project ÷ peer | action | median | p99 |", "|---|---|---:|---:|"]
        for peer, kinds in failover.items():
            if peer == "kraft":
                continue
            for kind, data in kinds.items():
                ours = failover["kraft"].get(kind)
                if ours is None:
                    continue
                out.append(f"| ÷ {peer} | {KIND_NAMES[kind]} "
                           f"| {ratio(ours['summary']['median'], data['summary']['median'])} "
                           f"| {ratio(ours['summary']['p99'], data['summary']['p99'])} |")
    return out


def scale_tables(scale: dict[str, dict[str, Any]]) -> list[str]:
    out = ["### Metadata at scale: a new controller ready to act", "",
           "| partitions | this project: kill -9 of the active controller → new active "
           "accepts a write, ms | trials | ZooKeeper full read, Java client, ms | ZooKeeper "
           "full read, kazoo, ms | reads each | ZooKeeper ÷ this project (medians; Java, "
           "kazoo) |", "|---:|---:|---:|---:|---:|---:|---:|"]
    for size, data in sorted(scale.items(), key=lambda kv: int(kv[0])):
        ours, kazoo, java = data.get("kraft"), data.get("zookeeper"), data.get("zookeeper_java")
        runs = {name: d.get("later_run") for name, d in (("kraft", ours), ("ZooKeeper", kazoo
                                                                               or java)) if d}
        label = f"{int(size):,}"
        if any(runs.values()):
            label += " (" + ", ".join(f"{name}: run {(n or 0) + 1}"
                                      for name, n in runs.items()) + ")"
        ratios = [ratio(med(z["ms"]), med(ours["ms"])) if ours and z else "-"
                  for z in (java, kazoo)]
        out.append(
            f"| {label} | {spread(ours['ms']) if ours else '-'} "
            f"| {len(ours['ms']) if ours else 0} | {spread(java['ms']) if java else '-'} "
            f"| {spread(kazoo['ms']) if kazoo else '-'} "
            f"| {max(len(z['ms']) for z in (java, kazoo) if z) if java or kazoo else 0} "
            f"| {', '.join(ratios)} |")
    javas = [(size, d["zookeeper_java"]) for size, d in scale.items() if "zookeeper_java" in d]
    if javas:
        out += ["", "The Java reader's time runs from before its connect to the last state "
                "parsed (as kazoo's); a fresh JVM per read, whose start is outside it:", "",
                "| partitions | Java: read ms | JVM process wall ms | client CPU s | server "
                "CPU s | kazoo: client CPU s | server CPU s |",
                "|---:|---:|---:|---:|---:|---:|---:|"]
        for size, java in sorted(javas, key=lambda kv: int(kv[0])):
            kazoo_reads = scale[size].get("zookeeper", {}).get("reads", [])
            out.append(f"| {int(size):,} | {spread(java['ms'])} "
                       f"| {spread([r['process_wall_ms'] for r in java['reads']])} "
                       f"| {fmt(med([r['client_cpu_s'] for r in java['reads']]))} "
                       f"| {fmt(med([r['server_cpu_s'] for r in java['reads']]))} "
                       f"| {fmt(med([r['client_cpu_s'] for r in kazoo_reads]))} "
                       f"| {fmt(med([r['server_cpu_s'] for r in kazoo_reads]))} |")
    return out


def machine_lines(info: dict[str, Any]) -> list[str]:
    load = " ".join(f"{x:.2f}" for x in info["loadavg_at_start"])
    end = " ".join(f"{x:.2f}" for x in info.get("loadavg_at_end", []))
    return [f"* machine: {info['nproc']} CPUs ({info['cpu']}), Python {info['python']}, "
            f"filesystem {info['filesystem']}",
            f"* load average at start {load}, at end {end}; duration "
            f"{info.get('duration_s', float('nan')):.0f} s; commit {info['git_commit'][:10]}",
            f"* versions: {info['versions']}",
            f"* command: `{info['command']}`"]


# -- plots --------------------------------------------------------------------------------------


def plots(results: dict[str, Any], directory: str) -> list[str]:
    try:
        import matplotlib
    except ImportError:
        print("plots: matplotlib is not installed; no plots written")
        return []
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out_dir = Path(directory)
    written = []
    writes = results.get("writes") or {}
    if writes:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
        for system, rows in writes.items():
            xs = [r["writers"] for r in rows]
            style = ":^" if system == IN_PROCESS else "-o" if system.startswith("kraft") \
                else "--s"
            label = f"{system}: not a user path" if system == IN_PROCESS else system
            ax1.plot(xs, [med([x["writes_per_s"] for x in r["runs"]]) for r in rows], style,
                     label=label)
            ax2.plot(xs, [med([x["p50_ms"] for x in r["runs"]]) for r in rows], style,
                     label=system)
        counts = sorted({r["writers"] for rows in writes.values() for r in rows})
        for ax, title in ((ax1, "committed writes/s (median)"), (ax2, "p50 latency, ms")):
            ax.set_xscale("log", base=2)
            ax.set_xticks(counts, [str(c) for c in counts])
            ax.minorticks_off()
            ax.set_yscale("log")
            ax.set_xlabel("concurrent writers")
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
        ax1.legend(fontsize=7)
        ax1.set_yscale("log")
        fig.suptitle("Writes of 100-byte values, 3 voters on loopback, same run")
        fig.tight_layout()
        written.append(_save(fig, out_dir / "bench-peers-writes.png", plt))
    failover = results.get("failover") or {}
    if failover:
        fig, ax = plt.subplots(figsize=(9, 4.2))
        labels, data = [], []
        for system, kinds in failover.items():
            for kind, d in kinds.items():
                if d["ms"]:
                    short = {"kill": "kill -9", "stop": "SIGSTOP"}.get(kind, "handover")
                    labels.append(f"{system}\n{short}")
                    data.append(d["ms"])
        ax.boxplot(data, whis=(0, 100))
        ax.set_xticks(range(1, len(labels) + 1), labels, fontsize=8)
        for i, values in enumerate(data, 1):
            ax.plot([i] * len(values), values, ".", alpha=0.5)
        ax.set_yscale("log")
        ax.set_ylabel("ms to the first successful write")
        ax.set_title("Failover: every trial (box: median, quartiles, min-max)")
        ax.grid(True, axis="y", which="both", alpha=0.3)
        fig.tight_layout()
        written.append(_save(fig, out_dir / "bench-peers-failover.png", plt))
    scale = results.get("scale") or {}
    if scale:
        fig, ax = plt.subplots(figsize=(7, 4.2))
        sizes = sorted(scale, key=int)
        width = 0.27
        for offset, (key, label) in enumerate((("kraft", "this project: new active controller "
                                                "accepts a write"),
                                               ("zookeeper_java", "ZooKeeper: full read, Java "
                                                "client"),
                                               ("zookeeper", "ZooKeeper: full read, kazoo"))):
            values = [med(scale[s][key]["ms"]) / 1000 if key in scale[s] else 0 for s in sizes]
            ax.bar([i + (offset - 1) * width for i in range(len(sizes))], values, width,
                   label=label)
        ax.set_xticks(range(len(sizes)), [f"{int(s):,} partitions" for s in sizes])
        ax.set_yscale("log")
        ax.set_ylabel("seconds (median)")
        ax.set_title("Metadata at scale: a new controller ready to act")
        ax.legend(fontsize=8)
        ax.grid(True, axis="y", which="both", alpha=0.3)
        fig.tight_layout()
        written.append(_save(fig, out_dir / "bench-peers-scale.png", plt))
    return written


def _save(fig: Any, path: Path, plt: Any) -> str:
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def _clean(value: Any) -> Any:
    """NaN -> null, so the file is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def write(results: dict[str, Any], json_path: str, plot_dir: str) -> None:
    lines = ["", "## Results", "", *machine_lines(results["machine"])]
    for number, later in enumerate(results.get("later_runs", []), 2):
        lines += [f"* run {number} (its rows are marked):", *("  " + line for line in
                                                             machine_lines(later))]
    for skipped, reason in results["machine"].get("skipped", {}).items():
        lines.append(f"* **{skipped} skipped**: {reason}")
    if results.get("writes"):
        lines += ["", *writes_tables(results["writes"])]
    if results.get("failover"):
        lines += ["", *failover_tables(results["failover"])]
    if results.get("scale"):
        lines += ["", *scale_tables(results["scale"])]
    print("\n".join(lines))
    if plot_dir:
        for path in plots(results, plot_dir):
            print(f"plot written to {path}")
    results["markdown"] = "\n".join(lines)
    Path(json_path).parent.mkdir(parents=True, exist_ok=True)
    Path(json_path).write_text(json.dumps(_clean(results), indent=1))
    print(f"raw numbers written to {json_path}")


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.peers.report [JSON [PLOT_DIR]]`: the tables and plots again from the
    raw numbers of a run (no measurement)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    json_path = args[0] if args else str(Path(__file__).resolve().parents[1] / "results"
                                         / "peers.json")
    plot_dir = args[1] if len(args) > 1 else str(Path(__file__).resolve().parents[2] / "docs")
    write(json.loads(Path(json_path).read_text()), json_path, plot_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
