"""meta.properties, storage checks at start-up, and the kraft-storage command."""

from __future__ import annotations

import base64
import os
import re
import stat
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kraft.log import meta_properties as mp
from kraft.log.meta_properties import (
    MetaProperties,
    StorageError,
    is_valid_uuid,
    random_uuid,
    read_meta_properties,
    validate_cluster_id,
    write_meta_properties,
)
from server.config import NodeConfig, load_config
from server.storage import ensure_formatted
from server.storage_cli import main

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
OTHER_CLUSTER = "q1Sh-9_ISia_zwGINzRvyQ"
UUID_TEXT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}")


def write_config(tmp_path: Path, *, node_id: int = 1, dirs: str = "data", extra: str = "") -> Path:
    """A controller config whose log dirs (comma-separated names) live under tmp_path."""
    log_dirs = ",".join(str(tmp_path / name) for name in dirs.split(","))
    path = tmp_path / f"controller-{node_id}.properties"
    path.write_text(
        "process.roles=controller\n"
        f"node.id={node_id}\n"
        "controller.quorum.voters=1@127.0.0.1:9093,2@127.0.0.1:9094,3@127.0.0.1:9095\n"
        f"listeners=CONTROLLER://127.0.0.1:{9092 + node_id}\n"
        "controller.listener.names=CONTROLLER\n"
        f"log.dirs={log_dirs}\n" + extra
    )
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def cfg(path: Path) -> NodeConfig:
    return load_config(path)


def formatted(directory: Path, meta: MetaProperties) -> None:
    directory.mkdir()
    write_meta_properties(str(directory), meta)


def directory_id(directory: Path) -> str | None:
    meta = read_meta_properties(str(directory))
    assert meta is not None
    return meta.directory_id


# -- Uuids -----------------------------------------------------------------------------------


def test_random_uuid_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "random-uuid")
    assert (code, err) == (0, "")
    text = out.strip()
    assert UUID_TEXT.fullmatch(text)
    assert len(base64.urlsafe_b64decode(text + "==")) == 16
    assert is_valid_uuid(text)


def test_random_uuid_skips_reserved_and_dash_prefixed(monkeypatch: pytest.MonkeyPatch) -> None:
    good = uuid.UUID(bytes=b"\x01" * 16)
    candidates = iter(
        [uuid.UUID(bytes=b"\xf8" + bytes(15)), uuid.UUID(int=0), uuid.UUID(int=1), good]
    )
    monkeypatch.setattr(mp.uuid, "uuid4", lambda: next(candidates))
    assert random_uuid() == base64.urlsafe_b64encode(good.bytes).decode().rstrip("=")


def test_random_uuids_are_distinct_and_never_start_with_dash() -> None:
    ids = {random_uuid() for _ in range(2000)}
    assert len(ids) == 2000
    assert all(UUID_TEXT.fullmatch(text) for text in ids)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "MkU3OEVBNTcwNTJENDM2Q",
        "MkU3OEVBNTcwNTJENDM2Qg=",
        "MkU3OEVBNTcwNTJENDM2Q+",
        "MkU3OEVBNTcwNTJENDM2QgAA",
    ],
)
def test_invalid_cluster_ids(text: str) -> None:
    assert not is_valid_uuid(text)
    with pytest.raises(StorageError) as info:
        validate_cluster_id(text)
    assert str(info.value) == (
        f'The cluster id "{text}" is not valid: it must be 22 characters of URL-safe base64 '
        'encoding 16 bytes; generate one with "kraft-storage random-uuid".'
    )


# -- meta.properties -------------------------------------------------------------------------


def test_meta_properties_file_is_kafkas_v1(tmp_path: Path) -> None:
    write_meta_properties(
        str(tmp_path), MetaProperties(CLUSTER, 3, "3DOJ8GF4TLuIQcDdnvI4dQ"), now=0
    )
    assert (tmp_path / "meta.properties").read_text() == (
        "#\n"
        "#Thu Jan 01 00:00:00 UTC 1970\n"
        f"cluster.id={CLUSTER}\n"
        "directory.id=3DOJ8GF4TLuIQcDdnvI4dQ\n"
        "node.id=3\n"
        "version=1\n"
    )
    assert stat.S_IMODE((tmp_path / "meta.properties").stat().st_mode) == 0o644
    assert not (tmp_path / "meta.properties.tmp").exists()
    assert read_meta_properties(str(tmp_path)) == MetaProperties(
        CLUSTER, 3, "3DOJ8GF4TLuIQcDdnvI4dQ"
    )


