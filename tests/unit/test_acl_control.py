"""The controller's ACL rules (metadata/authorizer/control.py): what CreateAcls and DeleteAcls
write and answer, checked by replaying the records into an image as every node does."""

from __future__ import annotations

import pytest

from kraft.errors import Errors
from metadata.authorizer.control import (
    create_acls,
    delete_acls,
    describe_acls,
    enum_of,
    filter_refusal,
)
from metadata.authorizer.model import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from metadata.delta import MetadataDelta
from metadata.errors import MAX_RECORDS_PER_USER_OP, ControllerApiError, ControllerResult
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    is_valid_uuid,
)

R, P, Op, A = ResourceType, PatternType, AclOperation, AclPermissionType


def acl(name: str = "t", principal: str = "User:alice", operation: AclOperation = Op.READ,
        pattern: PatternType = P.LITERAL, resource: ResourceType = R.TOPIC,
        permission: AclPermissionType = A.ALLOW, host: str = "*") -> AclBinding:
    return AclBinding(resource, name, pattern, principal, host, operation, permission)


def commit(image: MetadataImage, result: ControllerResult[object]) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(result.records, start=image.provenance.offset + 1):
        delta.replay(record, offset, 1, 0)
    return delta.apply()


def with_acls(*bindings: AclBinding) -> MetadataImage:
    return commit(EMPTY_IMAGE, create_acls(EMPTY_IMAGE, bindings))  # type: ignore[arg-type]


# ---- create ----

def test_created_bindings_get_fresh_valid_ids_and_reach_the_image() -> None:
    bindings = [acl("a"), acl("b", operation=Op.WRITE), acl("pre", pattern=P.PREFIXED)]
    result = create_acls(EMPTY_IMAGE, bindings)
    assert result.response == (None, None, None)
    assert result.atomic
    ids = [r.id for r in result.records if isinstance(r, AccessControlEntryRecord)]
    assert len(ids) == 3 and len(set(ids)) == 3 and all(map(is_valid_uuid, ids))
    image = commit(EMPTY_IMAGE, result)  # type: ignore[arg-type]
    assert sorted(image.acls.values(), key=str) == sorted(bindings, key=str)


def test_an_existing_binding_is_a_success_without_a_record() -> None:
    image = with_acls(acl("a"))
    result = create_acls(image, [acl("a"), acl("b")])
    assert result.response == (None, None)
    assert [r.resource_name for r in result.records] == ["b"]  # type: ignore[union-attr]


def test_the_same_binding_twice_in_one_request_is_written_once() -> None:
    result = create_acls(EMPTY_IMAGE, [acl("a"), acl("a")])
    assert result.response == (None, None)
    assert len(result.records) == 1


def test_an_id_in_the_image_is_never_reused() -> None:
    image = with_acls(acl("a"))
    [taken] = image.acls
    fresh = "AAAAAAAAAAAAAAAAAAAAAg"
    ids = iter([taken, taken, fresh])
    result = create_acls(image, [acl("b")], new_id=lambda: next(ids))
    assert [r.id for r in result.records] == [fresh]  # type: ignore[union-attr]
    assert set(commit(image, result).acls) == {taken, fresh}  # type: ignore[arg-type]


def test_two_new_bindings_never_share_an_id() -> None:
    ids = iter(["AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"])
    result = create_acls(EMPTY_IMAGE, [acl("a"), acl("b")], new_id=lambda: next(ids))
    assert [r.id for r in result.records] == [  # type: ignore[union-attr]
        "AAAAAAAAAAAAAAAAAAAAAg", "AAAAAAAAAAAAAAAAAAAAAw"]


@pytest.mark.parametrize(("binding", "message"), [
    (acl(resource=R.ANY), "Invalid resourceType ANY"),
    (acl(resource=R.UNKNOWN), "Invalid resourceType UNKNOWN"),
    (acl(pattern=P.MATCH), "Invalid patternType MATCH"),
    (acl(pattern=P.ANY), "Invalid patternType ANY"),
    (acl(operation=Op.ANY), "Invalid operation ANY"),
    (acl(permission=A.ANY), "Invalid permissionType ANY"),
    (acl(name=""), "Resource name should not be empty"),
    (acl(name="other", resource=R.CLUSTER),
     "The only valid name for the CLUSTER resource is kafka-cluster"),
    (acl(principal="alice"), "Could not parse principal from `alice` (no colon is present)."),
])
def test_an_invalid_entry_is_refused_alone_in_order(binding: AclBinding, message: str) -> None:
    result = create_acls(EMPTY_IMAGE, [acl("first"), binding, acl("last")])
    assert result.response == (None, ControllerApiError(Errors.INVALID_REQUEST, message), None)
    assert [r.resource_name for r in result.records] == ["first", "last"]  # type: ignore[union-attr]


def test_more_records_than_one_user_operation_allows_write_nothing() -> None:
    bindings = [acl(f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP + 1)]
    with pytest.raises(ControllerApiError) as refused:
        create_acls(EMPTY_IMAGE, bindings)
    assert refused.value.error == Errors.POLICY_VIOLATION
    assert len(create_acls(EMPTY_IMAGE, bindings[:-1]).records) == MAX_RECORDS_PER_USER_OP


# ---- delete ----

BOB_T = acl("t", principal="User:bob")
ALICE_T = acl("t")
ALICE_PREFIX = acl("t", pattern=P.PREFIXED)
ALICE_WILDCARD = acl("*")
ALICE_GROUP = acl("t", resource=R.GROUP)
ALICE_TOPIC_X = acl("x")


