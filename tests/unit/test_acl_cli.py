"""`kraft-admin acls` (server/acl_commands.py) and the Admin service's ACL RPCs against a real
one-voter controller: kafka-acls.sh's options and output, the JSON that `--list --json` prints
and `--add --from-file` reads back, the old ACL file's import, SECURITY_DISABLED without an
authorizer, and a standby's forwarding."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from metadata.acl_ops import binding_from_pb, binding_pb, filter_pb
from metadata.admin_ops import AdminOperations
from metadata.authorizer.control import delete_acls
from metadata.authorizer.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.controller import NotControllerError
from metadata.errors import ControllerResult
from metadata.image import MetadataImage
from metadata.rpc import admin_pb2 as pb
from server import admin_cli
from tests.unit.test_admin_service import CLUSTER_ID, AdminHarness

R, P, Op, A = ResourceType, PatternType, AclOperation, AclPermissionType


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AdminHarness]:
    h = AdminHarness(tmp_path_factory.mktemp("acl-cli"), brokers=())
    h.servicer.ops.acls_enabled = True
    yield h
    h.close()


@pytest.fixture
def admin(harness: AdminHarness) -> Iterator[AdminHarness]:
    yield harness
    harness.servicer.ops.acls_enabled = True
    harness.write(lambda image: delete_acls(image, [AclBindingFilter()]))


def cli(admin: AdminHarness, capsys: pytest.CaptureFixture[str], *args: str
        ) -> tuple[int, str, str]:
    code = admin_cli.main(["--bootstrap-server", admin.endpoint, "acls", *args])
    out, err = capsys.readouterr()
    return code, out, err


def ok(admin: AdminHarness, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, out, err = cli(admin, capsys, *args)
    assert (code, err) == (0, ""), err
    return out


def fails(admin: AdminHarness, capsys: pytest.CaptureFixture[str], *args: str) -> str:
    code, _, err = cli(admin, capsys, *args)
    assert code == 1
    assert err.count("\n") == 1, err
    return err.removeprefix("kraft-admin: ").rstrip("\n")


def bindings(admin: AdminHarness) -> set[AclBinding]:
    return set(admin.image.acls.values())


def acl(name: str, principal: str = "User:alice", operation: AclOperation = Op.READ,
        resource: ResourceType = R.TOPIC, pattern: PatternType = P.LITERAL,
        permission: AclPermissionType = A.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


# ---- --add and --list ----

def test_add_prints_what_it_adds_and_the_resource_acls(admin: AdminHarness,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    out = ok(admin, capsys, "--add", "--allow-principal", "User:alice", "--operation", "Read",
             "--operation", "Write", "--topic", "orders")
    assert out == (
        "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`: \n"
        " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n"
        "\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, "
        "patternType=LITERAL)`:\n"
        "\t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)\n"
        "\t(principal=User:alice, host=*, operation=WRITE, permissionType=ALLOW)\n\n")
    assert bindings(admin) == {acl("orders"), acl("orders", operation=Op.WRITE)}
    again = ok(admin, capsys, "--add", "--allow-principal", "User:alice", "--operation",
               "read", "--topic", "orders")
    assert again.startswith(
        "Acl (pattern=ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL), "
        "entry=(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)) already "
        "exists.\n")


def test_add_makes_every_combination(admin: AdminHarness,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    ok(admin, capsys, "--add", "--allow-principal", "User:a", "--allow-principal", "User:b",
       "--allow-host", "10.0.0.1", "--deny-principal", "User:c", "--operation",
       "IdempotentWrite", "--cluster", "--resource-pattern-type", "LITERAL")
    assert bindings(admin) == {
        acl("kafka-cluster", p, Op.IDEMPOTENT_WRITE, R.CLUSTER, host=h, permission=perm)
        for p, h, perm in (("User:a", "10.0.0.1", A.ALLOW), ("User:b", "10.0.0.1", A.ALLOW),
                           ("User:c", "*", A.DENY))}
    ok(admin, capsys, "--add", "--allow-principal", "User:*", "--group", "g-",
       "--transactional-id", "tx", "--resource-pattern-type", "prefixed")  # default: All
    assert {acl("g-", "User:*", Op.ALL, R.GROUP, P.PREFIXED),
            acl("tx", "User:*", Op.ALL, R.TRANSACTIONAL_ID, P.PREFIXED)} <= bindings(admin)


@pytest.mark.parametrize(("args", "error"), [
    (["--add", "--allow-principal", "User:a"],
     "You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
     "or --transactional-id <id> or --user-principal <user>"),
    (["--add", "--topic", "t"],
     "You must specify one of: --allow-principal, --deny-principal when trying to add ACLs."),
    (["--add", "--topic", "t", "--allow-principal", "User:a", "--resource-pattern-type",
      "match"], "A '--resource-pattern-type' value of 'MATCH' is not valid when adding acls."),
    (["--add", "--group", "g", "--allow-principal", "User:a", "--operation", "Write"],
     "ResourceType GROUP only supports operations ALL, READ, DELETE, DESCRIBE, "
     "DESCRIBE_CONFIGS, ALTER_CONFIGS"),
    (["--add", "--topic", "t", "--allow-principal", "alice"],
     "expected a string in format principalType:principalName but got alice"),
    (["--add", "--topic", "t", "--allow-principal", "User:a", "--operation", "Fly"],
     "unknown operation 'Fly'"),
    (["--add", "--topic", "t", "--allow-principal", "User:a", "--principal", "User:a"],
     "The --principal option is only available if --list is set"),
    (["--remove", "--allow-principal", "User:a", "--force"],
     "You must provide at least one resource: --topic <topic> or --cluster or --group <group> "
     "or --transactional-id <id> or --user-principal <user>"),
    (["--list", "--allow-principal", "User:a"],
     "--list takes resources and --principal; --allow-*, --deny-* and --operation go with "
     "--add and --remove"),
])
def test_bad_options_are_one_line_and_change_nothing(admin: AdminHarness,
                                                     capsys: pytest.CaptureFixture[str],
                                                     args: list[str], error: str) -> None:
    assert fails(admin, capsys, *args) == error
    assert bindings(admin) == set()


def test_exactly_one_action(admin: AdminHarness, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        admin_cli.main(["--bootstrap-server", admin.endpoint, "acls", "--add", "--list"])
    with pytest.raises(SystemExit):
        admin_cli.main(["--bootstrap-server", admin.endpoint, "acls", "--topic", "t"])
    capsys.readouterr()


def test_list_filters_by_resource_pattern_type_and_principal(
        admin: AdminHarness, capsys: pytest.CaptureFixture[str]) -> None:
    ok(admin, capsys, "--add", "--allow-principal", "User:alice", "--topic", "t",
       "--topic", "*")
    ok(admin, capsys, "--add", "--allow-principal", "User:bob", "--topic", "t",
       "--resource-pattern-type", "prefixed", "--operation", "Write")
    literal = ok(admin, capsys, "--list", "--topic", "t")
    assert literal == (
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, "
        "patternType=LITERAL)`:\n"
        "\t(principal=User:alice, host=*, operation=ALL, permissionType=ALLOW)\n\n")
    match = ok(admin, capsys, "--list", "--topic", "tx", "--resource-pattern-type", "match")
    assert "name=*, patternType=LITERAL" in match and "name=t, patternType=PREFIXED" in match
    assert "name=t, patternType=LITERAL" not in match
    assert ok(admin, capsys, "--list", "--principal", "User:bob") == (
        "ACLs for principal `User:bob`\n"
        "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t, "
        "patternType=PREFIXED)`:\n"
        "\t(principal=User:bob, host=*, operation=WRITE, permissionType=ALLOW)\n\n")
    listed = json.loads(ok(admin, capsys, "--list", "--json", "--topic", "t",
                           "--resource-pattern-type", "any"))
    assert sorted(listed["acls"], key=lambda a: a["principal"]) == [
        {"resourceType": "TOPIC", "resourceName": "t", "patternType": "LITERAL",
         "principal": "User:alice", "host": "*", "operation": "ALL", "permissionType": "ALLOW"},
        {"resourceType": "TOPIC", "resourceName": "t", "patternType": "PREFIXED",
         "principal": "User:bob", "host": "*", "operation": "WRITE",
         "permissionType": "ALLOW"}]


# ---- --remove ----

def test_remove_named_entries_or_everything_of_a_resource(
        admin: AdminHarness, capsys: pytest.CaptureFixture[str]) -> None:
    ok(admin, capsys, "--add", "--allow-principal", "User:alice", "--allow-principal",
       "User:bob", "--operation", "Read", "--operation", "Describe", "--topic", "t", "--group",
       "g")
    assert len(bindings(admin)) == 8
    out = ok(admin, capsys, "--remove", "--force", "--allow-principal", "User:bob",
             "--operation", "Describe", "--topic", "t")
    assert "User:bob, host=*, operation=DESCRIBE" not in out
    assert "User:bob, host=*, operation=READ" in out  # the rest of topic t is listed
    assert acl("t", "User:bob", Op.DESCRIBE) not in bindings(admin)
    assert acl("g", "User:bob", Op.DESCRIBE, R.GROUP) in bindings(admin)
    removed = json.loads(ok(admin, capsys, "--remove", "--force", "--json", "--topic", "t"))
    assert {(r["principal"], r["operation"]) for r in removed["removed"]} == {
        ("User:alice", "READ"), ("User:alice", "DESCRIBE"), ("User:bob", "READ")}
    assert {b.resource_type for b in bindings(admin)} == {R.GROUP}
    ok(admin, capsys, "--remove", "--force", "--group", "x", "--resource-pattern-type", "match")
    assert {b.resource_type for b in bindings(admin)} == {R.GROUP}  # "g" does not apply to x
    ok(admin, capsys, "--remove", "--force", "--group", "g", "--resource-pattern-type", "any")
    assert bindings(admin) == set()


def test_remove_asks_first_without_force(admin: AdminHarness,
                                         capsys: pytest.CaptureFixture[str],
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    ok(admin, capsys, "--add", "--allow-principal", "User:alice", "--topic", "t")
    monkeypatch.setattr("builtins.input", lambda: "n")
    out = ok(admin, capsys, "--remove", "--topic", "t")
    assert out.startswith("Are you sure you want to delete all ACLs for resource filter "
                          "`ResourcePatternFilter(resourceType=TOPIC, name=t, "
                          "patternType=LITERAL)`? (y/n)\n")
    assert bindings(admin) == {acl("t", operation=Op.ALL)}
    monkeypatch.setattr("builtins.input", lambda: "y")
    ok(admin, capsys, "--remove", "--topic", "t")
    assert bindings(admin) == set()


# ---- files ----

def test_list_json_is_read_back_by_add_from_file(admin: AdminHarness,
                                                 capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    ok(admin, capsys, "--add", "--allow-principal", "User:alice", "--deny-principal",
       "User:eve", "--deny-host", "10.0.0.9", "--operation", "Describe", "--topic", "logs-",
       "--resource-pattern-type", "prefixed", "--cluster")
    ok(admin, capsys, "--add", "--allow-principal", "User:ops", "--operation", "CreateTokens",
       "--user-principal", "User:svc")
    before = bindings(admin)
    assert len(before) == 5
    path = tmp_path / "acls.json"
    path.write_text(ok(admin, capsys, "--list", "--json"))
    ok(admin, capsys, "--remove", "--force", "--topic", "logs-", "--cluster",
       "--resource-pattern-type", "any")
    assert len(bindings(admin)) == 1
    added = json.loads(ok(admin, capsys, "--add", "--from-file", str(path), "--json"))
    assert bindings(admin) == before
    assert (len(added["added"]), len(added["existing"])) == (4, 1)


def test_the_old_acl_file_becomes_cluster_allows(admin: AdminHarness,
                                                 capsys: pytest.CaptureFixture[str],
                                                 tmp_path: Path) -> None:
    path = tmp_path / "acl.json"
    path.write_text(json.dumps({"acls": [
        {"principal": "User:CN=ops", "operations": ["Create", "AlterConfigs"]},
        {"principal": "User:CN=all", "operations": ["All"]},
        {"principal": "User:CN=ops", "operations": ["DescribeConfigs", "ClusterAction"]}]}))
    ok(admin, capsys, "--add", "--from-file", str(path))
    assert bindings(admin) == {
        acl("kafka-cluster", p, op, R.CLUSTER) for p, op in (
            ("User:CN=ops", Op.CREATE), ("User:CN=ops", Op.ALTER_CONFIGS),
            ("User:CN=all", Op.ALL), ("User:CN=ops", Op.DESCRIBE_CONFIGS),
            ("User:CN=ops", Op.CLUSTER_ACTION))}


@pytest.mark.parametrize(("content", "error"), [
    ("[]", 'expected {"acls": [...]}'),
    ('{"acls": [{"principal": "User:a", "operations": ["Read"]}]}',
     "entry 0: unknown operation 'Read'; use one of Create, Delete, Alter, AlterConfigs, "
     "Describe, DescribeConfigs, ClusterAction, All"),
    ('{"acls": [{"principal": "a", "operations": ["All"]}]}',
     "entry 0: expected a string in format principalType:principalName but got a"),
    ('{"acls": [{"principal": "User:a", "resourceType": "TOPIC", "resourceName": "t"}]}',
     "entry 0: missing or bad 'operation'"),
    ('{"acls": [{"principal": "User:a", "resourceType": "TOPIC", "resourceName": "t", '
     '"operation": "READ", "permissionType": "MAYBE"}]}',
     "entry 0: unknown permissionType 'MAYBE'"),
])
def test_a_bad_file_is_refused_whole(admin: AdminHarness, capsys: pytest.CaptureFixture[str],
                                     tmp_path: Path, content: str, error: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert fails(admin, capsys, "--add", "--from-file", str(path)) == \
        f"ACL file {path}: {error}"
    assert bindings(admin) == set()


# ---- the service ----

def test_without_an_authorizer_acls_are_security_disabled(
        admin: AdminHarness, capsys: pytest.CaptureFixture[str]) -> None:
    admin.servicer.ops.acls_enabled = False
    assert fails(admin, capsys, "--list") == \
        "SECURITY_DISABLED: No Authorizer is configured on the broker"
    response = admin.stub.CreateAcls(pb.CreateAclsRequest(creations=[
        binding_pb(acl("t"))]))
    assert (response.status.error_code, response.status.error_message) == (
        54, "No Authorizer is configured.")
    assert bindings(admin) == set()


def test_an_unset_describe_filter_code_is_invalid(admin: AdminHarness) -> None:
    response = admin.stub.DescribeAcls(pb.DescribeAclsRequest(filter=pb.AclBindingFilter(
        resource_type=R.TOPIC, pattern_type=P.ANY, operation=Op.ANY)))
    assert response.status.error_code == 42  # permission_type left 0


class Standby:
    """A controller view that is not active: writes go to controller 1."""

    def __init__(self, image: Callable[[], MetadataImage]) -> None:
        self._image = image

    is_active = False
    leader_id = 1
    node_id = 2

    @property
    def committed_image(self) -> MetadataImage:
        return self._image()

    async def write(self, rule: Callable[[MetadataImage], ControllerResult[Any]]) -> Any:
        raise NotControllerError(1, "not active")


def test_a_standby_forwards_writes_and_the_active_controller_decides(
        admin: AdminHarness) -> None:
    standby = AdminOperations(Standby(lambda: admin.image), CLUSTER_ID, {1: admin.endpoint})
    assert not standby.acls_enabled  # its own flag does not matter for a forwarded write
    try:
        created = admin.run(standby.call("CreateAcls", pb.CreateAclsRequest(creations=[
            binding_pb(acl("t")), binding_pb(acl(""))])))
        assert created.status.error_code == 0
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (0, ""), (42, "Resource name should not be empty")]
        assert bindings(admin) == {acl("t")}
        deleted = admin.run(standby.call("DeleteAcls", pb.DeleteAclsRequest(filters=[
            filter_pb(AclBindingFilter())])))
        assert [binding_from_pb(b) for b in deleted.results[0].deleted] == [
            acl("t")]
        assert bindings(admin) == set()
    finally:
        admin.run(standby.close())
