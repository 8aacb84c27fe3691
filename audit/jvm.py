"""The JVM side of the audit: the reader in `audit/jvm/src` (Java, no dependencies beyond
Spark's own jars), compiled on first use into a jar cached by a hash of its sources, and the
call that turns a kraft-metadata read into a DataFrame decoded on the JVM.

The jar is built with the JDK's `javac --release 17` against pyspark's jars and written to
`$KRAFT_AUDIT_CACHE` (default `$XDG_CACHE_HOME/kraft-audit`, else `~/.cache/kraft-audit`) as
`<hash>/kraft-audit.jar`, atomically: concurrent processes build the same bytes and the last
rename wins.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pyspark
from pyspark.sql import DataFrame, SparkSession

from audit.decode import SPARK_DDL
from audit.layout import LayoutError
from audit.source import FilePartition, KraftMetadataReader

SOURCES = Path(__file__).parent / "jvm" / "src"
JAR_NAME = "kraft-audit.jar"
ENTRY = "io.kraft.audit.KraftAudit"


class JdkMissing(LayoutError):
    """No javac to build the JVM reader with: one line that says what to do."""


def cache_dir() -> Path:
    explicit = os.environ.get("KRAFT_AUDIT_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(Path.home(), ".cache")
    return Path(base) / "kraft-audit"


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def source_hash() -> str:
    """What the jar depends on: the sources and the Spark it compiles against."""
    digest = hashlib.sha256(pyspark.__version__.encode())
    for path in _sources():
        digest.update(path.relative_to(SOURCES).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def javac() -> str:
    """javac from JAVA_HOME, else from PATH; JdkMissing when there is none."""
    home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(home, "bin", "javac")] if home else []
    candidates.append(shutil.which("javac") or "")
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise JdkMissing("kraft-audit needs a JDK 17 (javac) to build its JVM reader: install one "
                     "(e.g. apt-get install openjdk-17-jdk-headless) or set JAVA_HOME to it")


def spark_jars() -> Path:
    return Path(pyspark.__file__).parent / "jars"


def ensure_jar() -> Path:
    """The jar for the current sources, built if the cache does not have it yet."""
    target = cache_dir() / source_hash() / JAR_NAME
    if target.is_file():
        return target
    compiler = javac()
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="build-") as tmp:
        classes = Path(tmp) / "classes"
        done = subprocess.run(
            [compiler, "--release", "17", "-nowarn", "-encoding", "UTF-8",
             "-cp", os.path.join(spark_jars(), "*"), "-d", os.fspath(classes),
             *map(os.fspath, _sources())],
            capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"javac failed building {JAR_NAME}:\n{done.stderr}")
        partial = Path(tmp) / JAR_NAME
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\n\r\n")
            for path in sorted(classes.rglob("*.class")):
                jar.write(path, path.relative_to(classes).as_posix())
        os.replace(partial, target)  # atomic: a reader sees no jar or a whole one
    return target


def _task(partition: FilePartition) -> str:
    """One line of io.kraft.audit.FileTask."""
    f, o = partition.log_file, partition.options
    if o.with_json:
        raise LayoutError("the JVM reader does not build record_json: use includeJson=false")
    if "\n" in f.path or "\t" in f.path:
        raise LayoutError(f"path {f.path!r} holds a tab or newline")
    end = -1 if o.end_offset is None else o.end_offset
    return "\t".join(map(str, (f.node_id, f.kind, f.base_offset, f.epoch, o.start_offset, end,
                               int(o.batches_only), f.path)))


def plan(options: Mapping[str, str], paths: list[str],
         spark: SparkSession | None = None) -> list[FilePartition]:
    """The files (and ranges) a kraft-metadata read with these options covers. Local paths
    are made absolute here, on the driver; URIs are listed through `spark`'s Hadoop
    FileSystem (audit/fs.py) and read by the tasks the same way (LogFiles.java)."""
    reader = KraftMetadataReader({**options, "paths": json.dumps(paths)})
    return [p for p in reader.plan(spark) if isinstance(p, FilePartition)]


def _tasks(files: list[FilePartition]) -> str:
    return "\n".join(_task(p) for p in files)


def _entry(spark: SparkSession) -> Any:  # a Py4J proxy of the Java class: untyped
    jvm = spark._jvm
    assert jvm is not None
    return jvm.io.kraft.audit.KraftAudit


def read(spark: SparkSession, options: Mapping[str, str], paths: list[str]) -> DataFrame:
    """What `spark.read.format("kraft-metadata").options(**options).load(paths)` gives (with
    includeJson=false), decoded on the JVM: the Python source plans the files, Java reads them.
    """
    jdf = _entry(spark).read(spark._jsparkSession, _tasks(plan(options, paths, spark)),
                             SPARK_DDL)
    return DataFrame(jdf, spark)


def driver_rows(spark: SparkSession, options: Mapping[str, str], paths: list[str],
                record_types: tuple[str, ...]) -> tuple[DataFrame, int]:
    """One pass over a record-level read: the rows of `record_types` and the rows with an
    error (few: what the driver replays and reports), and the number of rows of the read."""
    found = _entry(spark).driverRows(spark._jsparkSession, _tasks(plan(options, paths, spark)),
                                     SPARK_DDL, ",".join(record_types))
    return DataFrame(found.rows(), spark), int(found.count())


def replay(spark: SparkSession, files: list[FilePartition], history: str, complete: bool,
           shards: int, out_ddl: str) -> DataFrame:
    """The partition replay on the JVM (io.kraft.audit.PartitionReplay) over `files` in the
    order given (offset order), in `shards` tasks."""
    jdf = _entry(spark).replay(spark._jsparkSession, _tasks(files), history, complete, shards,
                               out_ddl)
    return DataFrame(jdf, spark)
