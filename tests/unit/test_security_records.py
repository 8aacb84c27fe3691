"""SCRAM credential (11, 22) and client quota (14) records: encoded as Kafka names them, replayed
into the image, refused when they cannot apply, written into snapshots and read back."""

from __future__ import annotations

import pytest

from metadata.delta import MetadataDelta, MetadataReplayError
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.loader import image_from_records
from metadata.record_json import record_to_json
from metadata.records import decode_record, encode_record
from metadata.scram import ScramCredential, ScramMechanism, scram_credential
from metadata.security_records import (
    ClientQuotaRecord,
    EntityData,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
    redacted_json,
)
from snapshots.image_records import image_records

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
ALICE_512 = UserScramCredentialRecord("alice", SHA512, b"salt", b"S" * 64, b"K" * 64, 8192)
ALICE_256 = UserScramCredentialRecord("alice", SHA256, b"salt2", b"s" * 32, b"k" * 32, 4096)
USER_ALICE = (EntityData("user", "alice"),)
ALICE_APP = (EntityData("user", "alice"), EntityData("client-id", "app"))
DEFAULT_USER = (EntityData("user", None),)


def replay(image: MetadataImage, *records: object) -> MetadataImage:
    delta = MetadataDelta(image)
    for offset, record in enumerate(records):
        delta.replay(record, offset, 1, 0)  # type: ignore[arg-type]
    return delta.apply()


def test_json_is_kafkas_with_bytes_in_base64_and_views_redact_them() -> None:
    printed = record_to_json(ALICE_256)
    assert printed == {"type": "USER_SCRAM_CREDENTIAL_RECORD", "version": 0, "data": {
        "name": "alice", "mechanism": 1, "salt": "c2FsdDI=", "storedKey": "c3Nz" * 10 + "c3M=",
        "serverKey": "a2tr" * 10 + "a2s=", "iterations": 4096}}
    hidden = redacted_json(printed)["data"]
    assert hidden["salt"] == hidden["storedKey"] == hidden["serverKey"] == "[redacted]"
    assert hidden["name"] == "alice" and hidden["mechanism"] == 1
    assert printed["data"]["salt"] == "c2FsdDI="  # the original is untouched
    assert "S" * 8 not in repr(ALICE_512)
    quota = ClientQuotaRecord(ALICE_APP, "producer_byte_rate", 1048576.0)
    assert record_to_json(quota)["data"] == {
        "entity": [{"entityType": "user", "entityName": "alice"},
                   {"entityType": "client-id", "entityName": "app"}],
        "key": "producer_byte_rate", "value": 1048576.0, "remove": False}
    assert record_to_json(ClientQuotaRecord(DEFAULT_USER, "k", 1.0))["data"]["entity"] == [
        {"entityType": "user", "entityName": None}]
    assert redacted_json(record_to_json(quota)) == record_to_json(quota)


def test_records_round_trip_and_a_removal_encodes_no_value() -> None:
    for record in (ALICE_512, RemoveUserScramCredentialRecord("alice", 2),
                   ClientQuotaRecord(DEFAULT_USER, "consumer_byte_rate", 5.5)):
        assert decode_record(encode_record(record)) == record
    removal = ClientQuotaRecord(USER_ALICE, "producer_byte_rate", 7.0, remove=True)
    assert decode_record(encode_record(removal)) == ClientQuotaRecord(
        USER_ALICE, "producer_byte_rate", 0.0, remove=True)
    with pytest.raises(ValueError, match="finite"):
        encode_record(ClientQuotaRecord(USER_ALICE, "k", float("nan")))
    with pytest.raises(ValueError, match="mechanism"):
        encode_record(RemoveUserScramCredentialRecord("alice", 300))


def test_credentials_are_replayed_per_user_and_mechanism() -> None:
    image = replay(EMPTY_IMAGE, ALICE_512, ALICE_256)
    assert scram_credential(image, "alice", SHA512) == ScramCredential(
        b"salt", b"S" * 64, b"K" * 64, 8192)
    assert set(image.scram["alice"]) == {1, 2}
    image = replay(image, RemoveUserScramCredentialRecord("alice", SHA512))
    assert scram_credential(image, "alice", SHA512) is None
    assert scram_credential(image, "alice", SHA256) is not None
    image = replay(image, RemoveUserScramCredentialRecord("alice", SHA256))
    assert dict(image.scram) == {}  # a user without credentials is gone


