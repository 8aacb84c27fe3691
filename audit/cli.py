"""`kraft-audit --log-dir DIR [--log-dir DIR ...] --out DIR [--master URL]`.

Exit codes: 0 no violation, 2 violations found, 1 bad input (one line on stderr)."""

from __future__ import annotations

import argparse
import sys

from audit.layout import LayoutError, NodeLog, discover, parse_node_map

EXIT_OK, EXIT_BAD_INPUT, EXIT_VIOLATIONS = 0, 1, 2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kraft-audit",
        description="Replay the metadata logs of every node with Spark and check them: "
                    "consistency across nodes, metadata invariants, timelines.",
        epilog="exit status: 0 no violation, 2 violations found, 1 bad input")
    parser.add_argument("--log-dir", action="append", required=True, metavar="DIR",
                        help="a node's metadata.log.dir (or its __cluster_metadata-0); repeat")
    parser.add_argument("--out", required=True, metavar="DIR", help="where reports go")
    parser.add_argument("--master", default="local[*]", help="Spark master (local[*])")
    parser.add_argument("--node-ids", metavar="1,2,3",
                        help="node ids for the --log-dir values, in order, for directories "
                             "without meta.properties")
    parser.add_argument("--committed-end", metavar="NODE=OFFSET,...", default="",
                        help="committed end offsets (exclusive) overriding high-watermark files")
    parser.add_argument("--partitions", type=int, default=8,
                        help="Spark tasks for the partition replay, at most the cores (8)")
    return parser.parse_args(argv)


def node_logs(args: argparse.Namespace) -> list[NodeLog]:
    ids: list[int | None] = [None] * len(args.log_dir)
    if args.node_ids:
        try:
            ids = [int(i) for i in args.node_ids.split(",")]
        except ValueError:
            raise LayoutError(f"--node-ids must be integers: {args.node_ids!r}") from None
        if len(ids) != len(args.log_dir):
            raise LayoutError(f"--node-ids names {len(ids)} nodes for {len(args.log_dir)} "
                              "--log-dir values")
    ends = parse_node_map(args.committed_end, "--committed-end")
    logs = [discover(d, i) for d, i in zip(args.log_dir, ids, strict=True)]
    if len({log.node_id for log in logs}) != len(logs):
        raise LayoutError("two --log-dir values are the same node id: give --node-ids")
    unknown = set(ends) - {log.node_id for log in logs}
    if unknown:
        raise LayoutError(f"--committed-end names node {min(unknown)}, not among the logs")
    return [NodeLog(log.node_id, log.partition_dir, log.segments, log.snapshots,
                    ends.get(log.node_id, log.committed_end)) for log in logs]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        logs = node_logs(args)
    except LayoutError as exc:
        print(f"kraft-audit: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # Imported here so that bad input is refused before a JVM starts.
    from pyspark.sql import SparkSession

    from audit.job import run_audit
    from audit.report import summary_lines, write_report
    from audit.session import spark_session

    # A session already running in this process (tests, notebooks) is used and left running.
    active = SparkSession.getActiveSession()
    try:
        spark = active or spark_session(args.master)
    except LayoutError as exc:  # no JDK to build the JVM reader with
        print(f"kraft-audit: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        result = run_audit(spark, logs, args.partitions)
    finally:
        if active is None:
            spark.stop()
    write_report(result, args.out)
    for line in summary_lines(result):
        print(line)
    for finding in result.findings[:20]:
        print(finding.line())
    print(f"reports in {args.out}: report.md, report.html, *.parquet, *.png")
    return EXIT_VIOLATIONS if result.violations else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
