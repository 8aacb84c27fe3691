"""`kraft-audit --log-dir DIR [--log-dir DIR ...] --out DIR [--master URL] [--conf K=V ...]`.

Exit codes: 0 no violation, 2 violations found, 1 bad input (one line on stderr)."""

from __future__ import annotations

import argparse
import os
import sys

from audit.fs import HadoopFiles, files_for, is_uri, resolve
from audit.layout import LayoutError, NodeLog, discover, parse_node_map

EXIT_OK, EXIT_BAD_INPUT, EXIT_VIOLATIONS = 0, 1, 2


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kraft-audit",
        description="Replay the metadata logs of every node with Spark and check them: "
                    "consistency across nodes, metadata invariants, timelines.",
        epilog="A DIR is a local path (made absolute here, on the driver: executors on "
               "other machines need it at the same path) or a URI of any file system "
               "Spark's Hadoop FileSystem reads (file:///..., hdfs://..., s3a://...). "
               "Exit status: 0 no violation, 2 violations found, 1 bad input.")
    parser.add_argument("--log-dir", action="append", required=True, metavar="DIR",
                        help="a node's metadata.log.dir (or its __cluster_metadata-0); repeat")
    parser.add_argument("--out", required=True, metavar="DIR",
                        help="where reports go (a local directory or a URI)")
    parser.add_argument("--master", default="local[*]", help="Spark master (local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting, as spark-submit's --conf (repeat): e.g. "
                             "spark.executor.memory=2g, spark.hadoop.fs.s3a.endpoint=...")
    parser.add_argument("--node-ids", metavar="1,2,3",
                        help="node ids for the --log-dir values, in order, for directories "
                             "without meta.properties")
    parser.add_argument("--committed-end", metavar="NODE=OFFSET,...", default="",
                        help="committed end offsets (exclusive) overriding high-watermark files")
    parser.add_argument("--partitions", type=int, default=8,
                        help="Spark tasks for the partition replay, at most the cores (8)")
    return parser.parse_args(argv)


def parse_conf(items: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise LayoutError(f"bad --conf {item!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def node_ids(args: argparse.Namespace) -> list[int | None]:
    if not args.node_ids:
        return [None] * len(args.log_dir)
    try:
        ids: list[int | None] = [int(i) for i in args.node_ids.split(",")]
    except ValueError:
        raise LayoutError(f"--node-ids must be integers: {args.node_ids!r}") from None
    if len(ids) != len(args.log_dir):
        raise LayoutError(f"--node-ids names {len(ids)} nodes for {len(args.log_dir)} "
                          "--log-dir values")
    return ids


def node_logs(args: argparse.Namespace, spark: object = None) -> list[NodeLog]:
    """The node logs of `args.log_dir` (resolved); URIs are listed through `spark`."""
    ids = node_ids(args)
    ends = parse_node_map(args.committed_end, "--committed-end")
    logs = [discover(d, i, spark=spark) for d, i in zip(args.log_dir, ids, strict=True)]
    if len({log.node_id for log in logs}) != len(logs):
        raise LayoutError("two --log-dir values are the same node id: give --node-ids")
    unknown = set(ends) - {log.node_id for log in logs}
    if unknown:
        raise LayoutError(f"--committed-end names node {min(unknown)}, not among the logs")
    return [NodeLog(log.node_id, log.partition_dir, log.segments, log.snapshots,
                    ends.get(log.node_id, log.committed_end)) for log in logs]


def _bad_input(exc: Exception) -> int:
    print(f"kraft-audit: {exc}", file=sys.stderr)
    return EXIT_BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # Paths are resolved here, on the driver: a relative path means nothing to an executor.
    args.log_dir = [resolve(d) for d in args.log_dir]
    args.out = resolve(args.out)
    remote = [p for p in (*args.log_dir, args.out) if is_uri(p)]
    logs: list[NodeLog] | None = None
    try:
        settings = parse_conf(args.conf)
        if remote:
            node_ids(args)  # what can be checked before a JVM starts
            parse_node_map(args.committed_end, "--committed-end")
        else:
            logs = node_logs(args)
            from audit.partition_source import discover_replicas

            for log in logs:  # a broker's partition directories must be readable
                discover_replicas(os.path.dirname(log.partition_dir), log.node_id)
        if not is_uri(args.out) and os.path.exists(args.out) and not os.path.isdir(args.out):
            raise LayoutError(f"--out {args.out} is a file, not a directory")
    except LayoutError as exc:
        return _bad_input(exc)
    # Imported here so that bad local input is refused before a JVM starts.
    from pyspark.sql import SparkSession

    from audit.job import run_audit
    from audit.report import summary_lines, write_report
    from audit.session import spark_session

    # A session already running in this process (tests, notebooks) is used and left running.
    active = SparkSession.getActiveSession()
    try:
        spark = active or spark_session(args.master, conf=settings)
    except LayoutError as exc:  # no JDK to build the JVM reader with
        return _bad_input(exc)
    try:
        try:
            if logs is None:  # URIs: listed through the session's Hadoop FileSystem
                logs = node_logs(args, spark)
            if is_uri(args.out):
                files = files_for(args.out, spark)
                assert isinstance(files, HadoopFiles)
                files.check_output(args.out)
        except LayoutError as exc:
            return _bad_input(exc)
        try:
            result = run_audit(spark, logs, args.partitions)
        except LayoutError as exc:  # a partition directory of a broker that cannot be read
            return _bad_input(exc)
        write_report(result, args.out, spark)
    finally:
        if active is None:
            spark.stop()
    for line in summary_lines(result):
        print(line)
    for finding in result.findings[:20]:
        print(finding.line())
    print(f"reports in {args.out}: report.md, report.html, *.parquet, *.png")
    return EXIT_VIOLATIONS if result.violations else EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
