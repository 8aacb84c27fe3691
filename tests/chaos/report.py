"""Recovery times per fault and the printed / JSON summary of a campaign."""

from __future__ import annotations

import bisect
import statistics
from collections import Counter

from tests.chaos.faults import FaultRecord
from tests.chaos.writers import Write

LEADER_KINDS = ("kill-leader", "isolate-leader")


class AckTimeline:
    """Acknowledged writes by start time: 'when did the first write started after T land'."""

    def __init__(self, writes: list[Write]) -> None:
        acked = sorted((w.start_s, w.end_s or 0.0) for w in writes if w.acked)
        self.starts = [s for s, _ in acked]
        # suffix minimum of ack times: the earliest ack among writes started at or after i
        self.first_ack = [0.0] * len(acked)
        best = float("inf")
        for i in range(len(acked) - 1, -1, -1):
            best = min(best, acked[i][1])
            self.first_ack[i] = best

    def first_ack_after(self, t: float) -> float | None:
        i = bisect.bisect_left(self.starts, t)
        return self.first_ack[i] if i < len(self.starts) else None


def fault_timings(records: list[FaultRecord], writes: list[Write]) -> list[dict[str, object]]:
    """Per applied fault: `recoveredS`, from the fault's end to the first acknowledgement
    of a write started after it; for faults on the leader also `unavailableS`, from the
    fault's start to the first acknowledgement of a write started after that."""
    timeline = AckTimeline(writes)
    out = []
    for record in records:
        row = record.to_json()
        if not record.applied:
            out.append(row)
            continue  # never in effect: no recovery to time
        if record.ended_s is not None:
            ack = timeline.first_ack_after(record.ended_s)
            row["recoveredS"] = None if ack is None else round(ack - record.ended_s, 3)
        if record.started_s is not None and record.fault.kind in LEADER_KINDS:
            ack = timeline.first_ack_after(record.started_s)
            row["unavailableS"] = None if ack is None else round(ack - record.started_s, 3)
        out.append(row)
    return out


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def recovery_stats(timings: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    by_kind: dict[str, list[float]] = {}
    for row in timings:
        for field, suffix in (("recoveredS", ""), ("unavailableS", " (unavailable)")):
            value = row.get(field)
            if isinstance(value, float | int):
                by_kind.setdefault(f"{row['kind']}{suffix}", []).append(float(value))
    return {kind: {"count": len(v), "medianS": round(statistics.median(v), 3),
                   "p99S": round(percentile(v, 0.99), 3), "maxS": round(max(v), 3)}
            for kind, v in sorted(by_kind.items())}


def write_counts(writes: list[Write]) -> dict[str, object]:
    kinds = Counter((w.kind, w.acked) for w in writes)
    return {"attempted": len(writes), "acknowledged": sum(w.acked for w in writes),
            "unknownOutcome": sum(not w.acked for w in writes),
            "topicsCreatedAcked": kinds[("create", True)],
            "configsSetAcked": kinds[("config", True)]}


def summary_lines(report: dict) -> list[str]:  # type: ignore[type-arg]
    lines = [
        f"chaos campaign seed={report['seed']} duration={report['durationS']} s "
        f"controllers={report['controllers']} brokers={report['brokers']} "
        f"writers={report['writers']}: {'PASS' if report['ok'] else 'FAIL'}",
    ]
    applied = [f for f in report["faults"] if f["applied"]]
    kinds = Counter(f["kind"] for f in applied)
    per_kind = ", ".join(f"{k} {n}" for k, n in sorted(kinds.items()))
    unconfirmed = [f for f in report["faults"] if not f["skipped"] and not f["applied"]]
    skipped = [f for f in report["faults"] if f["skipped"]]
    lines.append(f"faults: {len(applied)} applied, confirmed by the node or the OS "
                 f"({per_kind}); {len(unconfirmed)} started but not confirmed, "
                 f"{len(skipped)} skipped")
    for f in report["faults"]:
        if f["skipped"]:
            lines.append(f"  #{f['index']:<3} {f['kind']:<14} skipped: {f['skipped']}")
            continue
        if not f["applied"]:
            lines.append(f"  #{f['index']:<3} {f['kind']:<14} {f['targets']} NOT CONFIRMED: "
                         f"{f['unconfirmed']}")
            continue
        extra = ""
        if f.get("unavailableS") is not None:
            extra += f" unavailable {f['unavailableS']:.2f} s"
        if f.get("recoveredS") is not None:
            extra += f" recovered {f['recoveredS']:.2f} s after"
        other = f" | {f['otherSide']}" if f["otherSide"] else ""
        value = f" {f['valueMs']} ms" if f["valueMs"] else ""
        lag = f" (confirmed +{f['confirmedS'] - f['startedS']:.3f} s)"
        lines.append(f"  #{f['index']:<3} {f['kind']:<14} {f['targets']}{other}{value} "
                     f"{f['startedS']:.2f}-{f['endedS']:.2f} s{lag}{extra}")
    w = report["writes"]
    lines.append(f"writes: {w['attempted']} attempted, {w['acknowledged']} acknowledged "
                 f"({w['topicsCreatedAcked']} topics, {w['configsSetAcked']} configs), "
                 f"{w['unknownOutcome']} with unknown outcome")
    d = report.get("data") or {}
    if d:
        lines.append(f"data: {d['sent']} records sent to {d['topic']} ({d['partitions']} "
                     f"partitions, RF 3, min.insync.replicas 2), {d['acknowledged']} "
                     f"acknowledged, {d['failed']} with unknown outcome (a failed delivery report; "
                     f"{d['unreported']} purged without one at close), "
                     f"{d['producerRestarts']} producer restarts; "
                     f"{d['read']} read by the consumers ({d['consumerRestarts']} restarts"
                     + (f", {', '.join(d['consumersHung'])} stuck in librdkafka at the end"
                        if d.get("consumersHung") else "") + "); "
                     f"consumer-visible HW went back {len(d['hwRegressions'])} time(s)")
        lines.extend(f"  {r}" for r in d["hwRegressions"][:5])
    lines.extend(transaction_lines(report.get("transactions") or {}))
    lines.extend(availability_lines(report.get("availability") or {}))
    clock = report.get("clockSteps") or {}
    if clock:
        lines.append(f"clock steps: {clock['applied']} applied, {clock['onActiveController']} "
                     f"on the active controller; {clock['fencingsDuringSteps']} of "
                     f"{clock['fencingsInAll']} fencing(s) in their windows")
    for kind, s in report["recovery"].items():
        lines.append(f"recovery {kind}: n={s['count']} median {s['medianS']} s "
                     f"p99 {s['p99S']} s max {s['maxS']} s")
    lines.append("snapshot files at the end: " + ", ".join(
        f"node {n} {c}" for n, c in report["snapshots"].items()))
    for name, value in report["liveness"].items():
        lines.append(f"after healing: {name} {value}")
    for check in report["checks"]:
        lines.append(f"[{'ok' if check['ok'] else 'FAIL'}] {check['name']}: {check['summary']}")
        if not check["ok"]:
            lines.extend(f"      {d}" for d in check["details"][:5])
    for crash in report["crashes"]:
        lines.append(f"node {crash['nodeId']} exited by itself at {crash['atS']} s "
                     f"(code {crash['exitCode']})")
    lines.append(f"replay: {report['replay']}")
    return lines


def transaction_lines(t: dict) -> list[str]:  # type: ignore[type-arg]
    """What the transactional writers and the consume-transform-produce app did."""
    if not t:
        return []
    n = t["transactions"]
    lines = [f"transactions: {t['writers']} writer(s) on {t['topic']}: "
             f"{sum(n.values())} transactions ({t['records']} records): {n['committed']} "
             f"committed, {n['aborted']} aborted ({t['abortedOnPurpose']} on purpose), "
             f"{n['unknown']} with unknown commit outcome, {n['unfinished']} unfinished "
             f"(failed before asking to commit); {t['writerRestarts']} writer restarts, "
             f"{t['stalls']} client process(es) killed for a stall"]
    lines.extend(f"  {reason}: {count}" for reason, count in t["reasons"].items())
    lines.extend(f"  {name}: {'; '.join(why)}" for name, why in t["killed"].items())
    lines.extend(f"  {name} exited by itself: {'; '.join(why)}"
                 for name, why in t.get("exits", {}).items())
    e = t.get("eos")
    if e:
        lines.append(f"eos app ({e['input']} -> {e['topic']}): {e['committedTransactions']} "
                     f"transactions committed, {e['aborts']} aborted, {e['reinits']} new "
                     f"producers, {e['restarts']} restarts, finished {e['finished']}; output "
                     f"{e['outputRecords']} records read_committed, {e['abortedOutputRecords']} "
                     "more read_uncommitted (aborted)" + "".join(f"; {k}" for k in e["killed"]))
        lines.extend(f"  eos app exited by itself: {x}" for x in e.get("exits", []))
    return lines


def availability_lines(a: dict) -> list[str]:  # type: ignore[type-arg]
    """The availability table: one row per partition, then the long windows with their cause
    (the timeline of those over the bound). A bound of None does not apply (the campaign
    re-faulted recovering brokers): nothing is over it."""
    if not a:
        return []
    bound = a["boundS"]
    limit = float("inf") if bound is None else bound
    head = "not applicable" if bound is None else f"{bound:g} s"
    lines = [f"availability: bound {head} ({'; '.join(a['boundTerms'])})",
             "  partition  replicas   acks     majority up  no controller quorum  waiting for "
             f"the last ISR replica (by design)  windows >= {a['reportFromS']:g} s  longest "
             "(counted)  cause"]
    for row in a["partitions"]:
        w = row["longest"] or {}
        span = f"{w['startS']:.2f}-{w['endS']:.2f} s" if w else "-"
        longest = "-" if row["longestS"] is None else f"{row['longestS']:.2f} s"
        over = "  OVER THE BOUND" if w and w["withMajorityS"] > limit else ""
        lines.append(f"  {row['partition']:<10} {row['replicas']!s:<10} {row['acks']:<8} "
                     f"{row['majorityUpS']:>8.1f} s  {row.get('noControllerQuorumS', 0.0):>12.1f} s"
                     f"{'':<8}{row.get('waitingForLastIsrS', 0.0):>8.1f} s"
                     f"{'':<35}{row['windowsFrom3S']:<13} "
                     f"{longest} ({span}){over}  {w.get('cause', '-')}")
    for w in a["windows"][:10]:
        over = w["withMajorityS"] > limit
        waited = w.get("waitingForLastIsrS") or 0.0
        lines.append(f"  p{w['partition']} {w['startS']:.2f}-{w['endS']:.2f} s: "
                     f"{w['withMajorityS']:.2f} s counted ({w['lengthS']:.2f} s in all"
                     + (f", {waited:.2f} s waiting for the last in-sync replica" if waited
                        else "") + ")"
                     f"{' OVER THE BOUND' if over else ''}; cause {w['cause']}; steps "
                     + ", ".join(f"{n} {t:.1f} s" for n, t in w["steps"][:4])
                     + f"; faults {'; '.join(w['faults']) or '-'}")
        if over:
            lines.extend(f"      {t}" for t in w["timeline"])
    return lines
