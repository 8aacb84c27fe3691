"""Metadata records: every type round-trips, JSON is Kafka's, and bad bytes are one error."""

from __future__ import annotations

import base64
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kraft.log.meta_properties import random_uuid
from metadata.record_json import record_to_json
from metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    Endpoint,
    FeatureLevelRecord,
    MetadataRecordType,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RecordDecodeError,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnregisterBrokerRecord,
    decode_record,
    encode_record,
    is_valid_uuid,
)
from metadata.security_records import (
    ClientQuotaRecord,
    EntityData,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)

TOPIC_ID = "5zoAlv-xEh9xRANKXt1Lbg"
INCARNATION = "7yd6v3LdRPy1BLJbSb6FQQ"

int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
broker_ids = st.integers(-1, 2**31 - 1)
id_lists = st.lists(broker_ids, max_size=6).map(tuple)
optional_id_lists = st.none() | id_lists
text = st.text(max_size=20)
uuids = st.binary(min_size=16, max_size=16).map(
    lambda b: base64.urlsafe_b64encode(b).decode()[:22]
)
endpoints = st.builds(Endpoint, text, text, st.integers(0, 65535))

RECORDS: dict[MetadataRecordType, st.SearchStrategy[Record]] = {
    MetadataRecordType.REGISTER_BROKER_RECORD: st.builds(
        RegisterBrokerRecord,
        broker_id=int32,
        incarnation_id=uuids,
        broker_epoch=int64,
        endpoints=st.lists(endpoints, max_size=3).map(tuple),
        rack=st.none() | text,
        fenced=st.booleans(),
        in_controlled_shutdown=st.booleans(),
    ),
    MetadataRecordType.UNREGISTER_BROKER_RECORD: st.builds(
        UnregisterBrokerRecord, int32, int64
    ),
    MetadataRecordType.TOPIC_RECORD: st.builds(TopicRecord, text, uuids),
    MetadataRecordType.PARTITION_RECORD: st.builds(
        PartitionRecord,
        int32,
        uuids,
        id_lists,
        id_lists,
        id_lists,
        id_lists,
        broker_ids,
        st.sampled_from([0, 1]),
        int32,
        int32,
    ),
    MetadataRecordType.CONFIG_RECORD: st.builds(
        ConfigRecord, st.integers(-128, 127), text, text, st.none() | text
    ),
    MetadataRecordType.PARTITION_CHANGE_RECORD: st.builds(
        PartitionChangeRecord,
        int32,
        uuids,
        optional_id_lists,
        st.integers(-2, 2**31 - 1),
        optional_id_lists,
        optional_id_lists,
        optional_id_lists,
        st.sampled_from([-1, 0, 1]),
    ),
    MetadataRecordType.REMOVE_TOPIC_RECORD: st.builds(RemoveTopicRecord, uuids),
    MetadataRecordType.FEATURE_LEVEL_RECORD: st.builds(
        FeatureLevelRecord, text, st.integers(0, 32767)
    ),
    MetadataRecordType.BROKER_REGISTRATION_CHANGE_RECORD: st.builds(
        BrokerRegistrationChangeRecord,
        int32,
        int64,
        st.sampled_from([-1, 0, 1]),
        st.sampled_from([0, 1]),
    ),
    MetadataRecordType.PRODUCER_IDS_RECORD: st.builds(
        ProducerIdsRecord, int32, int64, st.integers(0, 2**63 - 1)
    ),
    MetadataRecordType.ACCESS_CONTROL_ENTRY_RECORD: st.builds(
        AccessControlEntryRecord, uuids, st.integers(0, 7), text, st.integers(0, 4), text, text,
        st.integers(0, 14), st.integers(0, 3),
    ),
    MetadataRecordType.REMOVE_ACCESS_CONTROL_ENTRY_RECORD: st.builds(
        RemoveAccessControlEntryRecord, uuids),
    MetadataRecordType.NO_OP_RECORD: st.just(NoOpRecord()),
    MetadataRecordType.USER_SCRAM_CREDENTIAL_RECORD: st.builds(
        UserScramCredentialRecord, text, st.integers(-128, 127), st.binary(max_size=64),
        st.binary(max_size=64), st.binary(max_size=64), int32),
    MetadataRecordType.REMOVE_USER_SCRAM_CREDENTIAL_RECORD: st.builds(
        RemoveUserScramCredentialRecord, text, st.integers(-128, 127)),
    MetadataRecordType.CLIENT_QUOTA_RECORD: st.builds(
        ClientQuotaRecord,
        st.lists(st.builds(EntityData, text, st.none() | text), max_size=3).map(tuple),
        text, st.floats(allow_nan=False, allow_infinity=False), st.just(False)),
}


def test_every_record_type_has_a_strategy() -> None:
    assert set(RECORDS) == set(MetadataRecordType)


@pytest.mark.parametrize("record_type", list(MetadataRecordType), ids=lambda t: t.name)
def test_round_trip(record_type: MetadataRecordType) -> None:
    @settings(max_examples=40, deadline=None)
    @given(RECORDS[record_type])
    def check(record: Record) -> None:
        data = encode_record(record)
        assert struct.unpack_from(">HH", data) == (record_type, 0)
        decoded = decode_record(data)
        assert decoded == record
        assert decoded.record_type is record_type
        assert record_to_json(decoded) == record_to_json(record)

    check()


