"""kraft-snapshot over a log directory written by the real segmented log and snapshots written
from loader images: the tree commands, dump, verify, time travel against a MetadataLoader
stopped at every offset, diff, and damaged copies (flipped byte, truncated, zero-length, wrong
magic, foreign file) that must give one line with path and byte position and exit code 3 (or
1 from verify) — never a traceback."""

from __future__ import annotations

import io
import json
import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from test_image_records import apply_op

from kraft.log.base import OffsetAndEpoch
from kraft.log.codec import LEADER_CHANGE, encode_control_record
from kraft.log.segmented import SegmentedLog, list_segments
from kraft.log.snapshots import FileSnapshotStore
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.loader import MetadataLoader
from metadata.records import ConfigResourceType, Record, encode_record
from metadata.topics import METADATA_PARTITION_DIR
from snapshots import cli, tree
from snapshots.diff import as_loaded, diff_images
from snapshots.progress import Progress
from snapshots.source import SourceError, build_image, open_source
from snapshots.writer import write_image_snapshot

STEPS: list[tuple] = [
    ("feature", "metadata.version", 21), ("register", 1, None), ("register", 2, "r1"),
    ("register", 3, None), ("unfence", 1), ("unfence", 2), ("unfence", 3),
    ("create", "orders", 4, 3), ("config", (ConfigResourceType.TOPIC, "orders"),
                                 "retention.ms", "100"),
    # leader change here (epoch 2)
    ("create", "payments", 2, 2), ("shutdown", 2), ("fence", 2),
    ("config", (ConfigResourceType.BROKER, ""), "min.insync.replicas", "2"),
    ("create", "logs", 1, 1), ("delete", "logs"), ("reassign", "orders", 0, [3, 1]),
    ("unfence", 2),
]
EPOCH_CHANGE_AT = 9


def write_log(directory: Path) -> int:
    """The steps' records as the active controller appends them, one batch per operation,
    a LeaderChange batch at each epoch; small segments so the log has several. Returns the
    end offset."""
    log = SegmentedLog(directory, segment_bytes=400)
    image = EMPTY_IMAGE
    epoch = 1
    for index, step in enumerate(STEPS):
        if index in (0, EPOCH_CHANGE_AT):
            epoch = 1 if index == 0 else 2
            log.append_as_leader([encode_control_record(LEADER_CHANGE, {
                "leaderId": epoch, "voters": [1, 2, 3], "grantingVoters": [1, 2]})],
                epoch, 1000, control=True)
        batches: list[list[Record]] = []
        image = apply_op(image, step, batches)
        for records in filter(None, batches):
            log.append_as_leader([encode_record(r) for r in records], epoch,
                                 2000 + log.end_offset)
    log.flush()
    end = log.end_offset
    log.close()
    return end


def loader_image(directory: Path, offset: int) -> MetadataImage:
    """What a node that stopped at `offset` has applied (every record below it)."""
    log = SegmentedLog(directory)
    try:
        return MetadataLoader(off_loop_snapshots=False).catch_up(log, offset)
    finally:
        log.close()


def epoch_at(directory: Path, offset: int) -> int:
    log = SegmentedLog(directory)
    try:
        return next(iter(log.batches(offset, offset + 1))).epoch
    finally:
        log.close()


@pytest.fixture(scope="module")
def metadata_dir(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int, list[int]]:
    """A metadata.log.dir with __cluster_metadata-0 holding segments and two snapshots."""
    root = tmp_path_factory.mktemp("meta")
    directory = root / METADATA_PARTITION_DIR
    end = write_log(directory)
    store = FileSnapshotStore(directory)
    snapshot_offsets = [12, end - 5]
    for offset in snapshot_offsets:
        image = loader_image(directory, offset)
        write_image_snapshot(store, image, OffsetAndEpoch(offset, epoch_at(directory, offset - 1)),
                             image.provenance.timestamp_ms)
    assert len(list_segments(directory)) >= 5
    return root, end, snapshot_offsets


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def copy_dir(root: Path, tmp_path: Path) -> Path:
    target = tmp_path / "copy"
    shutil.copytree(root, target)
    for path in target.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return target / METADATA_PARTITION_DIR


# ---- the tree commands -------------------------------------------------------------------


