"""`kraft-admin groups describe` of a big group (issue 31):
`python -m bench.group_tool_bench [--partitions 1000] [--trials 5] [--json PATH]`.

One controller and three brokers as `kraft-server` subprocesses on loopback; a topic of
--partitions partitions (replication factor 1, spread over the brokers) with one record in each,
and a group with a committed offset on every partition (confluent-kafka's AdminClient). Timed,
in this process (not a server's):

* **tool**: `kraft-admin groups describe --group G` as an operator runs it, a new process each
  trial (its Python start included): FindCoordinator, DescribeGroups, OffsetFetch of every
  offset, Metadata, one ListOffsets per leader, and the LAG table printed.
* **in-process**: the same describe through server.admin_cli.main, no interpreter start.

Goal: the tool answers within 1 s for 1,000 partitions.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from bench.log_bench import machine
from harness.cluster import kafka_cluster, wait_for
from server import admin_cli

BROKERS = [2, 3, 4]
GROUP = "big-group"
TOPIC = "wide"
GOAL_S = 1.0
WAIT_S = 120


def spread(values: list[float]) -> dict[str, Any]:
    return {"median": round(statistics.median(values), 3), "min": round(min(values), 3),
            "max": round(max(values), 3), "all": [round(v, 3) for v in values]}


def prepare(bootstrap: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(TOPIC, partitions, 1)])[TOPIC].result(timeout=WAIT_S)
    wait_for(lambda: len([p for p in admin.list_topics(TOPIC, timeout=10).topics[TOPIC]
                          .partitions.values() if p.leader >= 0]) == partitions,
             WAIT_S, "every partition led", poll_s=0.5)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for p in range(partitions):
        producer.produce(TOPIC, value=b"x", partition=p)
    assert producer.flush(WAIT_S) == 0
    admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(
        GROUP, [TopicPartition(TOPIC, p, 0) for p in range(partitions)])])[GROUP].result(
            timeout=WAIT_S)


def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="group-tool-bench-") as root, kafka_cluster(
            Path(root), BROKERS, {"internal.test.hooks.enable": "false",
                                  "offsets.topic.replication.factor": "1"}, WAIT_S) as cluster:
        bootstrap = cluster.bootstrap_servers()
        prepare(bootstrap, args.partitions)
        command = [sys.executable, "-m", "server.admin_cli", "--bootstrap-server", bootstrap,
                   "groups", "describe", "--group", GROUP]
        tool, in_process, rows = [], [], 0
        for _ in range(args.trials):
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=True,
                                  env={**os.environ, "PYTHONPATH": os.getcwd()})
            tool.append(time.perf_counter() - started)
            rows = len(done.stdout.strip().splitlines()) - 1
            out = io.StringIO()
            started = time.perf_counter()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
                assert admin_cli.main(command[3:]) == 0
            in_process.append(time.perf_counter() - started)
        assert rows == args.partitions, f"{rows} rows for {args.partitions} partitions"
        return {"partitions": args.partitions, "rows": rows, "tool_s": spread(tool),
                "in_process_s": spread(in_process), "goal_s": GOAL_S,
                "met": statistics.median(tool) <= GOAL_S, "machine": machine()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--json", type=str, default=None)
    args = parser.parse_args(argv)
    results = run(args)
    print(f"groups describe, {results['partitions']} partitions: tool (new process) median "
          f"{results['tool_s']['median']} s ({results['tool_s']['min']}-"
          f"{results['tool_s']['max']}), in-process {results['in_process_s']['median']} s "
          f"({results['in_process_s']['min']}-{results['in_process_s']['max']}); goal "
          f"{GOAL_S} s: {'met' if results['met'] else 'MISSED'}")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