def test_display_names_are_kafkas() -> None:
    assert TopicRecord("a", TOPIC_ID).record_type.name == "TOPIC_RECORD"
    assert NoOpRecord().record_type.name == "NO_OP_RECORD"
    assert MetadataRecordType.BROKER_REGISTRATION_CHANGE_RECORD == 17
    assert MetadataRecordType.REMOVE_TOPIC_RECORD == 9


def test_defaults_are_kafkas() -> None:
    broker = RegisterBrokerRecord(1, INCARNATION, 7)
    assert broker.fenced is True and broker.in_controlled_shutdown is False
    change = PartitionChangeRecord(0, TOPIC_ID)
    assert change.leader == NO_LEADER_CHANGE and change.isr is None and change.is_noop()
    assert PartitionRecord(0, TOPIC_ID, (1,), (1,)).leader == NO_LEADER


def test_absent_and_empty_lists_differ_in_a_partition_change() -> None:
    empty = PartitionChangeRecord(0, TOPIC_ID, isr=(), adding_replicas=())
    absent = PartitionChangeRecord(0, TOPIC_ID)
    assert decode_record(encode_record(empty)) == empty
    assert decode_record(encode_record(absent)) == absent
    assert decode_record(encode_record(empty)) != absent


def test_leader_zero_and_no_leader_survive_encoding() -> None:
    for leader in (0, NO_LEADER, NO_LEADER_CHANGE):
        record = PartitionChangeRecord(0, TOPIC_ID, leader=leader)
        assert decode_record(encode_record(record)).leader == leader


def test_json_is_what_kafka_dump_log_prints() -> None:
    assert record_to_json(TopicRecord("foo", TOPIC_ID)) == {
        "type": "TOPIC_RECORD", "version": 0, "data": {"name": "foo", "topicId": TOPIC_ID},
    }
    assert record_to_json(ConfigRecord(2, "my-topic", "retention.ms", "100000"))["data"] == {
        "resourceType": 2, "resourceName": "my-topic", "name": "retention.ms",
        "value": "100000",
    }
    assert record_to_json(PartitionRecord(0, TOPIC_ID, (1,), (1,), leader=1))["data"] == {
        "partitionId": 0, "topicId": TOPIC_ID, "replicas": [1], "isr": [1],
        "removingReplicas": [], "addingReplicas": [], "leader": 1, "leaderEpoch": 0,
        "partitionEpoch": 0,
    }
    # Tagged fields are printed only when they carry a change, as Kafka's converter does.
    assert record_to_json(PartitionChangeRecord(3, TOPIC_ID, isr=(1, 2)))["data"] == {
        "partitionId": 3, "topicId": TOPIC_ID, "isr": [1, 2],
    }
    assert record_to_json(BrokerRegistrationChangeRecord(1, 5, fenced=1))["data"] == {
        "brokerId": 1, "brokerEpoch": 5, "fenced": 1,
    }
    broker = RegisterBrokerRecord(1, INCARNATION, 5, (Endpoint("PLAINTEXT", "h", 9092),))
    assert record_to_json(broker)["data"] == {
        "brokerId": 1, "incarnationId": INCARNATION, "brokerEpoch": 5,
        "endPoints": [{"name": "PLAINTEXT", "host": "h", "port": 9092}], "rack": None,
        "fenced": True, "inControlledShutdown": False,
    }
    assert record_to_json(NoOpRecord()) == {"type": "NO_OP_RECORD", "version": 0, "data": {}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "has no header"),
        (b"\x00", "has no header"),
        (b"\x00\x63\x00\x00", "unknown metadata record api key 99"),
        (b"\x00\x02\x00\x07", "unsupported TOPIC_RECORD version 7"),
        (b"\x00\x02\x00\x00\xff\xff", "malformed TOPIC_RECORD v0"),
        (b"\x00\x02\x00\x00", "topic_id '' is not a base64 uuid"),
        (b"\x00\x0c\x00\x00\x10\xff\xff\x03", "feature_level"),
    ],
)
def test_bad_bytes_are_a_record_decode_error(data: bytes, message: str) -> None:
    with pytest.raises(RecordDecodeError, match=message):
        decode_record(data)


def test_out_of_range_fields_are_refused_on_both_sides() -> None:
    bad = BrokerRegistrationChangeRecord(1, 1, fenced=2)
    with pytest.raises(ValueError, match="fenced 2"):
        encode_record(bad)
    body = encode_record(BrokerRegistrationChangeRecord(1, 1))
    forged = body + b"\x18\x02"  # field 3 (fenced) = 2
    with pytest.raises(RecordDecodeError, match="fenced 2"):
        decode_record(forged)
    with pytest.raises(ValueError, match="not a base64 uuid"):
        encode_record(TopicRecord("a", "not-a-uuid"))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_never_raises_anything_but_record_decode_error(data: bytes) -> None:
    try:
        decode_record(data)
    except RecordDecodeError:
        pass


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(MetadataRecordType)), st.binary(max_size=64))
def test_garbage_bodies_never_raise_anything_but_record_decode_error(
    record_type: MetadataRecordType, body: bytes
) -> None:
    try:
        decode_record(struct.pack(">HH", record_type, 0) + body)
    except RecordDecodeError:
        pass


def test_random_uuids_are_kafka_uuids() -> None:
    for _ in range(200):
        value = random_uuid()
        assert is_valid_uuid(value) and not value.startswith("-")
    assert not is_valid_uuid("AAAAAAAAAAAAAAAAAAAAAB")  # 4 stray bits in the last character
    assert not is_valid_uuid("short")