def test_tree_commands_show_the_latest_image(metadata_dir, capsys) -> None:
    root, end, _ = metadata_dir
    code, out, _ = run(capsys, "ls", root)
    assert code == 0 and out.split() == ["acls", "clientQuotas", "cluster", "configs",
                                         "features", "provenance", "scram", "topics"]
    code, out, _ = run(capsys, "ls", root, "/topics")
    assert out.split() == ["orders", "payments"]
    code, out, _ = run(capsys, "ls", root, "/topics/orders")
    assert out.split() == ["0", "1", "2", "3", "id"]
    code, out, _ = run(capsys, "cat", root, "/cluster/brokers/2")
    assert out.startswith("BrokerRegistration(id=2,") and "rack=Optional[r1]" in out
    code, out, _ = run(capsys, "cat", root, "/topics/orders/0", "--json")
    partition = json.loads(out)
    # The reassignment to [3, 1] completed at once: broker 2 was out of the ISR.
    assert partition["replicas"] == [3, 1] and partition["removingReplicas"] == []
    assert partition["partitionEpoch"] == 2
    code, out, _ = run(capsys, "cat", root, "/configs/TOPIC:orders/retention.ms")
    assert out == "100\n"
    code, out, _ = run(capsys, "cat", root, "/configs/BROKER/min.insync.replicas")
    assert out == "2\n"
    code, out, _ = run(capsys, "cat", root, "/provenance")
    assert out.startswith(f"offset {end - 1}, epoch 2, time ")
    code, out, _ = run(capsys, "tree", root, "/features")
    assert out == "features:\n  metadata.version: 21\n"
    code, out, _ = run(capsys, "find", root, "/topics", "--name", "[0-9]")
    assert out.split() == [f"/topics/orders/{p}" for p in range(4)] + [
        "/topics/payments/0", "/topics/payments/1"]
    code, out, _ = run(capsys, "ls", root, "/topics/*/id")
    assert code == 0 and out.split() == ["/topics/orders/id", "/topics/payments/id"]


def test_tree_json_equals_the_loaders_image(metadata_dir, capsys) -> None:
    root, end, snapshots = metadata_dir
    code, out, _ = run(capsys, "tree", root, "--json")
    expected = as_loaded(loader_image(root / METADATA_PARTITION_DIR, end), snapshots[-1])
    assert code == 0 and json.loads(out) == tree.to_json(tree.image_tree(expected))


def test_missing_paths_and_directories(metadata_dir, capsys) -> None:
    root, _, _ = metadata_dir
    code, _, err = run(capsys, "cat", root, "/topics/nope")
    assert code == 1 and err == "kraft-snapshot: cat: /topics/nope: No such file or directory.\n"
    code, _, err = run(capsys, "cat", root, "/topics")
    assert code == 1 and "Is a directory" in err
    code, _, err = run(capsys, "ls", root / "nowhere")
    assert code == 3 and err.count("\n") == 1 and "no such file or directory" in err


# ---- time travel -------------------------------------------------------------------------


def test_time_travel_matches_a_loader_stopped_at_every_offset(metadata_dir) -> None:
    root, end, snapshots = metadata_dir
    directory = root / METADATA_PARTITION_DIR
    source = open_source(str(root))
    for offset in range(end + 1):
        built = build_image(source, offset, warn=pytest.fail)
        expected = loader_image(directory, offset)
        used = [s for s in snapshots if s <= offset]
        if not used:
            assert built.snapshot is None
            assert built.image == expected, offset
            continue
        assert built.snapshot is not None and built.snapshot.startswith(str(directory))
        start = used[-1]
        assert built.replayed_from == start
        # The image as that node has it (a snapshot sets broker registration offsets to its
        # own last offset, as in Kafka); the provenance is the snapshot's when nothing after
        # it was replayed.
        assert diff_images(as_loaded(expected, start), built.image) == [], offset
        assert built.image == replace(as_loaded(expected, start),
                                      provenance=built.image.provenance)
        assert built.image.provenance.offset == max(start - 1, expected.provenance.offset)


def test_at_offset_on_the_cli_and_its_limits(metadata_dir, capsys) -> None:
    root, end, snapshots = metadata_dir
    code, out, _ = run(capsys, "ls", root, "/topics", "--at-offset", "10")
    assert code == 0 and out.split() == ["orders"]
    code, out, _ = run(capsys, "cat", root, "/provenance", "--at-offset", "10", "--json")
    assert json.loads(out)["offset"] == loader_image(
        root / METADATA_PARTITION_DIR, 10).provenance.offset
    code, _, err = run(capsys, "ls", root, "--at-offset", str(end + 1))
    assert code == 3 and f"offset {end + 1} is past the end" in err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["ls", str(root), "--at-offset", "-1"])
    assert exit_info.value.code == 2
    snapshot = sorted((root / METADATA_PARTITION_DIR).glob("*.checkpoint"))[0]
    code, out, _ = run(capsys, "ls", snapshot, "/topics", "--at-offset", str(snapshots[0]))
    assert code == 0
    code, _, err = run(capsys, "ls", snapshot, "--at-offset", "3")
    assert code == 3 and "give its log directory" in err