def test_impossible_credential_records_stop_the_replay() -> None:
    with pytest.raises(MetadataReplayError, match="unknown SCRAM mechanism 3"):
        replay(EMPTY_IMAGE, UserScramCredentialRecord("bob", 3, b"", b"", b"", 4096))
    with pytest.raises(MetadataReplayError, match="without a user name"):
        replay(EMPTY_IMAGE, UserScramCredentialRecord("", 1, b"", b"", b"", 4096))
    with pytest.raises(MetadataReplayError, match="no SCRAM-SHA-256 credential of user 'alice'"):
        replay(replay(EMPTY_IMAGE, ALICE_512), RemoveUserScramCredentialRecord("alice", 1))
    with pytest.raises(MetadataReplayError, match="to remove"):  # removed in the same delta
        replay(EMPTY_IMAGE, ALICE_512, RemoveUserScramCredentialRecord("alice", 2),
               RemoveUserScramCredentialRecord("alice", 2))
    delta = MetadataDelta(EMPTY_IMAGE)
    assert not delta.scram_changed
    delta.replay(ALICE_512, 0, 1, 0)
    assert delta.scram_changed


def test_quotas_are_set_replaced_and_removed_per_entity_and_key() -> None:
    image = replay(EMPTY_IMAGE, ClientQuotaRecord(ALICE_APP, "producer_byte_rate", 100.0),
                   ClientQuotaRecord(ALICE_APP, "producer_byte_rate", 200.0),
                   ClientQuotaRecord(ALICE_APP, "consumer_byte_rate", 300.0),
                   ClientQuotaRecord(DEFAULT_USER, "request_percentage", 50.0))
    entity = (("client-id", "app"), ("user", "alice"))  # sorted by type, whatever the order
    assert dict(image.client_quotas[entity]) == {"producer_byte_rate": 200.0,
                                                 "consumer_byte_rate": 300.0}
    assert dict(image.client_quotas[(("user", None),)]) == {"request_percentage": 50.0}
    image = replay(image, ClientQuotaRecord(ALICE_APP, "producer_byte_rate", 0.0, True),
                   ClientQuotaRecord(ALICE_APP, "consumer_byte_rate", 0.0, True),
                   ClientQuotaRecord(USER_ALICE, "producer_byte_rate", 0.0, True))  # unset: no-op
    assert entity not in image.client_quotas and len(image.client_quotas) == 1


def test_impossible_quota_records_stop_the_replay() -> None:
    with pytest.raises(MetadataReplayError, match="without an entity"):
        replay(EMPTY_IMAGE, ClientQuotaRecord((), "producer_byte_rate", 1.0))
    with pytest.raises(MetadataReplayError, match="names a type twice"):
        replay(EMPTY_IMAGE, ClientQuotaRecord((EntityData("user", "a"), EntityData("user", None)),
                                              "producer_byte_rate", 1.0))


def test_snapshots_carry_credentials_and_quotas() -> None:
    image = replay(EMPTY_IMAGE, ALICE_512, ALICE_256,
                   UserScramCredentialRecord("bob", 1, b"x", b"y" * 32, b"z" * 32, 16384),
                   ClientQuotaRecord(ALICE_APP, "producer_byte_rate", 100.0),
                   ClientQuotaRecord(DEFAULT_USER, "consumer_byte_rate", 1.5),
                   ClientQuotaRecord(USER_ALICE, "request_percentage", 20.0))
    records = [encode_record(r) for r in image_records(image)]
    reloaded = image_from_records(records, 9, 1, 0)
    assert reloaded.scram == image.scram
    assert reloaded.client_quotas == image.client_quotas
    assert records == [encode_record(r) for r in image_records(reloaded)]  # a stable order
