"""The `kraft-metadata` PySpark data source: one row per record of every segment and snapshot
file of one or more nodes' metadata log directories, one Spark partition per file.

    spark.dataSource.register(KraftMetadataDataSource)
    spark.read.format("kraft-metadata").load([dir1, dir2, dir3])

Options (all strings, as Spark passes them):
  nodeIds          "1,2,3": node ids for the paths, in order (default: each meta.properties)
  committedOnly    "true": only offsets below each node's committed end, where known
  committedEnd     "1=120,2=118": committed ends (exclusive) that override high-watermark files
  startOffset      first offset to read (default 0)
  endOffset        offset to stop before (default: the end)
  includeJson      "false" skips `record_json` and the full field checks of the record decoder
  includeSnapshots "false" reads only segments
  level            "batch": one row per data batch (record columns null, record_type
                   DATA_BATCH), control records still one row each: a CRC scan, no decoding
  nodeRanges       {"1": [[0, 500]], "2": [[500, 620]]} (JSON): read each node only within
                   these offset ranges (a node not named is not read)
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from audit.decode import SPARK_DDL, ReadOptions, read_file
from audit.fs import is_uri
from audit.layout import LayoutError, LogFile, NodeLog, discover, parse_node_map

NAME = "kraft-metadata"


@dataclass(frozen=True)
class FilePartition(InputPartition):
    log_file: LogFile
    options: ReadOptions


def paths_of(options: Mapping[str, str]) -> list[str]:
    """The load() paths: Spark passes one as "path" and several as a JSON list in "paths"."""
    if "paths" in options:
        return list(json.loads(options["paths"]))
    if "path" in options:
        return [p for p in options["path"].split(",") if p]
    raise LayoutError("kraft-metadata needs at least one metadata log directory: load(path)")


def _flag(options: Mapping[str, str], key: str, default: bool) -> bool:
    value = options.get(key)
    if value is None:
        return default
    if value.lower() not in ("true", "false"):
        raise LayoutError(f"option {key} must be true or false, not {value!r}")
    return value.lower() == "true"


def _int(options: Mapping[str, str], key: str) -> int | None:
    value = options.get(key)
    if value is None:
        return None
    if not value.strip().isdigit():
        raise LayoutError(f"option {key} must be an offset >= 0, not {value!r}")
    return int(value)


def node_logs(options: Mapping[str, str], spark: object = None) -> list[NodeLog]:
    """Every node log the options name, with committed ends from files or the override.
    URIs are listed through `spark`'s Hadoop FileSystem (audit/fs.py)."""
    paths = paths_of(options)
    ids: list[int | None] = [None] * len(paths)
    if options.get("nodeids"):
        ids = [int(i) for i in options["nodeids"].split(",")]
        if len(ids) != len(paths):
            raise LayoutError(f"nodeIds names {len(ids)} nodes for {len(paths)} paths")
    overrides = parse_node_map(options.get("committedend", ""), "committedEnd")
    logs = [discover(path, node_id, spark=spark)
            for path, node_id in zip(paths, ids, strict=True)]
    seen: dict[int, str] = {}
    for log in logs:
        if log.node_id in seen:
            raise LayoutError(f"node id {log.node_id} appears twice ({seen[log.node_id]} and "
                              f"{log.partition_dir}): give nodeIds")
        seen[log.node_id] = log.partition_dir
    return [
        NodeLog(log.node_id, log.partition_dir, log.segments, log.snapshots,
                overrides.get(log.node_id, log.committed_end))
        for log in logs
    ]


class KraftMetadataReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        # Spark option keys are case-insensitive; a plain dict copy would not be.
        self.options = {key.lower(): value for key, value in options.items()}

    def partitions(self) -> list[InputPartition]:
        return self.plan()

    def plan(self, spark: object = None) -> list[InputPartition]:
        """The partitions; `spark` lists URIs (on the driver: audit/jvm.py plans this way)."""
        start = _int(self.options, "startoffset") or 0
        end = _int(self.options, "endoffset")
        committed_only = _flag(self.options, "committedonly", False)
        with_json = _flag(self.options, "includejson", True)
        snapshots = _flag(self.options, "includesnapshots", True)
        level = self.options.get("level", "record")
        if level not in ("record", "batch"):
            raise LayoutError(f"option level must be record or batch, not {level!r}")
        node_ranges = json.loads(self.options.get("noderanges", "null"))
        out: list[InputPartition] = []
        for log in node_logs(self.options, spark):
            stop = end
            if committed_only and log.committed_end is not None:
                stop = log.committed_end if stop is None else min(stop, log.committed_end)
            spans: list[tuple[int, int | None]] = [(start, stop)]
            if node_ranges is not None:
                spans = [(max(lo, start), hi if stop is None else min(hi, stop))
                         for lo, hi in node_ranges.get(str(log.node_id), [])]
            for lo, hi in spans:
                read = ReadOptions(lo, hi, with_json, batches_only=level == "batch")
                for segment in log.segments:
                    # Files wholly outside the range are not even opened.
                    if hi is not None and segment.base_offset >= hi and segment.base_offset:
                        continue
                    if segment.next_base is not None and segment.next_base <= lo:
                        continue
                    out.append(FilePartition(segment, read))
            if snapshots:
                read = ReadOptions(start, stop, with_json)
                out.extend(FilePartition(s, read) for s in log.snapshots
                           if stop is None or s.base_offset <= stop)
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, FilePartition)
        if is_uri(partition.log_file.path):
            raise LayoutError(f"{partition.log_file.path}: the Python kraft-metadata source "
                              "reads local paths only; audit.jvm.read reads URIs")
        yield from read_file(partition.log_file, partition.options)


class KraftMetadataDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> str:
        return SPARK_DDL

    def reader(self, schema: object) -> DataSourceReader:
        del schema  # the schema is fixed
        return KraftMetadataReader(self.options)
