"""Where the audit reads logs and writes reports: a local path, or a URI of any file system
Spark's Hadoop FileSystem reads (`file:///…`, `hdfs://…`, `s3a://…` with its connector).

* A **URI** is anything that starts with a scheme and `:/` (the same rule as
  `io.kraft.audit.LogFiles`). On the driver it is listed and read through the Hadoop
  FileSystem of the running SparkSession's JVM (with `spark.hadoop.*` settings), and the
  executors open its files the same way.
* A **local path** is made absolute on the driver, where it was typed: executors have
  other working directories. It is read with `os`, and the executors memory-map it, so it
  must exist at the same absolute path on every executor (a local master, or storage mounted
  on every machine).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from audit.errors import LayoutError

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:/")


def is_uri(path: str) -> bool:
    return _URI.match(path) is not None


def resolve(path: str) -> str:
    """A URI as given (without a trailing slash), a local path made absolute."""
    if is_uri(path):
        stripped = path.rstrip("/")
        return stripped if not stripped.endswith(":") else path
    return os.path.abspath(path)


class Files(Protocol):
    """What the layout needs of a file system."""

    def is_dir(self, path: str) -> bool: ...

    def names(self, path: str) -> list[str]: ...

    def read_bytes(self, path: str) -> bytes | None: ...  # None: no such file

    def join(self, path: str, name: str) -> str: ...

    def name(self, path: str) -> str: ...

    def parent(self, path: str) -> str: ...


class LocalFiles:
    def is_dir(self, path: str) -> bool:
        return os.path.isdir(path)

    def names(self, path: str) -> list[str]:
        return os.listdir(path)

    def read_bytes(self, path: str) -> bytes | None:
        try:
            with open(path, "rb") as file:
                return file.read()
        except FileNotFoundError:
            return None

    def join(self, path: str, name: str) -> str:
        return os.path.join(path, name)

    def name(self, path: str) -> str:
        return os.path.basename(os.path.normpath(path))

    def parent(self, path: str) -> str:
        return os.path.dirname(os.path.normpath(path))


LOCAL = LocalFiles()


class HadoopFiles:
    """A URI through the JVM's org.apache.hadoop.fs.FileSystem (py4j): every failure is a
    LayoutError of one line naming the URI and the JVM's reason."""

    def __init__(self, spark: Any) -> None:
        self._jvm = spark._jvm
        self._conf = spark._jsparkSession.sessionState().newHadoopConf()

    def _fs(self, uri: str) -> tuple[Any, Any]:
        path = self._jvm.org.apache.hadoop.fs.Path(uri)
        with _java_errors(uri):
            return path, path.getFileSystem(self._conf)

    def is_dir(self, path: str) -> bool:
        p, fs = self._fs(path)
        with _java_errors(path):
            return bool(fs.exists(p) and fs.getFileStatus(p).isDirectory())

    def names(self, path: str) -> list[str]:
        p, fs = self._fs(path)
        with _java_errors(path):
            return [str(s.getPath().getName()) for s in fs.listStatus(p)]

    def read_bytes(self, path: str) -> bytes | None:
        p, fs = self._fs(path)
        with _java_errors(path):
            if not fs.exists(p):
                return None
            stream = fs.open(p)
            try:
                return bytes(self._jvm.org.apache.commons.io.IOUtils.toByteArray(stream))
            finally:
                stream.close()

    def join(self, path: str, name: str) -> str:
        return f"{path.rstrip('/')}/{name}"

    def name(self, path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[-1]

    def parent(self, path: str) -> str:
        return path.rstrip("/").rsplit("/", 1)[0]

    def check_output(self, uri: str) -> None:
        """LayoutError unless `uri` can take the reports: a file system Hadoop knows, and no
        file (rather than a directory) already there."""
        p, fs = self._fs(uri)
        with _java_errors(uri):
            if fs.exists(p) and not fs.getFileStatus(p).isDirectory():
                raise LayoutError(f"--out {uri} is a file, not a directory")

    def upload(self, local_dir: str, uri: str) -> None:
        """Copy every file of `local_dir` into the directory `uri` (created), replacing."""
        target, fs = self._fs(uri)
        with _java_errors(uri):
            fs.mkdirs(target)
            for name in sorted(os.listdir(local_dir)):
                source = self._jvm.org.apache.hadoop.fs.Path(
                    "file://" + os.path.abspath(os.path.join(local_dir, name)))
                fs.copyFromLocalFile(False, True, source,
                                     self._jvm.org.apache.hadoop.fs.Path(target, name))


@contextmanager
def _java_errors(uri: str) -> Iterator[None]:
    from py4j.protocol import Py4JJavaError

    try:
        yield
    except Py4JJavaError as exc:
        error = exc.java_exception
        kind = str(error.getClass().getSimpleName())
        reason = " ".join(str(error.getMessage() or kind).split())
        hint = ""
        if kind == "UnsupportedFileSystemException":
            hint = (": Spark has no Hadoop connector for this scheme (add its jar, e.g. "
                    "--conf spark.jars.packages=org.apache.hadoop:hadoop-aws:<hadoop version> "
                    "for s3a)")
        raise LayoutError(f"cannot use {uri}: {kind}: {reason}{hint}") from None


def files_for(path: str, spark: Any = None) -> Files:
    """The file system of `path`: local, or the Hadoop FileSystem of `spark` (default: the
    active SparkSession). A URI without a running session is bad input."""
    if not is_uri(path):
        return LOCAL
    if spark is None:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession()
    if spark is None or getattr(spark, "_jvm", None) is None:
        raise LayoutError(f"{path} is a URI: it is read through Spark's Hadoop FileSystem, "
                          "on the driver of a running SparkSession (kraft-audit, "
                          "audit.jvm.read); the Python kraft-metadata source reads local "
                          "paths only")
    return HadoopFiles(spark)


@contextmanager
def output_dir(out: str, spark: Any = None) -> Iterator[str]:
    """A local directory to write the reports into: `out` itself when it is local, else a
    temporary directory uploaded to the URI `out` when the block ends without error."""
    if not is_uri(out):
        os.makedirs(out, exist_ok=True)
        yield out
        return
    files = files_for(out, spark)
    assert isinstance(files, HadoopFiles)
    tmp = tempfile.mkdtemp(prefix="kraft-audit-")
    try:
        yield tmp
        files.upload(tmp, out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