def test_diff_lists_what_changed(metadata_dir, capsys) -> None:
    root, end, _ = metadata_dir
    directory = root / METADATA_PARTITION_DIR
    start = loader_image(directory, 20).provenance.offset + 1
    code, out, _ = run(capsys, "diff", root, "--from", start, "--to", end, "--json")
    changes = {c["path"]: c for c in json.loads(out)["changes"]}
    expected = diff_images(loader_image(directory, start), loader_image(directory, end))
    assert code == 0 and expected
    # Both sides continue from one snapshot: no registration-offset noise.
    assert list(changes) == [c.path for c in expected]
    assert not any(p.startswith("/cluster") for p in changes)
    assert changes["/topics/orders/0"]["change"] == "changed"
    assert "replicas" in changes["/topics/orders/0"]["fields"]
    code, out, _ = run(capsys, "diff", root, "--from", start, "--to", end)
    assert out.startswith(f"--- below offset {start}")
    assert "~ /topics/orders/0 " in out
    code, out, _ = run(capsys, "diff", root, "--from", end, "--to", end)
    assert out.endswith("no changes\n")


# ---- dump and verify ----------------------------------------------------------------------


def test_dump_decodes_every_batch_and_record(metadata_dir, capsys) -> None:
    root, end, snapshots = metadata_dir
    directory = root / METADATA_PARTITION_DIR
    code, out, _ = run(capsys, "dump", root, "--json")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    files = [line for line in lines if "kind" in line]
    assert [f["kind"] for f in files] == ["snapshot"] * 2 + ["segment"] * len(
        list_segments(directory))
    batches = [line for line in lines if "baseOffset" in line and
               line["file"].endswith(".log")]
    offsets = [r["offset"] for b in batches for r in b["records"]]
    assert offsets == list(range(end))
    leader_changes = [r for b in batches if b["isControl"] for r in b["records"]]
    assert [r["controlType"] for r in leader_changes] == ["LeaderChange"] * 2
    snapshot_batches = [line for line in lines if "baseOffset" in line
                        and line["file"].endswith(".checkpoint")]
    assert snapshot_batches[0]["records"][0]["controlType"] == "SnapshotHeader"
    assert snapshot_batches[0]["records"][0]["body"]["version"] == 0
    code, out, _ = run(capsys, "dump", sorted(directory.glob("*.checkpoint"))[0])
    assert out.splitlines()[1] == f"Snapshot end offset: {snapshots[0]}, epoch: 1"
    assert "| offset: 0 " in out and " SnapshotHeader {" in out and " SnapshotFooter {" in out
    assert 'payload: {"type":"REGISTER_BROKER_RECORD"' in out


def test_verify_a_healthy_directory(metadata_dir, capsys) -> None:
    root, _, _ = metadata_dir
    code, out, _ = run(capsys, "verify", root)
    assert code == 0 and out.endswith("OK: every file intact\n")
    code, out, _ = run(capsys, "verify", root, "--json")
    report = json.loads(out)
    assert report["ok"] and all(f["ok"] for f in report["files"])


# ---- damage --------------------------------------------------------------------------------


def _damaged(metadata_dir, tmp_path: Path, kind: str, what: str) -> tuple[Path, Path, int]:
    """A copy of the directory with one file damaged; returns (dir, file, batch position)."""
    root, _, _ = metadata_dir
    directory = copy_dir(root, tmp_path)
    if kind == "snapshot":
        path = sorted(directory.glob("*.checkpoint"))[0]
    else:
        path = list_segments(directory)[0][1]
        path = Path(path)
    data = bytearray(path.read_bytes())
    second = int.from_bytes(data[0:4], "big") + 8  # where the second batch starts
    if what == "flip":
        data[second + 50] ^= 0x01
        position = second
    elif what == "truncate":
        data = data[: second + 20]
        position = second
    elif what == "zero":
        data = bytearray()
        position = 0
    elif what == "magic":
        data[second + 8] = 7
        position = second
    else:  # a foreign file
        data = bytearray(b"# not a log\n" * 20)
        position = 0
    path.write_bytes(bytes(data))
    return directory, path, position


@pytest.mark.parametrize("what", ["flip", "truncate", "zero", "magic", "foreign"])
def test_a_damaged_snapshot(metadata_dir, tmp_path, capsys, what) -> None:
    directory, path, position = _damaged(metadata_dir, tmp_path, "snapshot", what)
    code, _, err = run(capsys, "ls", path)
    assert code == 3 and err.count("\n") == 1, err
    assert err.startswith(f"kraft-snapshot: {path}: byte {position}: "), err
    code, out, _ = run(capsys, "verify", path)
    assert code == 1 and f"PROBLEM {path}: byte {position}: " in out
    code, out, _ = run(capsys, "verify", directory, "--json")
    problems = json.loads(out)["problems"]
    assert code == 1 and problems[0]["file"] == str(path)
    assert problems[0]["position"] == position
    code, _, err = run(capsys, "dump", path)
    assert code == 3 and f"{path}: byte {position}: " in err
    reason = {"flip": "CRC32C mismatch", "truncate": "shorter than a batch header",
              "zero": "empty",
              "magic": "unknown magic", "foreign": "past the end"}[what]
    assert reason in err or reason in out