def test_meta_properties_write_is_atomic_and_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = str(tmp_path)
    old = MetaProperties(CLUSTER, 1, "3DOJ8GF4TLuIQcDdnvI4dQ")
    write_meta_properties(directory, old)

    synced: list[bool] = []  # one entry per fsync: is it a directory?
    real_fsync = os.fsync
    monkeypatch.setattr(
        mp.os,
        "fsync",
        lambda fd: (synced.append(stat.S_ISDIR(os.fstat(fd).st_mode)), real_fsync(fd)),
    )
    write_meta_properties(directory, MetaProperties(OTHER_CLUSTER, 1, "3DOJ8GF4TLuIQcDdnvI4dQ"))
    assert synced == [False, True]  # the file before the rename, the directory after it

    # A crash between writing the temporary file and the rename leaves the old file intact.
    def crash(src: str, dst: str) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(mp.os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        write_meta_properties(directory, old)
    assert (tmp_path / "meta.properties.tmp").exists()
    assert read_meta_properties(directory) == MetaProperties(
        OTHER_CLUSTER, 1, "3DOJ8GF4TLuIQcDdnvI4dQ"
    )


def test_failed_write_removes_the_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken_fsync(fd: int) -> None:
        raise OSError("disk gone")

    monkeypatch.setattr(mp.os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="disk gone"):
        write_meta_properties(str(tmp_path), MetaProperties(CLUSTER, 1))
    assert sorted(os.listdir(tmp_path)) == []


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "broker.id=1\n",
            "{p} is formatted for a legacy ZooKeeper-mode cluster (version 0); this "
            "implementation runs only in KRaft mode: use a new, empty log directory.",
        ),
        (
            "version=2\ncluster.id=x\nnode.id=1\n",
            "{p} has unsupported version '2'; only version 1 is supported.",
        ),
        ("version=1\nnode.id=1\n", "Invalid {p}: cluster.id was not found."),
        (f"version=1\ncluster.id={CLUSTER}\n", "Invalid {p}: node.id was not found."),
        (
            f"version=1\ncluster.id={CLUSTER}\nnode.id=x\n",
            "Invalid {p}: node.id 'x' is not an integer >= 0.",
        ),
        (
            f"version=1\ncluster.id={CLUSTER}\nnode.id=1\ndirectory.id=AAAAAAAAAAAAAAAAAAAAAA\n",
            "Invalid {p}: directory.id 'AAAAAAAAAAAAAAAAAAAAAA' is not a valid Uuid; remove the "
            "line and a new one is generated at the next start.",
        ),
        (
            "version=\\u12\n",
            "Cannot parse {p}: line 1: malformed \\uXXXX escape \\u12 (need 4 hex digits).",
        ),
    ],
)
def test_invalid_meta_properties(tmp_path: Path, text: str, message: str) -> None:
    (tmp_path / "meta.properties").write_text(text)
    with pytest.raises(StorageError) as info:
        read_meta_properties(str(tmp_path))
    assert str(info.value) == message.format(p=tmp_path / "meta.properties")


def test_missing_meta_properties_is_none(tmp_path: Path) -> None:
    assert read_meta_properties(str(tmp_path)) is None
    assert read_meta_properties(str(tmp_path / "absent")) is None


# -- ensure_formatted ------------------------------------------------------------------------


def test_unformatted_directory(tmp_path: Path) -> None:
    path = write_config(tmp_path)
    with pytest.raises(StorageError) as info:
        ensure_formatted(cfg(path))
    assert str(info.value) == (
        f'Log directory {tmp_path / "data"} is not formatted: run "kraft-storage format -t '
        f'<cluster-id> -c {path}" first.'
    )


def test_partly_formatted_storage_suggests_ignore_formatted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, dirs="a")
    assert run(capsys, "format", "-t", CLUSTER, "-c", path)[0] == 0
    path = write_config(tmp_path, dirs="a,b")
    with pytest.raises(StorageError) as info:
        ensure_formatted(cfg(path))
    assert str(info.value) == (
        f'Log directory {tmp_path / "b"} is not formatted: run "kraft-storage format -t '
        f'{CLUSTER} -c {path} --ignore-formatted" first.'
    )


def test_ensure_formatted_returns_the_cluster_id_and_fills_in_directory_ids(
    tmp_path: Path,
) -> None:
    path = write_config(tmp_path, dirs="a,b")
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "meta.properties").write_text(
            f"version=1\ncluster.id={CLUSTER}\nnode.id=1\n"
        )
    assert ensure_formatted(cfg(path)) == CLUSTER
    ids = {directory_id(tmp_path / name) for name in ("a", "b")}
    assert None not in ids and len(ids) == 2


