"""Snapshot size and speed: `python -m bench.snapshot_bench [--partitions N] [--repeat R]
[--json PATH]`.

Builds an image of N partitions (10 brokers, topics of 100 partitions, RF 3, replica lists
striped over the brokers, some topic configs) by replaying records, as a node would, then per
run: `image_to_records` (encoding), `write_image_snapshot` into a FileSnapshotStore in a temp
directory (encoding + batches + verify + fsync + rename), the file's size, and
`load_snapshot_image` (read + verify + decode + replay + apply: what a node or kraft-snapshot
does to load it). Reported: median and min-max over --repeat runs, in wall-clock seconds and
in CPU seconds of this process (the steady number on a shared machine).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.log_bench import filesystem, machine
from kraft.log.base import OffsetAndEpoch
from kraft.log.meta_properties import random_uuid
from kraft.log.snapshots import FileSnapshotStore
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    FeatureLevelRecord,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from snapshots.diff import as_loaded
from snapshots.image_records import image_to_records
from snapshots.reader import load_snapshot_image
from snapshots.writer import write_image_snapshot

BROKERS = 10
PER_TOPIC = 100


def build_image(partitions: int) -> MetadataImage:
    delta = MetadataDelta(EMPTY_IMAGE)
    offset = 0

    def replay(record: Any) -> None:
        nonlocal offset
        delta.replay(record, offset, 1, 1_700_000_000_000)
        offset += 1

    replay(FeatureLevelRecord("metadata.version", 21))
    for b in range(BROKERS):
        replay(RegisterBrokerRecord(b, random_uuid(), b, fenced=False))
    for t in range(max(1, partitions // PER_TOPIC)):
        topic_id = random_uuid()
        replay(TopicRecord(f"topic-{t}", topic_id))
        if t % 10 == 0:
            replay(ConfigRecord(ConfigResourceType.TOPIC, f"topic-{t}", "retention.ms", "1000"))
        for p in range(min(PER_TOPIC, partitions)):
            replicas = tuple((t + p + j) % BROKERS for j in range(3))
            replay(PartitionRecord(p, topic_id, replicas, replicas, leader=replicas[0]))
    return delta.apply()


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def run(partitions: int, repeat: int, directory: str) -> dict[str, Any]:
    started = time.perf_counter()
    image = build_image(partitions)
    build_s = time.perf_counter() - started
    print(f"image of {image.topics.partition_count():,} partitions built in {build_s:.1f} s",
          flush=True)
    runs: dict[str, list[float]] = {name: [] for name in (
        "encode_s", "write_s", "load_s", "encode_cpu_s", "write_cpu_s", "load_cpu_s")}

    def timed(name: str, action: Any, *args: Any) -> Any:
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        value = action(*args)
        runs[f"{name}_s"].append(time.perf_counter() - wall)
        runs[f"{name}_cpu_s"].append(time.process_time() - cpu)
        return value

    size = records = 0
    for attempt in range(repeat):
        records = len(timed("encode", image_to_records, image))
        store = FileSnapshotStore(Path(directory) / f"run-{attempt}")
        snapshot_id = OffsetAndEpoch(image.provenance.offset + 1, 1)
        info = timed("write", write_image_snapshot, store, image, snapshot_id,
                     image.provenance.timestamp_ms)
        size = info.size
        loaded = timed("load", load_snapshot_image, store.path(snapshot_id))
        if attempt == 0:  # once: the benchmark measures a correct load
            assert loaded == as_loaded(image, snapshot_id.offset)
        del loaded
        store.delete(snapshot_id)
        print(f"run {attempt + 1}: " + ", ".join(
            f"{name} {runs[f'{name}_s'][-1]:.2f} s (cpu {runs[f'{name}_cpu_s'][-1]:.2f})"
            for name in ("encode", "write", "load")) + f", {size / 2**20:.1f} MiB", flush=True)
    result = {
        "machine": machine(), "filesystem": filesystem(directory),
        "partitions": image.topics.partition_count(), "records": records,
        "snapshot_bytes": size, "image_build_s": build_s,
        **{name: summary(values) for name, values in runs.items()},
        "runs": runs,
    }
    print(f"{result['partitions']:,} partitions, {records:,} records, "
          f"{size / 2**20:.1f} MiB: encode {result['encode_s']['median']:.2f} s, write "
          f"{result['write_s']['median']:.2f} s "
          f"({size / 2**20 / result['write_s']['median']:.1f} MiB/s), load "
          f"{result['load_s']['median']:.2f} s (median of {repeat}; cpu: encode "
          f"{result['encode_cpu_s']['median']:.2f}, write {result['write_cpu_s']['median']:.2f}"
          f", load {result['load_cpu_s']['median']:.2f})", flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.snapshot_bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--dir", help="where to write the snapshots (default: a temp dir)")
    parser.add_argument("--json", help="write the raw numbers here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="kraft-snapshot-bench-", dir=args.dir) as directory:
        result = run(args.partitions, args.repeat, directory)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
