"""The cost of one authorization decision: `python -m bench.authorizer_bench [--json PATH]`.

StandardAuthorizer (metadata/authorizer/standard.py) loaded with N bindings (default 10,000,
half of them PREFIXED), spread over 500 principals, topics, groups and the cluster, ALLOW and
DENY mixed, as an operator's ACLs look. Then a stream of requests as the Kafka listener makes
them (principal, host, operation, resource): a third hit a literal binding, a third fall under a
prefix, a third name no binding. Each decision is timed alone with perf_counter_ns (the
timer's own cost, measured the same way, is reported and not subtracted). The goal (issue 27)
is p99 <= 20 us per request with 10,000 bindings; a Produce to one topic is one decision.

This times the decision in-process because the decision is what the goal is about; the
end-to-end cost of authorization on produce is measured with a client in another process
(`bench.data_plane_bench --authz`).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from typing import Any

from bench.log_bench import machine
from metadata.authorizer.model import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.authorizer.standard import StandardAuthorizer

OPERATIONS = (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE,
              AclOperation.ALTER, AclOperation.DELETE)


def bindings(count: int, rng: random.Random) -> list[AclBinding]:
    out = []
    for i in range(count):
        prefixed = i % 2 == 1
        kind = rng.choice((ResourceType.TOPIC, ResourceType.TOPIC, ResourceType.GROUP))
        name = f"team-{i % 700}-" if prefixed else f"{kind.name.lower()}-{i}"
        out.append(AclBinding(
            kind, name, PatternType.PREFIXED if prefixed else PatternType.LITERAL,
            f"User:svc-{i % 500}", rng.choice(("*", "*", "*", f"10.0.{i % 250}.1")),
            rng.choice(OPERATIONS),
            AclPermissionType.DENY if i % 10 == 0 else AclPermissionType.ALLOW))
    return out


def requests(count: int, acls: list[AclBinding], rng: random.Random,
             ) -> list[tuple[str, str, AclOperation, ResourceType, str]]:
    out = []
    for i in range(count):
        b = rng.choice(acls)
        match i % 3:
            case 0:
                name = b.resource_name if b.pattern_type == PatternType.LITERAL else (
                    b.resource_name + "x")
            case 1:
                name = f"team-{rng.randrange(700)}-orders-{rng.randrange(10_000)}"
            case _:
                name = f"unknown-{rng.randrange(1_000_000)}"
        out.append((b.principal, "10.0.0.1", rng.choice(OPERATIONS), b.resource_type, name))
    return out


def percentile(values: list[int], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))] / 1000


def run(args: argparse.Namespace) -> dict[str, Any]:
    rng = random.Random(args.seed)
    acls = bindings(args.bindings, rng)
    authorizer = StandardAuthorizer(["User:admin"], allow_everyone_if_no_acl_found=False)
    started = time.perf_counter()
    authorizer.load(acls)
    load_ms = (time.perf_counter() - started) * 1000
    stream = requests(args.requests, acls, rng)
    timer = time.perf_counter_ns
    authorize = authorizer.authorize
    runs = []
    for _ in range(args.repeat):
        samples = []
        allowed = 0
        for principal, host, operation, kind, name in stream:
            t0 = timer()
            ok = authorize(principal, host, operation, kind, name, log_if_denied=False)
            samples.append(timer() - t0)
            allowed += ok
        empty = []
        for _ in range(10_000):
            t0 = timer()
            empty.append(timer() - t0)
        samples.sort()
        empty.sort()
        runs.append({"p50_us": percentile(samples, 0.50), "p99_us": percentile(samples, 0.99),
                     "p999_us": percentile(samples, 0.999), "max_us": samples[-1] / 1000,
                     "allowed_share": allowed / len(stream),
                     "timer_p50_us": percentile(empty, 0.5)})
    p99s = [r["p99_us"] for r in runs]
    return {"machine": machine(), "bindings": args.bindings, "requests": args.requests,
            "load_ms": round(load_ms, 1), "runs": runs,
            "p99_us_median": statistics.median(p99s), "p99_us_spread": [min(p99s), max(p99s)],
            "goal_p99_us": 20.0,
            "verdict": "met" if statistics.median(p99s) <= 20.0 else "MISSED"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.authorizer_bench",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bindings", type=int, default=10_000)
    parser.add_argument("--requests", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args(argv)
    result = run(args)
    for i, r in enumerate(result["runs"], 1):
        print(f"run {i}: p50 {r['p50_us']:.2f} us  p99 {r['p99_us']:.2f} us  "
              f"p99.9 {r['p999_us']:.2f} us  max {r['max_us']:.1f} us  "
              f"(allowed {r['allowed_share']:.0%}, timer {r['timer_p50_us']:.2f} us)")
    print(f"{result['bindings']} bindings loaded in {result['load_ms']} ms; p99 median "
          f"{result['p99_us_median']:.2f} us (spread {result['p99_us_spread'][0]:.2f}-"
          f"{result['p99_us_spread'][1]:.2f}), goal <= 20 us: {result['verdict']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as file:
            json.dump(result, file, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