def test_cluster_id_mismatch_between_directories(tmp_path: Path) -> None:
    path = write_config(tmp_path, dirs="a,b")
    formatted(tmp_path / "a", MetaProperties(CLUSTER, 1, random_uuid()))
    formatted(tmp_path / "b", MetaProperties(OTHER_CLUSTER, 1, random_uuid()))
    with pytest.raises(StorageError) as info:
        ensure_formatted(cfg(path))
    assert str(info.value) == (
        f"Invalid cluster.id in {tmp_path / 'b' / 'meta.properties'}: expected {CLUSTER} (as in "
        f"{tmp_path / 'a'}), but read {OTHER_CLUSTER}. These directories were formatted for "
        "different clusters; remove the wrong one from log.dirs or replace it with an empty "
        "directory."
    )


def test_node_id_mismatch_with_the_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, node_id=1)
    assert run(capsys, "format", "-t", CLUSTER, "-c", path)[0] == 0
    other = write_config(tmp_path, node_id=2)
    with pytest.raises(StorageError) as info:
        ensure_formatted(cfg(other))
    assert str(info.value) == (
        f"Stored node.id 1 in {tmp_path / 'data' / 'meta.properties'} doesn't match the "
        f"configured node.id 2 in {other}. If you moved your data, make sure your configured "
        "node id matches; if you intend to create a new node, remove all data in its log "
        "directories."
    )


def test_duplicate_directory_ids(tmp_path: Path) -> None:
    path = write_config(tmp_path, dirs="a,b")
    for name in ("a", "b"):
        formatted(tmp_path / name, MetaProperties(CLUSTER, 1, "3DOJ8GF4TLuIQcDdnvI4dQ"))
    with pytest.raises(StorageError, match=r"have the same directory\.id 3DOJ8GF4TLuIQcDdnvI4dQ"):
        ensure_formatted(cfg(path))


# -- kraft-storage format / info -------------------------------------------------------------


def test_format_then_info_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path)
    data = tmp_path / "data"
    code, out, err = run(capsys, "format", "-t", CLUSTER, "-c", path)
    assert (code, err) == (0, "")
    assert out == f"Formatting metadata directory {data} with cluster.id {CLUSTER} and node.id 1.\n"
    meta = read_meta_properties(str(data))
    assert meta is not None and (meta.cluster_id, meta.node_id, meta.version) == (CLUSTER, 1, 1)
    assert meta.directory_id is not None and is_valid_uuid(meta.directory_id)
    assert ensure_formatted(cfg(path)) == CLUSTER

    code, out, err = run(capsys, "info", "-c", path)
    assert (code, err) == (0, "")
    assert out == (
        "Found log directory:\n"
        f"  {data} (metadata)\n"
        "\n"
        f"Found metadata in {data}: {{cluster.id={CLUSTER}, directory.id={meta.directory_id}, "
        "node.id=1, version=1}\n"
    )


def test_format_data_and_separate_metadata_directories(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, dirs="a,b", extra=f"metadata.log.dir={tmp_path / 'meta'}\n")
    code, out, _ = run(capsys, "format", "--cluster-id", CLUSTER, "--config", path)
    assert code == 0
    assert out.splitlines() == [
        f"Formatting data directory {tmp_path / 'a'} with cluster.id {CLUSTER} and node.id 1.",
        f"Formatting data directory {tmp_path / 'b'} with cluster.id {CLUSTER} and node.id 1.",
        f"Formatting metadata directory {tmp_path / 'meta'} with cluster.id {CLUSTER} and "
        "node.id 1.",
    ]
    ids = {directory_id(tmp_path / name) for name in ("a", "b", "meta")}
    assert len(ids) == 3


def test_second_format_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path)
    assert run(capsys, "format", "-t", CLUSTER, "-c", path)[0] == 0
    before = (tmp_path / "data" / "meta.properties").read_text()
    code, out, err = run(capsys, "format", "-t", CLUSTER, "-c", path)
    assert (code, out) == (1, "")
    assert err == (
        f"kraft-storage: error: Log directory {tmp_path / 'data'} is already formatted. Use "
        "--ignore-formatted to ignore this directory and format the others.\n"
    )
    assert (tmp_path / "data" / "meta.properties").read_text() == before


