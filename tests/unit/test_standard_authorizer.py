"""StandardAuthorizer: Kafka's decision rules (KIP-801), one test per rule."""

from __future__ import annotations

import pytest

from metadata.authorizer.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_error,
)
from metadata.authorizer.standard import StandardAuthorizer, java_host

ALICE = "User:alice"
BOB = "User:bob"
HOST = "10.0.0.1"
Op = AclOperation
TOPIC = ResourceType.TOPIC


def acl(principal: str = ALICE, operation: Op = Op.READ, name: str = "orders",
        pattern: PatternType = PatternType.LITERAL,
        permission: AclPermissionType = AclPermissionType.ALLOW, host: str = "*",
        resource_type: ResourceType = TOPIC) -> AclBinding:
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def authorizer(*bindings: AclBinding, everyone: bool = False,
               super_users: tuple[str, ...] = ()) -> StandardAuthorizer:
    result = StandardAuthorizer(super_users, allow_everyone_if_no_acl_found=everyone)
    result.load(bindings)
    return result


def allows(a: StandardAuthorizer, operation: Op, name: str = "orders",
           principal: str = ALICE, host: str = HOST) -> bool:
    return a.authorize(principal, host, operation, TOPIC, name)


def test_super_users_may_do_everything_even_before_the_first_load() -> None:
    a = StandardAuthorizer(["User:admin"])
    assert a.authorize("User:admin", HOST, Op.ALTER, ResourceType.CLUSTER, "kafka-cluster")
    assert not a.authorize(ALICE, HOST, Op.DESCRIBE, TOPIC, "orders")  # not loaded: refused
    a.load([])
    assert a.loaded


def test_no_acl_on_a_resource_follows_allow_everyone_if_no_acl_found() -> None:
    assert not allows(authorizer(), Op.READ)
    assert allows(authorizer(everyone=True), Op.READ)


def test_one_acl_for_someone_else_makes_the_resource_deny_by_default() -> None:
    a = authorizer(acl(principal=BOB), everyone=True)
    assert not allows(a, Op.READ)  # alice: the topic has ACLs, none for her
    assert allows(a, Op.READ, principal=BOB)
    assert allows(a, Op.READ, name="other")  # no ACL there: allow.everyone decides


def test_deny_beats_allow() -> None:
    a = authorizer(acl(operation=Op.ALL), acl(operation=Op.WRITE,
                                             permission=AclPermissionType.DENY))
    assert allows(a, Op.READ)
    assert not allows(a, Op.WRITE)


def test_deny_all_denies_every_operation_and_deny_implies_nothing() -> None:
    a = authorizer(acl(operation=Op.ALL), acl(operation=Op.READ,
                                             permission=AclPermissionType.DENY))
    assert allows(a, Op.DESCRIBE)  # DENY READ does not deny the DESCRIBE READ implies
    b = authorizer(acl(operation=Op.READ), acl(operation=Op.ALL,
                                              permission=AclPermissionType.DENY))
    assert not allows(b, Op.READ)


@pytest.mark.parametrize("granted", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER])
def test_read_write_delete_alter_imply_describe(granted: Op) -> None:
    assert allows(authorizer(acl(operation=granted)), Op.DESCRIBE)


def test_alter_configs_implies_describe_configs_and_nothing_else_implies() -> None:
    assert allows(authorizer(acl(operation=Op.ALTER_CONFIGS)), Op.DESCRIBE_CONFIGS)
    assert not allows(authorizer(acl(operation=Op.CREATE)), Op.DESCRIBE)
    assert not allows(authorizer(acl(operation=Op.DESCRIBE)), Op.READ)


def test_prefixed_acls_cover_every_name_with_the_prefix() -> None:
    a = authorizer(acl(name="team-", pattern=PatternType.PREFIXED))
    assert allows(a, Op.READ, name="team-orders")
    assert allows(a, Op.READ, name="team-")
    assert not allows(a, Op.READ, name="team")
    assert not allows(a, Op.READ, name="other-team-x")


def test_a_literal_star_names_every_resource_of_its_type() -> None:
    a = authorizer(acl(name="*"))
    assert allows(a, Op.READ, name="anything")
    assert not a.authorize(ALICE, HOST, Op.READ, ResourceType.GROUP, "anything")


