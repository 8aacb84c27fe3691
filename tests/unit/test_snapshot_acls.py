"""kraft-snapshot and ACLs: a log whose bindings change over time (created, removed, DENY over
ALLOW, prefixes, `*`, host-bound), with a snapshot in the middle. The `acls` listing, the
tree, diff and dump show them; `--check` / `--who-can` at every offset agree with a
StandardAuthorizer loaded from a MetadataLoader stopped there, and name the deciding binding."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kraft.log.base import OffsetAndEpoch
from kraft.log.codec import LEADER_CHANGE, encode_control_record
from kraft.log.segmented import SegmentedLog
from kraft.log.snapshots import FileSnapshotStore
from metadata.authorizer.model import AclOperation as Op
from metadata.authorizer.model import AclPermissionType, PatternType, ResourceType
from metadata.authorizer.standard import StandardAuthorizer
from metadata.image import MetadataImage
from metadata.loader import MetadataLoader
from metadata.records import (
    AccessControlEntryRecord,
    FeatureLevelRecord,
    Record,
    RemoveAccessControlEntryRecord,
    encode_record,
)
from metadata.topics import METADATA_PARTITION_DIR
from snapshots import cli
from snapshots.writer import write_image_snapshot

A1, A2, A3, A4, A5, A6 = (f"AAAAAAAAAAAAAAAAAAAA{c}A" for c in "BCDEFG")
T, LIT, PRE = ResourceType.TOPIC, PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY


def acl(acl_id: str, name: str, pattern: PatternType, principal: str, operation: Op,
        permission: AclPermissionType = ALLOW, host: str = "*") -> AccessControlEntryRecord:
    return AccessControlEntryRecord(acl_id, T, name, pattern, principal, host, operation,
                                    permission)


# One batch per entry; the comments give each batch's offsets.
BATCHES: list[list[Record]] = [
    [FeatureLevelRecord("metadata.version", 21)],                          # 1
    [acl(A1, "orders", LIT, "User:alice", Op.WRITE)],                      # 2
    [acl(A2, "ord", PRE, "User:bob", Op.READ),
     acl(A3, "*", LIT, "User:*", Op.DESCRIBE)],                            # 3-4
    [acl(A4, "orders", LIT, "User:bob", Op.WRITE, DENY),
     acl(A5, "ord", PRE, "User:bob", Op.ALL)],                             # 5-6
    [RemoveAccessControlEntryRecord(A1)],                                  # 7
    [acl(A6, "orders", LIT, "User:carol", Op.WRITE, host="10.0.0.5")],     # 8
]
END = 9
SNAPSHOT_AT = 5


@pytest.fixture(scope="module")
def meta(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("acl-meta")
    directory = root / METADATA_PARTITION_DIR
    log = SegmentedLog(directory)
    log.append_as_leader([encode_control_record(LEADER_CHANGE, {
        "leaderId": 1, "voters": [1], "grantingVoters": [1]})], 1, 1000, control=True)
    for records in BATCHES:
        log.append_as_leader([encode_record(r) for r in records], 1, 2000 + log.end_offset)
    log.flush()
    assert log.end_offset == END
    log.close()
    image = loader_image(directory, SNAPSHOT_AT)
    write_image_snapshot(FileSnapshotStore(directory), image, OffsetAndEpoch(SNAPSHOT_AT, 1),
                         image.provenance.timestamp_ms)
    return root


def loader_image(directory: Path, offset: int) -> MetadataImage:
    log = SegmentedLog(directory)
    try:
        return MetadataLoader(off_loop_snapshots=False).catch_up(log, offset)
    finally:
        log.close()


def run(capsys: pytest.CaptureFixture[str], *args: object) -> tuple[int, str, str]:
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def partition_dir(meta: Path) -> Path:
    return meta / METADATA_PARTITION_DIR


# ---- listing -------------------------------------------------------------------------------


def test_the_listing_is_kafka_acls_and_json_is_the_image(meta, capsys) -> None:
    code, out, _ = run(capsys, "acls", meta)
    assert code == 0
    assert out.splitlines() == [
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=*, "
        "patternType=LITERAL)`:",
        "\t(principal=User:*, host=*, operation=DESCRIBE, permissionType=ALLOW)",
        "",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=ord, "
        "patternType=PREFIXED)`:",
        "\t(principal=User:bob, host=*, operation=ALL, permissionType=ALLOW)",
        "\t(principal=User:bob, host=*, operation=READ, permissionType=ALLOW)",
        "",
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`:",
        "\t(principal=User:bob, host=*, operation=WRITE, permissionType=DENY)",
        "\t(principal=User:carol, host=10.0.0.5, operation=WRITE, permissionType=ALLOW)",
    ]
    for offset in range(END + 1):
        code, out, _ = run(capsys, "acls", meta, "--at-offset", offset, "--json")
        shown = json.loads(out)
        image = loader_image(partition_dir(meta), offset)
        assert shown["offset"] == offset
        assert {a["id"]: a for a in shown["acls"]} == {i: {
            "id": i, "resourceType": b.resource_type.name, "resourceName": b.resource_name,
            "patternType": b.pattern_type.name, "principal": b.principal, "host": b.host,
            "operation": b.operation.name, "permissionType": b.permission_type.name}
            for i, b in image.acls.items()}, offset


def test_listing_filters_as_kafka_acls(meta, capsys) -> None:
    def ids(*args: object) -> list[str]:
        code, out, _ = run(capsys, "acls", meta, "--json", *args)
        assert code == 0
        return sorted(a["id"] for a in json.loads(out)["acls"])

    assert ids("--topic", "orders") == [A4, A6]  # LITERAL by default, as kafka-acls.sh
    assert ids("--topic", "orders", "--resource-pattern-type", "match") == [A2, A3, A4, A5, A6]
    assert ids("--topic", "ord", "--resource-pattern-type", "PREFIXED") == [A2, A5]
    assert ids("--topic", "ord", "--resource-pattern-type", "any") == [A2, A5]
    assert ids("--principal", "User:bob") == [A2, A4, A5]
    assert ids("--principal", "User:bob", "--operation", "Write") == [A4]
    assert ids("--host", "10.0.0.5") == [A6]
    assert ids("--group", "orders") == []
    assert ids("--at-offset", 3, "--topic", "orders") == [A1]


def test_a_lone_snapshot_shows_its_acls(meta, capsys) -> None:
    snapshot = partition_dir(meta) / f"{SNAPSHOT_AT:020d}-{1:010d}.checkpoint"
    code, out, _ = run(capsys, "acls", snapshot, "--json")
    assert code == 0 and sorted(a["id"] for a in json.loads(out)["acls"]) == [A1, A2, A3]
    code, out, _ = run(capsys, "dump", snapshot)
    assert code == 0
    assert '"type":"ACCESS_CONTROL_ENTRY_RECORD"' in out.replace(" ", "") and A2 in out


# ---- tree, diff, dump ----------------------------------------------------------------------


def test_tree_diff_and_dump_show_acls(meta, capsys) -> None:
    code, out, _ = run(capsys, "ls", meta, "/acls")
    assert code == 0 and sorted(out.split()) == sorted([A2, A3, A4, A5, A6])
    code, out, _ = run(capsys, "cat", meta, f"/acls/{A1}", "--at-offset", 3)
    assert out.strip() == ("StandardAcl(resourceType=TOPIC, resourceName=orders, "
                           "patternType=LITERAL, principal=User:alice, host=*, "
                           "operation=WRITE, permissionType=ALLOW)")
    code, _, err = run(capsys, "cat", meta, f"/acls/{A1}")
    assert code == 1 and "No such file" in err  # removed at offset 7
    code, out, _ = run(capsys, "diff", meta, "--from", 3, "--to", END)
    assert code == 0
    lines = out.splitlines()[2:]
    assert f"- /acls/{A1} {{resourceType=TOPIC, resourceName=orders, patternType=LITERAL, " \
        "principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW}" in lines
    assert sorted(line[:2] + line.split()[1] for line in lines) == sorted(
        [f"- /acls/{A1}"] + [f"+ /acls/{i}" for i in (A2, A3, A4, A5, A6)])
    code, out, _ = run(capsys, "dump", partition_dir(meta) / f"{0:020d}.log")
    assert code == 0
    assert out.count('"type":"ACCESS_CONTROL_ENTRY_RECORD"') == 6
    assert f'"type":"REMOVE_ACCESS_CONTROL_ENTRY_RECORD","version":0,"data":{{"id":"{A1}"}}' \
        in out


# ---- questions -----------------------------------------------------------------------------

PRINCIPALS = ("User:alice", "User:bob", "User:carol", "User:eve", "User:admin")
QUESTIONS = [(Op.WRITE, "orders"), (Op.READ, "orders"), (Op.DESCRIBE, "orders"),
             (Op.WRITE, "orders2"), (Op.DELETE, "ordinal"), (Op.DESCRIBE, "payments")]


@pytest.mark.parametrize("host", [None, "10.0.0.5"])
def test_answers_at_every_offset_are_the_authorizers(meta, capsys, host) -> None:
    """Every question at every offset, against StandardAuthorizer loaded with what a
    MetadataLoader stopped at that offset holds."""
    where = () if host is None else ("--host", host)
    for offset in range(1, END + 1):
        authorizer = StandardAuthorizer(["User:admin"])
        authorizer.load(loader_image(partition_dir(meta), offset).acls.values())
        for operation, topic in QUESTIONS:
            code, out, _ = run(capsys, "acls", meta, "--at-offset", offset, "--json",
                               "--who-can", operation.name, "--topic", topic,
                               "--super-users", "User:admin", *where)
            assert code == 0
            who = {a["principal"]: a["allowed"] for a in json.loads(out)["principals"]}
            for principal in PRINCIPALS:
                expected = authorizer.authorize(principal, host or "*", operation, T, topic,
                                                log_if_denied=False)
                code, out, _ = run(capsys, "acls", meta, "--at-offset", offset, "--json",
                                   "--check", "--principal", principal, "--operation",
                                   operation.name, "--topic", topic,
                                   "--super-users", "User:admin", *where)
                answer = json.loads(out)
                assert (code == 0, answer["allowed"]) == (expected, expected), \
                    (offset, principal, operation, topic)
                assert who.get(principal, expected) == expected


def test_the_deciding_binding_is_named(meta, capsys) -> None:
    def check(*args: object) -> tuple[int, dict]:
        code, out, _ = run(capsys, "acls", meta, "--json", "--check", *args)
        return code, json.loads(out)

    # Who could write orders at offset 3? alice, by A1; after its removal (offset 7), no one.
    code, answer = check("--at-offset", 3, "--principal", "User:alice", "--operation",
                         "WRITE", "--topic", "orders")
    assert code == 0 and [b["id"] for b in answer["bindings"]] == [A1]
    code, answer = check("--principal", "User:alice", "--operation", "WRITE", "--topic",
                         "orders")
    assert code == 1 and answer["bindings"] == []
    assert "none allows WRITE to User:alice" in answer["reason"]
    # DENY beats the prefixed ALL; the prefix alone allows another topic.
    code, answer = check("--principal", "User:bob", "--operation", "WRITE", "--topic",
                         "orders")
    assert code == 1 and [b["id"] for b in answer["bindings"]] == [A4]
    code, answer = check("--principal", "User:bob", "--operation", "WRITE", "--topic",
                         "orders2")
    assert code == 0 and [b["id"] for b in answer["bindings"]] == [A5]
    # DESCRIBE is implied by WRITE, and granted to User:* on every topic.
    code, answer = check("--at-offset", 3, "--principal", "User:alice", "--operation",
                         "DESCRIBE", "--topic", "orders")
    assert code == 0 and [b["id"] for b in answer["bindings"]] == [A1]
    code, answer = check("--principal", "User:eve", "--operation", "describe", "--topic",
                         "payments")
    assert code == 0 and [b["id"] for b in answer["bindings"]] == [A3]
    # A binding for one host applies from that host only.
    code, _ = check("--principal", "User:carol", "--operation", "WRITE", "--topic", "orders")
    assert code == 1
    code, answer = check("--principal", "User:carol", "--operation", "WRITE", "--topic",
                         "orders", "--host", "10.0.0.5")
    assert code == 0 and [b["id"] for b in answer["bindings"]] == [A6]
    # super.users, and allow.everyone.if.no.acl.found on a resource no ACL names.
    code, answer = check("--principal", "User:root", "--operation", "WRITE", "--topic",
                         "orders", "--super-users", "User:admin; User:root")
    assert code == 0 and answer["reason"] == "User:root is a super user"
    code, answer = check("--principal", "User:eve", "--operation", "READ", "--group", "g")
    assert code == 1 and "allow.everyone.if.no.acl.found is false" in answer["reason"]
    code, answer = check("--principal", "User:eve", "--operation", "READ", "--group", "g",
                         "--allow-everyone-if-no-acl-found")
    assert code == 0 and "allow.everyone.if.no.acl.found is true" in answer["reason"]


def test_who_can_in_text(meta, capsys) -> None:
    code, out, _ = run(capsys, "acls", meta, "--at-offset", 3, "--who-can", "WRITE",
                       "--topic", "orders", "--super-users", "User:admin")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("Who may WRITE on TOPIC:orders (below offset 3: offset 2, ")
    assert lines[1:] == [
        "ALLOWED User:admin: User:admin is a super user",
        "ALLOWED User:alice: allowed by",
        "    User:alice has ALLOW permission for operations: WRITE from hosts: * on "
        f"TOPIC:LITERAL:orders (id {A1})",
    ]
    code, out, _ = run(capsys, "acls", meta, "--who-can", "WRITE", "--topic", "orders")
    assert "ALLOWED" not in out and "DENIED  User:bob: denied by" in out
    code, out, _ = run(capsys, "acls", meta, "--who-can", "READ", "--group", "g",
                       "--allow-everyone-if-no-acl-found")
    assert out.splitlines()[1:] == [
        "ALLOWED User:*: no ACL names GROUP:g and allow.everyone.if.no.acl.found is true"]
    code, out, _ = run(capsys, "acls", meta, "--check", "--principal", "User:bob",
                       "--operation", "WRITE", "--topic", "orders")
    assert code == 1 and out.startswith("DENIED: User:bob WRITE on TOPIC:orders (everything "
                                        "on disk: offset 8, ")
    assert f"(id {A4})" in out


@pytest.mark.parametrize("args", [
    ("--check", "--topic", "orders"),  # no operation
    ("--check", "--operation", "WRITE"),  # no resource
    ("--who-can", "WRITE", "--topic", "t", "--principal", "User:a"),
    ("--check", "--principal", "alice", "--operation", "WRITE", "--topic", "t"),
    ("--check", "--operation", "WRITE", "--topic", "t", "--resource-pattern-type", "prefixed"),
    ("--resource-pattern-type", "prefixed",),  # a pattern type without a resource
    ("--operation", "SCRIBBLE"),
    ("--topic", "a", "--group", "b"),
])
def test_bad_usage_is_one_line_and_exit_2(meta, capsys, args) -> None:
    with pytest.raises(SystemExit) as exited:
        code, _, err = run(capsys, "acls", meta, *args)
        raise SystemExit(code)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