def test_ignore_formatted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, dirs="a")
    assert run(capsys, "format", "-t", CLUSTER, "-c", path)[0] == 0
    before = (tmp_path / "a" / "meta.properties").read_text()
    path = write_config(tmp_path, dirs="a,b")

    code, out, err = run(capsys, "format", "-t", CLUSTER, "-c", path, "--ignore-formatted")
    assert (code, err) == (0, "")
    assert (
        out
        == f"Formatting data directory {tmp_path / 'b'} with cluster.id {CLUSTER} and node.id 1.\n"
    )
    assert (tmp_path / "a" / "meta.properties").read_text() == before

    code, out, err = run(capsys, "format", "-t", CLUSTER, "-c", path, "-g")
    assert (code, out, err) == (0, "All of the log directories are already formatted.\n", "")
    assert ensure_formatted(cfg(path)) == CLUSTER


def test_ignore_formatted_still_refuses_another_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, dirs="a")
    assert run(capsys, "format", "-t", CLUSTER, "-c", path)[0] == 0
    path = write_config(tmp_path, dirs="a,b")
    code, out, err = run(capsys, "format", "-t", OTHER_CLUSTER, "-c", path, "--ignore-formatted")
    assert (code, out) == (1, "")
    assert err == (
        f"kraft-storage: error: Log directory {tmp_path / 'a'} is already formatted for "
        f"cluster.id {CLUSTER} ({tmp_path / 'a' / 'meta.properties'}), not {OTHER_CLUSTER}: pass "
        f"-t {CLUSTER}, or use an empty directory for the new cluster.\n"
    )
    assert not (tmp_path / "b").exists()  # nothing is written unless every directory can be


def test_info_reports_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, dirs="a,b,c")
    formatted(tmp_path / "a", MetaProperties(CLUSTER, 1, "3DOJ8GF4TLuIQcDdnvI4dQ"))
    formatted(tmp_path / "b", MetaProperties(OTHER_CLUSTER, 1, "q1Sh-9_ISia_zwGINzRvyQ"))
    code, out, err = run(capsys, "info", "-c", path)
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[:4] == [
        "Found log directories:",
        f"  {tmp_path / 'a'} (metadata)",
        f"  {tmp_path / 'b'}",
        f"  {tmp_path / 'c'} (does not exist)",
    ]
    assert f"Found metadata in {tmp_path / 'b'}: {{cluster.id={OTHER_CLUSTER}, " in out
    problems = lines[lines.index("Found problem(s):") + 1 :]
    assert len(problems) == 2
    assert problems[0].startswith(f"  Invalid cluster.id in {tmp_path / 'b' / 'meta.properties'}")
    assert problems[1] == (
        f'  Log directory {tmp_path / "c"} is not formatted: run "kraft-storage format -t '
        f'{CLUSTER} -c {path} --ignore-formatted" first.'
    )


def test_format_rejects_a_bad_cluster_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path)
    code, out, err = run(capsys, "format", "-t", "not-a-uuid", "-c", path)
    assert (code, out) == (1, "")
    assert err.startswith('kraft-storage: error: The cluster id "not-a-uuid" is not valid')
    assert not (tmp_path / "data").exists()


def test_config_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("process.roles=controller\n")
    code, out, err = run(capsys, "format", "-t", CLUSTER, "-c", path)
    assert (code, out) == (1, "")
    assert err == (
        f'kraft-storage: error: {path}: Missing required configuration "node.id" which has no '
        "default value.\n"
    )
    code, _, err = run(capsys, "info", "-c", tmp_path / "absent.properties")
    assert code == 1
    assert err == (
        f"kraft-storage: error: The configuration file {tmp_path / 'absent.properties'} does not "
        "exist.\n"
    )


def test_config_warnings_go_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, extra="num.io.threads=8\n")
    code, _, err = run(capsys, "format", "-t", CLUSTER, "-c", path)
    assert code == 0
    assert err == (
        "kraft-storage: warning: The Kafka configuration 'num.io.threads' has no effect in this "
        "implementation and is ignored.\n"
    )


def test_unusable_directory_is_a_one_line_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data").write_text("a file, not a directory")
    path = write_config(tmp_path)
    code, _, err = run(capsys, "format", "-t", CLUSTER, "-c", path)
    assert code == 1
    assert err == (
        f"kraft-storage: error: Cannot create log directory {tmp_path / 'data'}: File exists.\n"
    )


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert main(["format", "-c", "x.properties"]) == 2
    assert "the following arguments are required: -t/--cluster-id" in capsys.readouterr().err
    assert main(["--help"]) == 0


def test_runs_as_a_module() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "server.storage_cli", "random-uuid"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert UUID_TEXT.fullmatch(result.stdout.strip())
    assert result.stderr == ""