def test_user_star_applies_to_every_user() -> None:
    a = authorizer(acl(principal="User:*"))
    assert allows(a, Op.READ, principal=BOB)


def test_host_must_match_exactly_or_be_a_star() -> None:
    a = authorizer(acl(host="10.0.0.2"))
    assert not allows(a, Op.READ)
    assert allows(a, Op.READ, host="10.0.0.2")


def test_principals_are_case_sensitive_and_exact() -> None:
    assert not allows(authorizer(acl(principal="User:Alice")), Op.READ)


def test_authorize_any_for_idempotent_writes() -> None:
    # KIP-679: WRITE on any topic allows InitProducerId; a covering DENY cancels it.
    assert authorizer(acl(operation=Op.WRITE)).authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
    assert not authorizer(acl(operation=Op.READ)).authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
    cancelled = authorizer(acl(operation=Op.WRITE, name="team-x"),
                           acl(operation=Op.WRITE, name="team-", pattern=PatternType.PREFIXED,
                               permission=AclPermissionType.DENY))
    assert not cancelled.authorize_any(ALICE, HOST, Op.WRITE, TOPIC)
    star_deny = authorizer(acl(operation=Op.WRITE),
                           acl(operation=Op.WRITE, name="*",
                               permission=AclPermissionType.DENY))
    assert not star_deny.authorize_any(ALICE, HOST, Op.WRITE, TOPIC)


def test_authorized_operations_bitfield() -> None:
    bits = authorizer(acl(operation=Op.WRITE)).authorized_operations(ALICE, HOST, TOPIC,
                                                                     "orders")
    assert bits == (1 << Op.WRITE) | (1 << Op.DESCRIBE)


def test_load_replaces_the_bindings() -> None:
    a = authorizer(acl())
    assert allows(a, Op.READ)
    a.load([])
    assert not allows(a, Op.READ)


def test_refusals_are_logged_once_per_key(caplog: pytest.LogCaptureFixture) -> None:
    a = authorizer()
    with caplog.at_level("INFO", logger="kraft.authorizer"):
        for _ in range(5):
            allows(a, Op.WRITE)
        allows(a, Op.WRITE, name="other")
        a.authorize(ALICE, HOST, Op.READ, TOPIC, "silent", log_if_denied=False)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "Principal = User:alice is Denied operation = WRITE" in lines[0]


def test_java_host_forms() -> None:
    assert java_host("127.0.0.1") == "127.0.0.1"
    assert java_host("::1") == "0:0:0:0:0:0:0:1"
    assert java_host("fe80::1%eth0") == "fe80:0:0:0:0:0:0:1"
    assert java_host("::ffff:10.0.0.1") == "10.0.0.1"


def test_filters_match_as_kafka() -> None:
    literal = acl()
    prefixed = acl(name="ord", pattern=PatternType.PREFIXED)
    star = acl(name="*")
    match = AclBindingFilter(TOPIC, "orders", PatternType.MATCH)
    assert match.matches(literal) and match.matches(prefixed) and match.matches(star)
    exact_any = AclBindingFilter(TOPIC, "orders", PatternType.ANY)
    assert exact_any.matches(literal) and not exact_any.matches(prefixed)
    assert AclBindingFilter(TOPIC, "ord", PatternType.PREFIXED).matches(prefixed)
    assert not AclBindingFilter(ResourceType.GROUP).matches(literal)
    assert AclBindingFilter(principal=ALICE, operation=Op.READ).matches(literal)
    assert not AclBindingFilter(permission_type=AclPermissionType.DENY).matches(literal)


def test_binding_validation_is_kafkas() -> None:
    assert binding_error(acl()) is None
    assert binding_error(acl(resource_type=ResourceType.ANY)) is not None
    assert binding_error(acl(pattern=PatternType.MATCH)) is not None
    assert binding_error(acl(operation=Op.ANY)) is not None
    assert binding_error(acl(permission=AclPermissionType.ANY)) is not None
    assert binding_error(acl(name="")) is not None
    assert binding_error(acl(resource_type=ResourceType.CLUSTER, name="other")) is not None
    assert binding_error(acl(resource_type=ResourceType.CLUSTER, name="kafka-cluster")) is None
    assert binding_error(acl(principal="alice")) is not None
