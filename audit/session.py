"""The SparkSession for the audit: local[*] unless a master is given, the JVM reader's jar on
the classpath, the data source registered, the UI off and the logs quiet."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

from audit.jvm import ensure_jar
from audit.partition_source import KraftPartitionsDataSource
from audit.source import KraftMetadataDataSource


def spark_session(master: str = "local[*]", shuffle_partitions: int = 8,
                  driver_memory: str = "4g",
                  conf: Mapping[str, str] | None = None) -> SparkSession:
    """JdkMissing (one line) when there is no javac to build the JVM reader with.
    `driver_memory` is the whole heap of a local master: the leader-change table of a 10M
    record log (a third of its records) passes through it on its way to Arrow. `conf` is
    any further Spark settings (they win over these defaults; `spark.jars` is added to).

    On a cluster the jar reaches the executors through `spark.jars` (the driver serves it);
    only a local master also puts it on the executor class path, which is the driver's."""
    jar = os.fspath(ensure_jar())  # before the JVM starts: it goes on its classpath
    local = master.startswith("local")
    # Python workers must run this interpreter (the one with pyarrow and this package).
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    if local:
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # a local run stays on loopback
    settings = dict(conf or {})
    extra_jars = settings.pop("spark.jars", "")
    builder = (
        SparkSession.builder.master(master)
        .appName("kraft-audit")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions))
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.extraJavaOptions", "-Dlog4j2.level=ERROR")
        .config("spark.driver.memory", driver_memory)
        .config("spark.jars", ",".join(filter(None, (jar, extra_jars))))
        .config("spark.driver.extraClassPath", jar)
    )
    if local:
        builder = builder.config("spark.executor.extraClassPath", jar)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(KraftMetadataDataSource)
    spark.dataSource.register(KraftPartitionsDataSource)
    return spark
