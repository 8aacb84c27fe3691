"""Issue 19's data-plane targets, the one rule their verdicts follow, and the verdicts
(bench/data_plane_bench.py measures; this module only judges, so a unit test can check it).

The rule (VERDICT_RULE): a verdict uses the client the target names at that client's
defaults, except the settings the target itself names; a figure from a client tuned beyond
that is a secondary row in no verdict. Every target's client settings are printed, and kept
in the results, before the run. The same rule holds for every system a verdict compares.
"""

from __future__ import annotations

import statistics
from typing import Any

# librdkafka pauses a partition's fetches for fetch.queue.backoff.ms (default 1000) whenever
# its local queue passes queued.min.messages / queued.max.messages.kbytes: a client-side
# limit. The tuned variant runs interleaved with the defaults as a secondary row, in no verdict
# (VERDICT_RULE).
CONSUMER_NO_BACKOFF = {"fetch.queue.backoff.ms": 0, "queued.max.messages.kbytes": 262144,
                       "queued.min.messages": 1000000}
VERDICT_RULE = ("a verdict uses the client the target names at that client's defaults, except "
                "the settings the target itself names; a figure from a client tuned beyond "
                "that is a secondary row in no verdict (the same rule for every system)")
# Issue 19's targets, each with the client settings its verdict is measured with: what the
# target names (the producer: 1 KiB values, linger.ms=5; the failover stream: acks=all,
# exactly once), everything else at confluent-kafka's defaults. The bench's own plumbing
# (group.id, no auto commit, end-of-partition events, assign()) tunes nothing.
TARGETS: dict[str, dict[str, Any]] = {
    "produce_all_mb_s": {"bound": 50, "what": "produce acks=all >= 50 MB/s",
                         "client": "Producer", "settings": {"acks": "all", "linger.ms": 5}},
    "produce_1_mb_s": {"bound": 100, "what": "produce acks=1 >= 100 MB/s",
                       "client": "Producer", "settings": {"acks": "1", "linger.ms": 5}},
    "consume_mb_s": {"bound": 200, "what": "consume >= 200 MB/s", "client": "Consumer",
                     "settings": {}},
    "latency_p99_ms": {"bound": 15, "what": "acks=all at 1,000 records/s: p99 <= 15 ms, "
                       "from each record's scheduled send", "client": "Producer",
                       "settings": {"acks": "all", "linger.ms": 5}},
    "failover": {"bound": (1.0, 2.0), "what": "kill -9 of the leader's broker -> first acks=all "
                 "ack on the new leader: median <= 1 s, p99 <= 2 s, 0 lost",
                 "client": "Producer",
                 "settings": {"acks": "all", "linger.ms": 5, "enable.idempotence": True}},
}


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def latencies_ms(start: list[float], acked: list[tuple[int, float, int]]) -> list[float]:
    """Per acknowledged record, in sequence order: ack time - its start time (ms). With the
    scheduled send times a stalled client's delay counts against every record that was due
    during the stall, not only the one in flight."""
    return [(t - start[seq]) * 1000 for seq, t, _ in sorted(acked)]


