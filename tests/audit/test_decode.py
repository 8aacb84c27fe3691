"""The file reader without Spark: both decode paths agree, bad frames become CORRUPT rows."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pyarrow as pa

from audit.decode import ReadOptions, read_file
from audit.layout import LayoutError, discover
from tests.audit.faults import assert_no_secret, scram_secrets, segments


def _table(node_dir: Path, options: ReadOptions) -> pa.Table:
    log = discover(os.fspath(node_dir))
    return pa.Table.from_batches([b for f in log.segments for b in read_file(f, options)])


def test_fast_path_matches_the_checked_decoder(synthetic) -> None:
    root, info = synthetic
    checked = _table(root / "node-1", ReadOptions(with_json=True))
    fast = _table(root / "node-1", ReadOptions(with_json=False))
    assert checked.num_rows == info.records and info.fences > 0
    assert checked.drop_columns(["record_json"]).equals(fast.drop_columns(["record_json"]))
    assert fast.column("record_json").null_count == fast.num_rows
    assert checked.column("error").null_count == checked.num_rows
    offsets = checked.column("offset").to_pylist()
    assert offsets == list(range(len(offsets)))
    # ACL records (api keys 18, 19) decode on both paths, into the acl_* columns.
    acls = [r for r in fast.select(["record_type", "acl_id", "acl_principal", "acl_operation",
                                    "acl_resource_name"]).to_pylist()
            if r["acl_id"] is not None]
    assert [r["record_type"] for r in acls] == ["ACCESS_CONTROL_ENTRY_RECORD"] * 4 + [
        "REMOVE_ACCESS_CONTROL_ENTRY_RECORD"]
    assert [r["acl_principal"] for r in acls] == [f"User:writer-{i}" for i in range(4)] + [None]
    assert acls[0]["acl_operation"] == 4 and acls[0]["acl_resource_name"] == "topic-0"
    assert acls[4]["acl_id"] == acls[0]["acl_id"]  # the first one removed
    # SCRAM credentials (11, 22): user, mechanism and iterations, never a salt or key.
    scram = [(r["record_type"], r["scram_user"], r["scram_mechanism"], r["scram_iterations"])
             for r in fast.select(["record_type", "scram_user", "scram_mechanism",
                                   "scram_iterations"]).to_pylist() if r["scram_user"]]
    assert scram == [("USER_SCRAM_CREDENTIAL_RECORD", "alice", 1, 4096),
                     ("USER_SCRAM_CREDENTIAL_RECORD", "alice", 2, 8192),
                     ("USER_SCRAM_CREDENTIAL_RECORD", "bob", 2, 4096),
                     ("REMOVE_USER_SCRAM_CREDENTIAL_RECORD", "alice", 1, None)]
    # Client quotas (14): the entity as parallel lists, a null name for the default entity.
    quotas = [r for r in fast.select(["record_type", "quota_entity_types", "quota_entity_names",
                                      "quota_key", "quota_value", "quota_remove"]).to_pylist()
              if r["record_type"] == "CLIENT_QUOTA_RECORD"]
    assert [(r["quota_entity_types"], r["quota_entity_names"], r["quota_key"],
             r["quota_value"], r["quota_remove"]) for r in quotas] == [
        (["user"], ["alice"], "producer_byte_rate", 1048576.0, False),
        (["user"], [None], "consumer_byte_rate", 2097152.0, False),
        (["user", "client-id"], ["alice", "app"], "request_percentage", 50.5, False),
        (["user"], ["alice"], "producer_byte_rate", 0.0, True)]
    # record_json is Kafka's dump-log JSON with the credential's salt and keys redacted, as
    # kraft-snapshot's dump shows them: the Parquet people write from it holds no secret.
    printed = [json.loads(r["record_json"])["data"] for r in checked.select(
        ["record_type", "record_json"]).to_pylist()
        if r["record_type"] == "USER_SCRAM_CREDENTIAL_RECORD"]
    assert len(printed) == 3 and all(
        d["salt"] == d["storedKey"] == d["serverKey"] == "[redacted]" for d in printed)
    assert printed[1] == {**printed[1], "name": "alice", "mechanism": 2, "iterations": 8192}
    assert_no_secret(checked, scram_secrets(root / "node-1"))


def test_offset_range_and_truncated_segment(synthetic, tmp_path: Path) -> None:
    root, _ = synthetic
    node = tmp_path / "node-1"
    shutil.copytree(root / "node-1", node)
    part = _table(node, ReadOptions(start_offset=100, end_offset=250, with_json=False))
    assert part.column("offset").to_pylist() == list(range(100, 250))
    base, path = segments(node)[1]
    size = os.path.getsize(path)
    os.truncate(path, size // 2)
    rows = _table(node, ReadOptions(with_json=False))
    bad = rows.filter(pa.compute.equal(rows.column("record_type"), "CORRUPT")).to_pylist()
    assert len(bad) == 1 and bad[0]["source_file"] == path
    assert bad[0]["offset"] > base and "torn tail" in bad[0]["error"]


def test_a_missing_directory_is_one_clear_error(tmp_path: Path) -> None:
    try:
        discover(os.fspath(tmp_path / "nope"))
    except LayoutError as exc:
        assert "does not exist" in str(exc)
    else:
        raise AssertionError("no error")
