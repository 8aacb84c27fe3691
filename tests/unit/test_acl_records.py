"""ACL records in the image: replayed by id, refused when they contradict the image, written
into snapshots and read back."""

from __future__ import annotations

import pytest

from metadata.authorizer.model import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    binding_of,
    record_of,
)
from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.loader import image_from_records
from metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    decode_record,
    encode_record,
)
from snapshots.image_records import image_records

ID1 = "5zoAlv-xEh9xRANKXt1Lbg"
ID2 = "7yd6v3LdRPy1BLJbSb6FQQ"
BINDING = AclBinding(ResourceType.TOPIC, "orders", PatternType.PREFIXED, "User:alice", "*",
                     AclOperation.WRITE, AclPermissionType.ALLOW)


def replay(image: MetadataImage, *records: object) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(records):
        delta.replay(record, offset, 1, 0)  # type: ignore[arg-type]
    return delta.apply()


def test_an_acl_record_adds_a_binding_and_a_removal_drops_it() -> None:
    image = replay(EMPTY_IMAGE, record_of(ID1, BINDING))
    assert dict(image.acls) == {ID1: BINDING}
    assert dict(replay(image, RemoveAccessControlEntryRecord(ID1)).acls) == {}


def test_a_duplicate_id_or_a_removal_of_nothing_is_fatal() -> None:
    image = replay(EMPTY_IMAGE, record_of(ID1, BINDING))
    with pytest.raises(MetadataReplayError, match="exists"):
        replay(image, record_of(ID1, BINDING))
    with pytest.raises(MetadataReplayError, match="no ACL"):
        replay(image, RemoveAccessControlEntryRecord(ID2))


def test_the_delta_says_when_acls_changed() -> None:
    delta = MetadataDelta(EMPTY_IMAGE)
    assert not delta.acls_changed
    delta.replay(record_of(ID1, BINDING), 0, 1, 0)
    assert delta.acls_changed


def test_records_round_trip_and_unknown_codes_read_as_unknown() -> None:
    record = record_of(ID1, BINDING)
    assert decode_record(encode_record(record)) == record
    assert binding_of(record) == BINDING
    odd = AccessControlEntryRecord(ID2, 7, "u", 3, "User:x", "*", 14, 3)
    assert binding_of(odd).resource_type == ResourceType.USER
    assert binding_of(AccessControlEntryRecord(ID2, 2, "t", 3, "User:x", "*", 1, 3)).operation \
        == AclOperation.ANY


def test_snapshots_carry_the_acls() -> None:
    other = AclBinding(ResourceType.GROUP, "g", PatternType.LITERAL, "User:*", "10.0.0.1",
                       AclOperation.READ, AclPermissionType.DENY)
    image = replay(EMPTY_IMAGE, record_of(ID1, BINDING), record_of(ID2, other))
    reloaded = image_from_records([encode_record(r) for r in image_records(image)], 5, 1, 0)
    assert dict(reloaded.acls) == {ID1: BINDING, ID2: other}


def test_the_publisher_loads_the_authorizer_only_when_the_acls_change() -> None:
    from metadata.authorizer.publisher import AclPublisher
    from metadata.authorizer.standard import StandardAuthorizer
    from metadata.loader import LoaderManifest

    authorizer = StandardAuthorizer()
    loads: list[int] = []
    original = authorizer.load

    def counting_load(bindings: object) -> None:
        loads.append(1)
        original(bindings)  # type: ignore[arg-type]

    authorizer.load = counting_load  # type: ignore[method-assign]
    publisher = AclPublisher(authorizer)
    manifest = LoaderManifest.__new__(LoaderManifest)
    publisher.on_metadata_update(None, EMPTY_IMAGE, manifest)
    assert authorizer.loaded and len(loads) == 1  # the first image completes the initial load
    image = replay(EMPTY_IMAGE, record_of(ID1, BINDING))
    publisher.on_metadata_update(None, image, manifest)
    assert authorizer.bindings() == (BINDING,)
    unrelated = replay(image, AccessControlEntryRecord(ID2, 2, "x", 3, "User:b", "*", 3, 3))
    publisher.on_metadata_update(None, unrelated, manifest)
    publisher.on_metadata_update(None, unrelated, manifest)
    assert len(loads) == 3