def everything() -> MetadataImage:
    return with_acls(BOB_T, ALICE_T, ALICE_PREFIX, ALICE_WILDCARD, ALICE_GROUP, ALICE_TOPIC_X)


def deleted(image: MetadataImage, *filters: AclBindingFilter) -> list[set[AclBinding]]:
    result = delete_acls(image, filters)
    assert all(r.error is None for r in result.response)
    return [set(r.deleted) for r in result.response]


def test_a_literal_filter_deletes_exactly_that_pattern() -> None:
    f = AclBindingFilter(R.TOPIC, "t", P.LITERAL)
    assert deleted(everything(), f) == [{BOB_T, ALICE_T}]


def test_a_match_filter_deletes_everything_applying_to_the_name() -> None:
    f = AclBindingFilter(R.TOPIC, "tx", P.MATCH)
    assert deleted(everything(), f) == [{ALICE_PREFIX, ALICE_WILDCARD}]
    f = AclBindingFilter(R.TOPIC, "t", P.MATCH)
    assert deleted(everything(), f) == [{BOB_T, ALICE_T, ALICE_PREFIX, ALICE_WILDCARD}]


def test_an_any_filter_takes_the_exact_name_of_every_pattern_type() -> None:
    f = AclBindingFilter(R.TOPIC, "t", P.ANY)
    assert deleted(everything(), f) == [{BOB_T, ALICE_T, ALICE_PREFIX}]
    assert deleted(everything(), AclBindingFilter()) == [
        {BOB_T, ALICE_T, ALICE_PREFIX, ALICE_WILDCARD, ALICE_GROUP, ALICE_TOPIC_X}]


def test_entry_fields_narrow_a_filter() -> None:
    f = AclBindingFilter(R.ANY, None, P.ANY, principal="User:bob")
    assert deleted(everything(), f) == [{BOB_T}]
    f = AclBindingFilter(R.ANY, None, P.ANY, operation=Op.WRITE)
    assert deleted(everything(), f) == [set()]


def test_a_binding_matched_by_two_filters_is_removed_once_and_reported_by_both() -> None:
    image = everything()
    by_name = AclBindingFilter(R.TOPIC, "t", P.LITERAL)
    by_principal = AclBindingFilter(principal="User:bob")
    result = delete_acls(image, [by_name, by_principal])
    assert [set(r.deleted) for r in result.response] == [{BOB_T, ALICE_T}, {BOB_T}]
    assert all(isinstance(r, RemoveAccessControlEntryRecord) for r in result.records)
    assert len(result.records) == 2
    after = commit(image, result)  # type: ignore[arg-type]
    assert set(after.acls.values()) == {ALICE_PREFIX, ALICE_WILDCARD, ALICE_GROUP,
                                        ALICE_TOPIC_X}


def test_no_match_is_an_empty_success() -> None:
    result = delete_acls(everything(), [AclBindingFilter(R.TOPIC, "nothing", P.LITERAL)])
    assert result.records == ()
    assert [(r.error, r.deleted) for r in result.response] == [(None, ())]


@pytest.mark.parametrize(("acl_filter", "message"), [
    (AclBindingFilter(resource_type=R.UNKNOWN), "Unknown patternFilter."),
    (AclBindingFilter(pattern_type=P.UNKNOWN), "Unknown patternFilter."),
    (AclBindingFilter(operation=Op.UNKNOWN), "Unknown entryFilter."),
    (AclBindingFilter(permission_type=A.UNKNOWN), "Unknown entryFilter."),
])
def test_a_filter_with_an_unknown_code_is_refused_alone(acl_filter: AclBindingFilter,
                                                       message: str) -> None:
    assert filter_refusal(acl_filter) == message
    result = delete_acls(everything(), [acl_filter, AclBindingFilter(principal="User:bob")])
    refused, ok = result.response
    assert refused.error == ControllerApiError(Errors.INVALID_REQUEST, message)
    assert (ok.error, ok.deleted) == (None, (BOB_T,))
    assert len(result.records) == 1


def test_deleting_more_than_one_user_operation_allows_is_refused_whole() -> None:
    image = with_acls(*(acl(f"t{i}") for i in range(MAX_RECORDS_PER_USER_OP)))
    image = commit(image, create_acls(image, [acl("one-more")]))  # type: ignore[arg-type]
    with pytest.raises(ControllerApiError) as refused:
        delete_acls(image, [AclBindingFilter()])
    assert refused.value.error == Errors.POLICY_VIOLATION


# ---- describe and codes ----

def test_describe_selects_with_the_filter_in_a_stable_order() -> None:
    image = everything()
    assert describe_acls(image, AclBindingFilter(R.TOPIC, "tx", P.MATCH)) == [
        ALICE_WILDCARD, ALICE_PREFIX]
    assert describe_acls(image, AclBindingFilter(R.GROUP)) == [ALICE_GROUP]
    assert describe_acls(image, AclBindingFilter(operation=Op.UNKNOWN)) == []


def test_codes_outside_an_enum_read_as_unknown() -> None:
    assert enum_of(R, 99) is R.UNKNOWN
    assert enum_of(Op, -1) is Op.UNKNOWN
    assert [enum_of(A, c) for c in range(4)] == list(A)
    assert enum_of(P, 4) is P.PREFIXED
