"""The controller's SCRAM rules (metadata/scram.py, Kafka's ScramControlManager): what
AlterUserScramCredentials writes and answers per user, checked by replaying the records into an
image as every node does, and DescribeUserScramCredentials' answers."""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from kraft.errors import Errors
from metadata.delta import MetadataDelta
from metadata.errors import ControllerResult
from metadata.image import MetadataImage
from metadata.scram import (
    ScramAlterResult,
    ScramDeletion,
    ScramMechanism,
    ScramUpsertion,
    alter_user_scram_credentials,
    credential_from_password,
    describe_user_scram_credentials,
    salted_password,
    scram_credential,
)
from metadata.security_records import RemoveUserScramCredentialRecord, UserScramCredentialRecord

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
IMAGE = MetadataImage(features=MappingProxyType({"metadata.version": 21}))


def upsert(name: str, mechanism: int = SHA512, iterations: int = 8192, password: str = "pw",
           salt: bytes = b"salty") -> ScramUpsertion:
    known = ScramMechanism.of_code(mechanism)
    salted = (salted_password(known, password.encode(), salt, 4096)
              if known is not ScramMechanism.UNKNOWN else b"x" * 64)
    return ScramUpsertion(name, mechanism, iterations, salt, salted)


def commit(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(result.records, start=image.provenance.offset + 1):
        delta.replay(record, offset, 1, 0)
    return delta.apply()


def codes(result: ControllerResult[tuple[ScramAlterResult, ...]]) -> dict[str, int]:
    return {r.user: 0 if r.error is None else r.error.code for r in result.response}


def test_an_upsertion_stores_keys_derived_from_the_salted_password_never_the_password() -> None:
    u = upsert("alice", iterations=4096)
    result = alter_user_scram_credentials(IMAGE, [], [u])
    assert codes(result) == {"alice": 0} and result.atomic
    [record] = result.records
    assert isinstance(record, UserScramCredentialRecord)
    assert u.salted_password not in (record.stored_key, record.server_key, record.salt)
    image = commit(IMAGE, result)
    assert scram_credential(image, "alice", SHA512) == credential_from_password(
        SHA512, "pw", b"salty", 4096)


def test_a_deletion_removes_one_mechanism_and_a_missing_one_is_resource_not_found() -> None:
    image = commit(IMAGE, alter_user_scram_credentials(IMAGE, [], [upsert("alice")]))
    image = commit(image, alter_user_scram_credentials(image, [], [upsert("alice", SHA256)]))
    result = alter_user_scram_credentials(image, [ScramDeletion("alice", SHA512),
                                                  ScramDeletion("bob", SHA512)], [])
    assert codes(result) == {"alice": 0, "bob": Errors.RESOURCE_NOT_FOUND}
    assert result.records == (RemoveUserScramCredentialRecord("alice", SHA512),)
    [bob] = [r for r in result.response if r.user == "bob"]
    assert bob.error is not None
    assert bob.error.message == "Attempt to delete a user credential that does not exist"
    image = commit(image, result)
    assert set(image.scram["alice"]) == {SHA256}
    again = alter_user_scram_credentials(image, [ScramDeletion("alice", SHA512)], [])
    assert codes(again) == {"alice": Errors.RESOURCE_NOT_FOUND} and again.records == ()


def test_each_refusal_has_kafkas_code_and_the_other_users_go_on() -> None:
    result = alter_user_scram_credentials(IMAGE, [ScramDeletion("", SHA512)], [
        upsert("few", iterations=4095), upsert("many", iterations=16385),
        upsert("odd", mechanism=3), upsert("edge-low", iterations=4096),
        upsert("edge-high", iterations=16384)])
    assert codes(result) == {
        "": Errors.UNACCEPTABLE_CREDENTIAL, "few": Errors.UNACCEPTABLE_CREDENTIAL,
        "many": Errors.UNACCEPTABLE_CREDENTIAL, "odd": Errors.UNSUPPORTED_SASL_MECHANISM,
        "edge-low": 0, "edge-high": 0}
    messages = {r.user: r.error.message for r in result.response if r.error is not None}
    assert messages == {"": "Username must not be empty", "few": "Too few iterations",
                        "many": "Too many iterations", "odd": "Unknown SCRAM mechanism"}
    assert {r.name for r in result.records if isinstance(r, UserScramCredentialRecord)} == {
        "edge-low", "edge-high"}


def test_a_user_named_twice_is_duplicate_resource_and_nothing_of_it_is_written() -> None:
    image = commit(IMAGE, alter_user_scram_credentials(IMAGE, [], [upsert("carol")]))
    result = alter_user_scram_credentials(
        image, [ScramDeletion("carol", SHA512)],
        [upsert("carol", SHA256), upsert("dave"), upsert("dave", SHA256), upsert("dave"),
         upsert("erin")])
    assert codes(result) == {"carol": Errors.DUPLICATE_RESOURCE,
                             "dave": Errors.DUPLICATE_RESOURCE, "erin": 0}
    assert [r.user for r in result.response] == ["erin", "carol", "dave"]  # Kafka's grouping
    assert [getattr(r, "name", None) for r in result.records] == ["erin"]


def test_credentials_no_login_could_match_are_refused() -> None:
    short = ScramUpsertion("frank", SHA512, 4096, b"salt", b"x" * 32)
    no_salt = ScramUpsertion("gina", SHA256, 4096, b"", b"x" * 32)
    result = alter_user_scram_credentials(IMAGE, [], [short, no_salt])
    assert codes(result) == {"frank": Errors.UNACCEPTABLE_CREDENTIAL,
                             "gina": Errors.UNACCEPTABLE_CREDENTIAL}
    assert result.records == ()


def test_a_metadata_version_before_3_5_iv2_refuses_every_user() -> None:
    old = MetadataImage(features=MappingProxyType({"metadata.version": 10}))
    result = alter_user_scram_credentials(old, [ScramDeletion("a", SHA512)], [upsert("b")])
    assert codes(result) == {"a": Errors.UNSUPPORTED_VERSION, "b": Errors.UNSUPPORTED_VERSION}


def test_describe_answers_mechanisms_and_iterations_only() -> None:
    image = commit(IMAGE, alter_user_scram_credentials(
        IMAGE, [], [upsert("bob", SHA512, 8192), upsert("alice", SHA256, 4096)]))
    image = commit(image, alter_user_scram_credentials(image, [], [upsert("bob", SHA256, 5000)]))
    everyone = describe_user_scram_credentials(image, None)
    assert [(d.user, d.error, d.credentials) for d in everyone] == [
        ("alice", None, ((1, 4096),)), ("bob", None, ((1, 5000), (2, 8192)))]
    assert describe_user_scram_credentials(image, []) == everyone
    named = describe_user_scram_credentials(image, ["bob", "zed", "alice", "alice"])
    assert [(d.user, d.error and d.error.code) for d in named] == [
        ("bob", None), ("zed", Errors.RESOURCE_NOT_FOUND),
        ("alice", Errors.DUPLICATE_RESOURCE)]
    assert named[1].error is not None and named[1].error.message == (
        "Attempt to describe a user credential that does not exist: zed")