@pytest.mark.parametrize("what", ["flip", "magic"])
def test_damage_inside_the_log(metadata_dir, tmp_path, capsys, what) -> None:
    directory, path, position = _damaged(metadata_dir, tmp_path, "segment", what)
    # No snapshot may hide the damage: time travel to an offset before the first snapshot.
    code, _, err = run(capsys, "tree", directory, "--at-offset", "5")
    assert code == 3 and err == (
        f"kraft-snapshot: {path}: byte {position}: "
        f"{'CRC32C mismatch' if what == 'flip' else 'unknown magic'}" + err.split(
            "CRC32C mismatch" if what == "flip" else "unknown magic")[1])
    code, out, _ = run(capsys, "verify", directory)
    assert code == 1 and f"PROBLEM {path}: byte {position}: " in out
    # verify goes on past a damaged batch whose length is intact: the rest is checked.
    code, out, _ = run(capsys, "verify", directory, "--json")
    damaged = next(f for f in json.loads(out)["files"] if f["file"] == str(path))
    assert damaged["batches"] > 1 and len(damaged["problems"]) == 1


def test_a_torn_tail_is_what_the_server_would_cut(metadata_dir, tmp_path, capsys) -> None:
    root, end, _ = metadata_dir
    directory = copy_dir(root, tmp_path)
    last = Path(list_segments(directory)[-1][1])
    size = last.stat().st_size
    with last.open("ab") as file:
        file.write(b"\x00\x00\x01\x00partial")
    code, out, err = run(capsys, "cat", directory, "/provenance", "--json")
    assert code == 0 and json.loads(out)["offset"] == end - 1
    assert f"{last}: byte {size}: " in err and "torn tail" in err
    code, out, _ = run(capsys, "verify", directory)
    assert code == 1 and f"PROBLEM {last}: byte {size}: " in out and "torn tail" in out


def test_gaps_and_a_cleaned_log(metadata_dir, tmp_path, capsys) -> None:
    root, end, snapshots = metadata_dir
    directory = copy_dir(root, tmp_path)
    segments = list_segments(directory)
    # Cleaning: the first segment goes; the snapshot at offset 12 must still cover the start.
    os.unlink(segments[0][1])
    start = segments[1][0]
    code, out, _ = run(capsys, "verify", directory)
    covered = any(start <= s <= end for s in snapshots)
    assert code == (0 if covered else 1), out
    code, _, err = run(capsys, "ls", directory, "--at-offset", str(start - 1))
    assert code == 3 and f"the log holds offsets {start} to {end - 1}" in err
    # A gap in the middle of the log is damage, named at the segment after it.
    os.unlink(segments[2][1])
    code, out, _ = run(capsys, "verify", directory)
    assert code == 1 and f"PROBLEM {segments[3][1]}: byte 0: segment starts at offset" in out
    code, _, err = run(capsys, "ls", directory)
    assert code == 3 and f"{segments[3][1]}: byte 0: segment starts at offset" in err


def test_one_segment_alone(metadata_dir, capsys) -> None:
    root, _, _ = metadata_dir
    segments = list_segments(root / METADATA_PARTITION_DIR)
    later = segments[1][1]
    code, out, _ = run(capsys, "verify", later)
    assert code == 0, out  # no claim about the log start from one file
    code, _, err = run(capsys, "ls", later)
    assert code == 3 and f"the log holds offsets {segments[1][0]} to" in err
    code, out, _ = run(capsys, "ls", segments[0][1], "/features")
    assert code == 0 and out == "metadata.version\n"


def test_a_directory_without_metadata(tmp_path, capsys) -> None:
    code, _, err = run(capsys, "verify", tmp_path)
    assert code == 3 and "no log segments" in err
    with pytest.raises(SourceError):
        open_source(str(tmp_path / "missing"))


# ---- progress ------------------------------------------------------------------------------


def test_progress_only_on_a_terminal_and_only_for_long_loads(monkeypatch) -> None:
    clock = [100.0]
    monkeypatch.setattr("snapshots.progress.time.monotonic", lambda: clock[0])
    quiet = io.StringIO()  # not a terminal
    progress = Progress("loading", 10, stream=quiet)
    clock[0] += 5
    progress.update(5)
    assert quiet.getvalue() == ""
    shown = io.StringIO()
    progress = Progress("loading", 10, stream=shown, enabled=True)
    progress.update(5)  # at once: a short load prints nothing
    assert shown.getvalue() == ""
    clock[0] += 1
    progress.update(5)
    assert "loading [###############" in shown.getvalue() and "50.0%" in shown.getvalue()
    progress.close()
    assert shown.getvalue().endswith("\r")
