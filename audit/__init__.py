"""The Spark audit of the metadata logs (docs/audit.md).

| module | what it holds |
|---|---|
| `layout.py` | finding a node's partition directory, node id, segments, snapshots, committed end |
| `decode.py` | one segment or snapshot file -> Arrow record batches (the rows of the data source) |
| `source.py` | the `kraft-metadata` PySpark data source |
| `jvm.py` | the Java reader and replay (`jvm/src`): the cached jar, and the calls into it |
| `session.py` | the SparkSession the tools and tests use (the jar on its classpath) |
| `consistency.py` | cross-node log checks: batch CRCs, epochs, one leader per epoch |
| `replay.py` | metadata invariants and timelines in offset order (partitions on the JVM) |
| `report.py` | Parquet tables, report.md, report.html and the PNG plots |
| `cli.py` | `kraft-audit` |
"""
