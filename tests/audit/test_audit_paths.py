"""Where kraft-audit reads and writes: relative paths are resolved on the driver, URIs
(file:// here; hdfs://, s3a://... take the same road) are listed on the driver and read by
the executors through Spark's Hadoop FileSystem, --out may be a URI, bad input is one line
and exit 1; and the reports show epoch milliseconds with ISO-8601 UTC beside them."""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from audit import cli, jvm
from audit.fs import is_uri, resolve
from audit.layout import discover
from audit.report import iso_utc, when
from metadata.topics import METADATA_PARTITION_DIR
from tests.audit.small_log import NODES, T0, healthy, write_nodes

T0_ISO = "2023-11-14T22:13:20.000Z"  # T0 = 1_700_000_000_000 ms


def _args(dirs: list[str], out: str) -> list[str]:
    return [*(a for d in dirs for a in ("--log-dir", d)), "--out", out, "--partitions", "2"]


def _findings(out: Path) -> list[tuple]:
    rows = pq.read_table(out / "findings.parquet").to_pylist()
    return sorted((r["severity"], r["check"], r["node_id"], r["offset"]) for r in rows)


def test_uri_and_path_rules() -> None:
    assert is_uri("file:///tmp/x") and is_uri("hdfs://nn:8020/logs") and is_uri("s3a://b/k")
    assert is_uri("file:/tmp/x")
    assert not is_uri("demo-data/controller-1") and not is_uri("/abs/path")
    assert not is_uri("odd:name/dir")  # a colon without ":/" is a local name
    assert resolve("hdfs://nn/logs/") == "hdfs://nn/logs"
    assert resolve("demo-data/c1") == os.path.join(os.getcwd(), "demo-data", "c1")


def test_relative_paths_are_resolved_on_the_driver(spark, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    write_nodes(tmp_path, healthy())
    monkeypatch.chdir(tmp_path)
    log = discover("node-2")
    assert log.partition_dir == os.fspath(tmp_path / "node-2" / METADATA_PARTITION_DIR)
    tasks = jvm.plan({"includeJson": "false"}, ["node-1", "node-2"], spark)
    assert tasks and all(os.path.isabs(t.log_file.path) for t in tasks)
    code = cli.main(_args(["node-1", "node-2", "node-3"], "out"))
    assert code == cli.EXIT_OK
    assert (tmp_path / "out" / "report.md").is_file()


def test_uris_read_and_write_through_hadoop_filesystem(spark, tmp_path: Path) -> None:
    where = write_nodes(tmp_path, healthy())
    plain = tmp_path / "plain"
    assert cli.main(_args([os.fspath(tmp_path / f"node-{n}") for n in NODES],
                          os.fspath(plain))) == cli.EXIT_OK
    # The same logs as file:// URIs (with and without the authority slashes), --out too.
    uris = [f"file://{tmp_path}/node-1", f"file:{tmp_path}/node-2/", f"file://{tmp_path}/node-3"]
    out = tmp_path / "via-uri"
    assert cli.main(_args(uris, f"file://{out}")) == cli.EXIT_OK
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in plain.iterdir())
    assert _findings(out) == _findings(plain) == []
    for name in ("nodes", "controller_leadership", "broker_events"):
        assert pq.read_table(out / f"{name}.parquet").equals(
            pq.read_table(plain / f"{name}.parquet"))
    # The executors read through Hadoop: a corrupt batch is named by its URI.
    bad = where[2][4]
    data = bytearray(Path(bad.path).read_bytes())
    data[bad.position + 30] ^= 0xFF
    Path(bad.path).write_bytes(bytes(data))
    assert cli.main(_args(uris, f"file://{out}")) == cli.EXIT_VIOLATIONS
    [corrupt] = [r for r in pq.read_table(out / "findings.parquet").to_pylist()
                 if r["check"] == "corrupt-batch"]
    assert (corrupt["node_id"], corrupt["offset"]) == (2, 4)
    assert corrupt["detail"].startswith(f"file:{tmp_path}/node-2/{METADATA_PARTITION_DIR}/")


@pytest.mark.parametrize(("make", "expect"), [
    (lambda t: f"file://{t}/missing", "does not exist"),
    (lambda t: os.fspath(t / "missing"), "does not exist"),
    (lambda t: f"file://{t}/node-1/{METADATA_PARTITION_DIR}/{0:020d}.log",
     "does not exist or is not"),
    (lambda t: f"nosuchfs://{t}/node-1", 'No FileSystem for scheme "nosuchfs"'),
])
def test_bad_log_dir_is_one_line_and_exit_1(spark, tmp_path: Path, capsys, make,
                                            expect: str) -> None:
    write_nodes(tmp_path, healthy())
    capsys.readouterr()
    code = cli.main(_args([make(tmp_path)], os.fspath(tmp_path / "out")))
    assert code == cli.EXIT_BAD_INPUT
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("kraft-audit: ") and expect in err[0], err


def test_bad_out_is_one_line_and_exit_1(spark, tmp_path: Path, capsys) -> None:
    write_nodes(tmp_path, healthy())
    (tmp_path / "a-file").write_text("x")
    dirs = [os.fspath(tmp_path / f"node-{n}") for n in NODES]
    for out in (os.fspath(tmp_path / "a-file"), f"file://{tmp_path}/a-file",
                f"nosuchfs://{tmp_path}/out"):
        capsys.readouterr()
        assert cli.main(_args(dirs, out)) == cli.EXIT_BAD_INPUT, out
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("kraft-audit: "), err


def test_times_show_iso_8601_utc_beside_epoch_ms(spark, tmp_path: Path, capsys) -> None:
    assert iso_utc(1_732_350_000_123) == "2024-11-23T08:20:00.123Z"
    assert when(1_732_350_000_123) == "1732350000123 (2024-11-23T08:20:00.123Z)"
    assert iso_utc(-1) == "1969-12-31T23:59:59.999Z" and when(None) == "—"
    assert iso_utc(10**20) == "out of range"
    write_nodes(tmp_path, healthy())
    out = tmp_path / "out"
    capsys.readouterr()
    assert cli.main(_args([os.fspath(tmp_path / f"node-{n}") for n in NODES],
                          os.fspath(out))) == cli.EXIT_OK
    first = f"{T0} ({T0_ISO})"  # the LEADER_CHANGE of epoch 1, at offset 0
    second = f"{T0 + 13} (2023-11-14T22:13:20.013Z)"  # epoch 2's, at offset 13
    md = (out / "report.md").read_text()
    assert f"| 1 | 1 | 0 | {first} |" in md and f"| 2 | 2 | 13 | {second} |" in md
    assert f"| 1 | {T0 + 1} (2023-11-14T22:13:20.001Z) | 0 | REGISTER | 10 |" in md
    page = (out / "report.html").read_text()
    assert f"<td>{first}</td>" in page and f"<td>{second}</td>" in page
    assert "<h2>Broker events</h2>" in page
    stdout = capsys.readouterr().out
    assert f"controller epochs from {first} to {second}" in stdout
    # The Parquet tables keep the raw milliseconds.
    rows = pq.read_table(out / "controller_leadership.parquet").to_pylist()
    assert [r["timestamp_ms"] for r in rows] == [T0, T0 + 13]


def test_the_python_source_refuses_uris_in_one_line(spark, tmp_path: Path) -> None:
    write_nodes(tmp_path, healthy())
    with pytest.raises(Exception, match="reads local paths only"):
        spark.read.format("kraft-metadata").option("includeJson", "false").load(
            [f"file://{tmp_path}/node-1"]).count()
