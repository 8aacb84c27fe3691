"""`python -m tests.chaos [--seed S] [--duration SECONDS] [--controllers 3|5] ...`

Exit status: 0 every check passed, 1 a check failed, 2 the campaign itself broke."""

from __future__ import annotations

import argparse
import json
import random
import sys
import traceback
from pathlib import Path

from tests.chaos.campaign import SNAPSHOT_BYTES, Options, run_campaign
from tests.chaos.report import summary_lines
from tests.chaos.schedule import KINDS


def parse_args(argv: list[str] | None) -> tuple[Options, Path | None]:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos",
        description="Run a cluster (controllers + 3 brokers) under seeded faults while writers "
                    "record every acknowledged admin write; heal; check that none was lost.")
    parser.add_argument("--seed", type=int, default=None, help="random when absent (printed)")
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of faults (60)")
    parser.add_argument("--controllers", type=int, choices=(3, 5), default=3)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--writers", type=int, default=4, help="writer threads (4)")
    parser.add_argument("--lanes", type=int, default=2,
                        help="fault sequences running side by side, i.e. overlapping faults (2)")
    parser.add_argument("--faults", default=",".join(KINDS),
                        help=f"fault kinds to draw from ({','.join(KINDS)})")
    parser.add_argument("--snapshot-bytes", type=int, default=SNAPSHOT_BYTES,
                        help="metadata.log.max.record.bytes.between.snapshots for every node "
                             f"({SNAPSHOT_BYTES}); the log is never cleaned")
    parser.add_argument("--producers", type=int, default=2,
                        help="data producers (acks=all, idempotent) on an RF-3 topic; 0: no data "
                             "part (2)")
    parser.add_argument("--consumers", type=int, default=1, help="data consumers (1)")
    parser.add_argument("--partitions", type=int, default=3,
                        help="partitions of the data topic (3)")
    parser.add_argument("--availability-bound", type=float, default=None, metavar="SECONDS",
                        help="the longest a data partition may go without an acknowledged "
                             "write while a majority of its replicas is up (derived from the "
                             "product's timeouts when absent; printed with its terms)")
    parser.add_argument("--refault-recovering", action="store_true",
                        help="fault a broker again (kill, pause, full disk) while it recovers "
                             "from its previous such fault, as the schedule draws it; by "
                             "default that fault is skipped until the broker is back in service "
                             "(one fault, one recovery). The availability bound does not apply "
                             "then (reported as not applicable)")
    parser.add_argument("--txn-writers", type=int, default=2,
                        help="transactional writers (processes, a transactional.id each; "
                             "every 5th transaction aborted on purpose) on an RF-3 topic; 0: "
                             "none (2)")
    parser.add_argument("--no-eos", action="store_true",
                        help="no consume-transform-produce app (exactly once from the data "
                             "topic to another; it runs when --producers > 0)")
    parser.add_argument("--no-audit", action="store_true", help="skip the Spark audit")
    parser.add_argument("--work-dir", type=Path, help="cluster data and logs (a temp dir)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work dir after a passing run (a failing one always is)")
    parser.add_argument("--out", type=Path, help="write the report as JSON here")
    args = parser.parse_args(argv)
    kinds = tuple(k.strip() for k in args.faults.split(",") if k.strip())
    unknown = [k for k in kinds if k not in KINDS]
    if unknown or not kinds:
        parser.error(f"unknown fault kind(s) {unknown}; choose from {','.join(KINDS)}")
    if args.availability_bound is not None and not args.availability_bound > 0:
        parser.error(f"--availability-bound must be a positive number of seconds, "
                     f"not {args.availability_bound}")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 10**6)
    return Options(seed=seed, duration_s=args.duration, controllers=args.controllers,
                   brokers=args.brokers, writers=args.writers, lanes=args.lanes,
                   audit=not args.no_audit, work_dir=args.work_dir, keep=args.keep,
                   kinds=kinds, snapshot_bytes=args.snapshot_bytes, producers=args.producers,
                   consumers=args.consumers, partitions=args.partitions,
                   availability_bound_s=args.availability_bound,
                   refault_recovering=args.refault_recovering,
                   txn_writers=args.txn_writers, eos=not args.no_eos), args.out


def main(argv: list[str] | None = None) -> int:
    options, out = parse_args(argv)
    try:
        report = run_campaign(options, say=lambda line: print(line, flush=True))
    except Exception:
        traceback.print_exc()
        print(f"the campaign broke; replay: {options.replay_command()}", file=sys.stderr)
        return 2
    for line in summary_lines(report):
        print(line)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