def paced_figures(run: dict[str, Any]) -> dict[str, Any]:
    """p50 / p99 / max (ms) of one paced run (worker_paced's result) from each record's
    scheduled send, the first 10 % dropped (connection set-up); the p99 from the actual
    produce() call beside it, which a stalled client hides its delay from."""
    ms = latencies_ms(run["scheduled"], run["acked"])
    warm = ms[len(ms) // 10:]
    actual = latencies_ms(run["sent"], run["acked"])[len(ms) // 10:]
    return {"records": len(ms), "p50_ms": round(percentile(warm, 0.5), 2),
            "p99_ms": round(percentile(warm, 0.99), 2), "max_ms": round(max(warm), 2),
            "from_actual_send_p99_ms": round(percentile(actual, 0.99), 2)}


SECONDARY = "secondary (client tuned): no verdict"


def summarize(results: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """One row per figure; a verdict only on the rows measured with the target's own client
    settings (TARGETS, VERDICT_RULE), the tuned and other secondary rows say so instead."""
    lim = results["limits"]
    fsync_s = statistics.median(x["fsync"]["fsyncs_s"] for x in lim)
    loop_mb = statistics.median(x["loopback"]["mb_s"] for x in lim)
    fsync_ms = 1000 / fsync_s
    rows = []

    def tp(name: str, runs: list[dict[str, Any]], key: str | None) -> None:
        values = [r["mb_s"] for r in runs]
        med = statistics.median(values)
        verdict = SECONDARY
        if key is not None:
            bound = TARGETS[key]["bound"]
            verdict = f">= {bound} MB/s: {'met' if med >= bound else 'MISSED'}"
        rows.append((name, f"{med:.1f} MB/s ({min(values):.1f}-{max(values):.1f})", verdict,
                     f"{med / loop_mb:.4f} of loopback; "
                     f"{statistics.median(r['records_s'] for r in runs) / fsync_s:.1f} rec "
                     "per raw fsync"))

    if "throughput" in results:
        for acks, key in (("all", "produce_all_mb_s"), ("1", "produce_1_mb_s")):
            tp(f"produce acks={acks}", results["throughput"]["produce"][acks], key)
        tp("consume (client defaults)", results["throughput"]["consume"], "consume_mb_s")
        tp("consume, client tuned (no fetch backoff, 256 MB queue)",
           results["throughput"]["consume_no_backoff"], None)
    if "latency" in results:
        lat = results["latency"]["runs"]
        p50 = statistics.median(r["p50_ms"] for r in lat)
        p99 = statistics.median(r["p99_ms"] for r in lat)
        mx = max(r["max_ms"] for r in lat)
        bound = TARGETS["latency_p99_ms"]["bound"]
        rows.append(("latency acks=all p50/p99/max, from the scheduled send",
                     f"{p50:.2f} / {p99:.2f} / {mx:.1f} ms (p99s {[r['p99_ms'] for r in lat]})",
                     f"p99 <= {bound} ms: {'met' if p99 <= bound else 'MISSED'}",
                     f"p50 = {p50 / fsync_ms:.1f} raw fsyncs, p99 = {p99 / fsync_ms:.1f}"))
        rows.append(("(same, p99 from the actual send: hides a stalled client)",
                     f"{statistics.median(r['from_actual_send_p99_ms'] for r in lat):.2f} ms",
                     "secondary: no verdict", ""))
        l0 = results["latency"]["linger0"]
        rows.append(("(same, linger.ms=0) p50/p99/max",
                     f"{statistics.median(r['p50_ms'] for r in l0):.2f} / "
                     f"{statistics.median(r['p99_ms'] for r in l0):.2f} / "
                     f"{max(r['max_ms'] for r in l0):.1f} ms", SECONDARY, ""))
    fo = results.get("failover", {})
    if "median_s" in fo:
        median_bound, p99_bound = TARGETS["failover"]["bound"]
        ok = fo["median_s"] <= median_bound and fo["p99_s"] <= p99_bound and fo["lost"] == 0
        rows.append(("failover kill -9 -> new leader ack",
                     f"median {fo['median_s']} s, p99 {fo['p99_s']} s, max {fo['max_s']} s "
                     f"({len(fo['kills'])} kills); lost {fo['lost']}, dup {fo['duplicates']}",
                     f"<= {median_bound:g} s / <= {p99_bound:g} s, 0 lost: "
                     f"{'met' if ok else 'MISSED'}",
                     f"{fo['median_s'] * 1000 / fsync_ms:,.0f} raw fsyncs"))
    return rows


def target_lines() -> list[str]:
    """Printed (and kept in the JSON) before the run: the rule, and each target's client
    settings."""
    import confluent_kafka
    version = confluent_kafka.version()  # a str in 2.x, a (str, int) tuple before
    client = (f"confluent-kafka {version if isinstance(version, str) else version[0]} "
              f"(librdkafka {confluent_kafka.libversion()[0]})")
    lines = [f"verdict rule: {VERDICT_RULE}"]
    for target in TARGETS.values():
        settings = ", ".join(f"{k}={v}" for k, v in target["settings"].items()) or "none"
        lines.append(f"  {target['what']}: {client} {target['client']}, defaults but for: "
                     f"{settings}")
    lines.append("  secondary rows (no verdict): consume with "
                 + ", ".join(f"{k}={v}" for k, v in CONSUMER_NO_BACKOFF.items())
                 + "; latency with linger.ms=0; latency p99 from the actual send")
    return lines
