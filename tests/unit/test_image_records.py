"""The image as records and back: images built by the controller's own rules (random operation
sequences) survive image_to_records -> image_from_records, record for record and field for
field; snapshot files written from an image load back; a loader continues from a loaded
snapshot exactly as from the log."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kraft.log.base import CorruptRecordError, OffsetAndEpoch
from kraft.log.memory import MemoryLog
from kraft.log.meta_properties import random_uuid
from kraft.log.snapshots import FileSnapshotStore, MemorySnapshotStore, read_snapshot_records
from metadata.configs import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    incremental_alter_configs,
)
from metadata.delta import MetadataDelta
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.loader import MetadataLoader, image_from_records
from metadata.reassignment import ReassignablePartition, alter_partition_reassignments
from metadata.record_decoder import RecordDecoder
from metadata.records import (
    ConfigResourceType,
    Endpoint,
    FeatureLevelRecord,
    PartitionRecord,
    ProducerIdsRecord,
    Record,
    RecordDecodeError,
    RegisterBrokerRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from metadata.replication import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionTopic,
    BrokerState,
    ElectionType,
    alter_partition,
    begin_controlled_shutdown,
    elect_leaders,
    fence_broker,
    unfence_broker,
    unregister_broker,
)
from metadata.topics import (
    CreatableTopic,
    CreatePartitionsTopic,
    TopicRef,
    create_partitions,
    create_topics,
    delete_topics,
)
from snapshots.diff import as_loaded, diff_images
from snapshots.image_records import image_records, image_to_records
from snapshots.reader import load_snapshot_image
from snapshots.writer import write_image_snapshot

EPOCH = 3


def replay(
    image: MetadataImage, records: Iterable[Record], journal: list[list[Record]] | None = None
) -> MetadataImage:
    """Commit records at the next offsets, as the loader would; `journal` collects them."""
    records = list(records)
    if journal is not None:
        journal.append(records)
    delta = MetadataDelta(image)
    offset = image.provenance.offset + 1
    for record in records:
        delta.replay(record, offset, EPOCH, 1000 + offset)
        offset += 1
    return delta.apply()


def register(
    image: MetadataImage, broker_id: int, rack: str | None = None,
    journal: list[list[Record]] | None = None,
) -> MetadataImage:
    # brokers.register_broker's record: the epoch is the record's offset.
    offset = image.provenance.offset + 1
    return replay(image, [RegisterBrokerRecord(
        broker_id, random_uuid(), offset, (Endpoint("BROKER", f"h{broker_id}", 9092),), rack,
    )], journal)


def round_trip(image: MetadataImage) -> MetadataImage:
    p = image.provenance
    return image_from_records(image_to_records(image), p.offset, p.epoch, p.timestamp_ms)


def assert_round_trips(image: MetadataImage) -> None:
    # The fast partition encoder and decoder agree with encode_record and decode_record.
    encoded = image_to_records(image)
    assert encoded == [encode_record(r) for r in image_records(image)]
    decode = RecordDecoder().decode
    assert [decode(d) for d in encoded + encoded] == [decode_record(d) for d in encoded + encoded]
    loaded = round_trip(image)
    expected = as_loaded(image, image.provenance.offset + 1)
    assert diff_images(expected, loaded) == []
    assert loaded.provenance == image.provenance
    assert loaded == expected  # every field, the indexes included
    # Record for record: the registration offset is the only thing records do not carry.
    assert image_to_records(loaded) == image_to_records(image)
    for broker_id, broker in image.cluster.brokers.items():
        assert loaded.cluster.brokers[broker_id] == replace(
            broker, registration_offset=image.provenance.offset)


# ---- random controller histories ----------------------------------------------------------

TOPICS = ("orders", "payments", "a.b", "a_c", "logs")
BROKERS = (1, 2, 3, 4, 5)

op = st.one_of(
    st.tuples(st.just("register"), st.sampled_from(BROKERS), st.sampled_from([None, "r1", "r2"])),
    st.tuples(st.just("unfence"), st.sampled_from(BROKERS)),
    st.tuples(st.just("fence"), st.sampled_from(BROKERS)),
    st.tuples(st.just("shutdown"), st.sampled_from(BROKERS)),
    st.tuples(st.just("unregister"), st.sampled_from(BROKERS)),
    st.tuples(st.just("create"), st.sampled_from(TOPICS), st.integers(1, 6), st.integers(1, 3)),
    st.tuples(st.just("grow"), st.sampled_from(TOPICS), st.integers(1, 4)),
    st.tuples(st.just("delete"), st.sampled_from(TOPICS)),
    st.tuples(st.just("reassign"), st.sampled_from(TOPICS), st.integers(0, 5),
              st.lists(st.sampled_from(BROKERS), min_size=1, max_size=3, unique=True)),
    st.tuples(st.just("cancel"), st.sampled_from(TOPICS), st.integers(0, 5)),
    st.tuples(st.just("elect"), st.sampled_from([ElectionType.PREFERRED, ElectionType.UNCLEAN])),
    st.tuples(st.just("shrink"), st.sampled_from(TOPICS), st.integers(0, 5)),
    st.tuples(st.just("config"), st.sampled_from([(ConfigResourceType.TOPIC, t) for t in TOPICS]
                                                 + [(ConfigResourceType.BROKER, ""),
                                                    (ConfigResourceType.BROKER, "1")]),
              st.sampled_from(["min.insync.replicas", "retention.ms", "log.retention.ms",
                               "unclean.leader.election.enable"]),
              st.sampled_from([None, "1", "2", "true"])),
    st.tuples(st.just("feature"), st.sampled_from(["metadata.version", "kraft.version"]),
              st.integers(0, 30)),
)


def apply_op(
    image: MetadataImage, operation: tuple, journal: list[list[Record]] | None = None
) -> MetadataImage:
    """The image after one controller operation (a refused one changes nothing)."""
    kind, *args = operation
    brokers = image.cluster.brokers

    def commit(image: MetadataImage, result: ControllerResult) -> MetadataImage:
        return replay(image, result.records, journal)

    try:
        if kind == "register":
            return register(image, args[0], args[1], journal)
        if kind in ("unfence", "fence", "shutdown", "unregister"):
            if args[0] not in brokers:
                return image
            rule = {"unfence": unfence_broker, "fence": fence_broker,
                    "shutdown": begin_controlled_shutdown, "unregister": unregister_broker}[kind]
            return commit(image, rule(image, args[0]))
        if kind == "create":
            return commit(image, create_topics(image, [CreatableTopic(args[0], args[1], args[2])]))
        if kind == "grow":
            topic = image.topic(args[0])
            count = (len(topic.partitions) if topic else 0) + args[1]
            return commit(image, create_partitions(image, [CreatePartitionsTopic(args[0], count)]))
        if kind == "delete":
            return commit(image, delete_topics(image, [TopicRef(name=args[0])]))
        if kind == "reassign":
            return commit(image, alter_partition_reassignments(
                image, [ReassignablePartition(args[0], args[1], tuple(args[2]))]))
        if kind == "cancel":
            return commit(image, alter_partition_reassignments(
                image, [ReassignablePartition(args[0], args[1], None)]))
        if kind == "elect":
            return commit(image, elect_leaders(image, args[0], None))
        if kind == "shrink":
            return shrink_isr(image, args[0], args[1], journal)
        if kind == "config":
            (resource_type, name), key, value = args
            alter = AlterableConfig(key, AlterConfigOp.DELETE if value is None else
                                    AlterConfigOp.SET, value)
            return commit(image, incremental_alter_configs(
                image, [AlterConfigsResource(resource_type, name, (alter,))]))
        if kind == "feature":
            return replay(image, [FeatureLevelRecord(args[0], args[1])], journal)
    except ControllerApiError:
        return image
    raise AssertionError(kind)


def shrink_isr(
    image: MetadataImage, name: str, partition_id: int, journal: list[list[Record]] | None
) -> MetadataImage:
    """The partition leader drops the last ISR member through AlterPartition."""
    topic = image.topic(name)
    p = topic.partition(partition_id) if topic else None
    if p is None or p.leader < 0 or len(p.isr) < 2 or p.leader not in image.cluster.brokers:
        return image
    isr = tuple(b for b in p.isr if b != p.isr[-1] or b == p.leader)[:len(p.isr) - 1]
    request = AlterPartitionRequest(p.leader, image.cluster.brokers[p.leader].epoch, (
        AlterPartitionTopic(topic.topic_id, (AlterPartitionData(
            partition_id, p.leader_epoch,
            tuple(BrokerState(b, image.cluster.brokers[b].epoch) for b in isr
                  if b in image.cluster.brokers),
            p.partition_epoch),)),))
    return replay(image, alter_partition(image, request).records, journal)


def build(operations: Sequence[tuple]) -> MetadataImage:
    image = replay(EMPTY_IMAGE, [FeatureLevelRecord("metadata.version", 21)])
    for broker_id in (1, 2, 3):
        image = register(image, broker_id)
        image = apply_op(image, ("unfence", broker_id))
    for operation in operations:
        image = apply_op(image, operation)
    return image


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(op, max_size=40))
def test_images_from_controller_histories_round_trip(operations: list[tuple]) -> None:
    assert_round_trips(build(operations))


def test_a_rich_history_exercises_every_part_of_the_image() -> None:
    """A fixed history, so the property is known to cover reassignment, fencing, controlled
    shutdown, deletion, configs of every kind and a removed feature."""
    image = build([
        ("register", 4, "r1"), ("unfence", 4), ("create", "orders", 6, 3),
        ("create", "a.b", 2, 2), ("create", "logs", 1, 1), ("delete", "logs"),
        ("reassign", "orders", 0, [4, 2, 1]), ("shutdown", 3), ("fence", 2),
        ("config", (ConfigResourceType.TOPIC, "orders"), "retention.ms", "1"),
        ("config", (ConfigResourceType.BROKER, ""), "min.insync.replicas", "2"),
        ("config", (ConfigResourceType.BROKER, "1"), "log.retention.ms", "2"),
        ("feature", "kraft.version", 1), ("feature", "kraft.version", 0),
        ("register", 5, None),
    ])
    topic = image.topic("orders")
    assert topic is not None and image.topic("logs") is None
    assert any(p.adding_replicas or p.removing_replicas for p in topic.partitions.values())
    assert image.cluster.brokers[3].in_controlled_shutdown
    assert image.cluster.brokers[2].fenced and image.cluster.brokers[5].fenced
    assert set(image.features) == {"metadata.version"}
    assert len(image.configs) == 3
    assert_round_trips(image)
    kinds = [type(r).__name__ for r in image_records(image)]
    # metadata.version first, then brokers, topics with their partitions, configs.
    assert kinds[0] == "FeatureLevelRecord"
    assert kinds.index("TopicRecord") > max(i for i, k in enumerate(kinds)
                                            if k == "RegisterBrokerRecord")
    assert kinds[-1] == "ConfigRecord"


def test_empty_image_and_topic_without_partitions() -> None:
    assert image_to_records(EMPTY_IMAGE) == []
    loaded = image_from_records([], 9, 2, 77)
    assert loaded.provenance.offset == 9 and loaded.topics.by_id == EMPTY_IMAGE.topics.by_id
    image = replay(EMPTY_IMAGE, [TopicRecord("bare", random_uuid())])
    assert_round_trips(image)


def test_the_next_producer_id_survives_a_snapshot() -> None:
    """Blocks of producer ids handed out before a snapshot are never handed out again by a
    node that starts from it (the record is the only memory of them)."""
    image = replay(EMPTY_IMAGE, [ProducerIdsRecord(4, 7, 3000)])
    assert_round_trips(image)
    assert round_trip(image).producer_ids.next_producer_id == 3000


def test_equal_images_give_identical_bytes() -> None:
    image = build([("create", "orders", 4, 3), ("create", "payments", 2, 2)])
    assert image_to_records(round_trip(image)) == image_to_records(image)
    assert image_to_records(image) == image_to_records(image)


def test_many_partitions_round_trip() -> None:
    records: list[Record] = [RegisterBrokerRecord(b, random_uuid(), b, fenced=False)
                             for b in range(5)]
    for t in range(50):
        tid = random_uuid()
        records.append(TopicRecord(f"t{t}", tid))
        for p in range(200):
            replicas = tuple((t + p + j) % 5 for j in range(3))
            records.append(PartitionRecord(p, tid, replicas, replicas[:2], leader=replicas[1],
                                           leader_epoch=p % 7, partition_epoch=p % 11))
    image = replay(EMPTY_IMAGE, records)
    assert image.topics.partition_count() == 10_000
    assert_round_trips(image)


def test_the_fast_decoder_never_trusts_odd_bytes() -> None:
    """Bytes decode_record would read differently, or refuse, never take the fast path."""
    topic = random_uuid()
    plain = encode_record(PartitionRecord(7, topic, (1, 2), (1,), leader=1))
    other = random_uuid()
    # A second field 2 in the tail overrides the topic id (protobuf: the last one wins).
    overriding = plain + b"\x12\x16" + other.encode()
    # Field 1 again: a different partition id.
    renumbered = plain + b"\x08\x09"
    decoder = RecordDecoder()
    for data in [plain, overriding, renumbered] * 2 + [
        encode_record(PartitionRecord(300, topic, (1, 2), (1,), leader=1)) + b"\x12\x16"
        + other.encode(),
    ]:
        assert decoder.decode(data) == decode_record(data)
    assert decoder.decode(overriding).topic_id == other
    assert decoder.decode(renumbered).partition_id == 9
    for bad in (plain[:-1], plain[:10], plain.replace(topic.encode(), b"!" * 22)):
        with pytest.raises(RecordDecodeError):
            decode_record(bad)
        with pytest.raises(RecordDecodeError):
            decoder.decode(bad)


# ---- files ---------------------------------------------------------------------------------


def history_log() -> tuple[MemoryLog, list[int]]:
    """A log written as the active controller writes it, one batch per operation, with
    the end offset after each batch."""
    steps: list[tuple] = [
        ("feature", "metadata.version", 21), ("register", 1, None), ("register", 2, None),
        ("register", 3, None), ("unfence", 1), ("unfence", 2), ("unfence", 3),
        ("create", "orders", 4, 3), ("register", 4, "r"), ("shutdown", 2),
        ("create", "payments", 2, 2), ("delete", "orders"),
        ("config", (ConfigResourceType.BROKER, ""), "retention.ms", "5"),
    ]
    log = MemoryLog()
    image = EMPTY_IMAGE
    ends = []
    for step in steps:
        batches: list[list[Record]] = []
        image = apply_op(image, step, batches)
        for records in filter(None, batches):
            base = log.end_offset
            log.append_as_leader([encode_record(r) for r in records], EPOCH, 1000 + base)
        assert log.end_offset == image.provenance.offset + 1, step
        ends.append(log.end_offset)
    return log, ends


def test_loader_continues_from_a_loaded_snapshot(tmp_path: os.PathLike[str]) -> None:
    log, ends = history_log()
    full = MetadataLoader(off_loop_snapshots=False).catch_up(log, log.end_offset)
    store = FileSnapshotStore(tmp_path)
    for end in ends[:-1]:
        at_end = MetadataLoader(off_loop_snapshots=False).catch_up(log, end)
        snapshot_id = OffsetAndEpoch(end, EPOCH)
        info = write_image_snapshot(store, at_end, snapshot_id, at_end.provenance.timestamp_ms)
        assert info.records == len(image_to_records(at_end))
        assert list(read_snapshot_records(store.path(snapshot_id))) == image_to_records(at_end)
        loaded = load_snapshot_image(store.path(snapshot_id))
        assert loaded.provenance.offset == end - 1  # the loader's next offset is `end`
        assert loaded == as_loaded(at_end, end)
        loader = MetadataLoader(loaded, off_loop_snapshots=False)
        assert loader.next_offset == end
        resumed = loader.catch_up(log, log.end_offset)
        assert diff_images(as_loaded(full, end), resumed) == []
        assert resumed == as_loaded(full, end)
    assert store.ids() == [OffsetAndEpoch(e, EPOCH) for e in ends[:-1]]


def test_writer_refuses_an_image_beyond_the_snapshot_and_leaves_nothing() -> None:
    image = build([("create", "orders", 2, 2)])
    store = MemorySnapshotStore()
    with pytest.raises(ValueError, match="beyond the snapshot end offset"):
        write_image_snapshot(store, image, OffsetAndEpoch(image.provenance.offset, EPOCH), 0)
    assert store.ids() == []
    info = write_image_snapshot(store, image, OffsetAndEpoch(image.provenance.offset + 1, 1), 5)
    assert info.last_contained_timestamp_ms == 5 and store.ids()


def test_reader_names_the_problem(tmp_path: os.PathLike[str]) -> None:
    image = build([("create", "orders", 3, 3)])
    store = FileSnapshotStore(tmp_path)
    snapshot_id = OffsetAndEpoch(image.provenance.offset + 1, EPOCH)
    write_image_snapshot(store, image, snapshot_id, 0)
    path = store.path(snapshot_id)
    with open(path, "rb") as file:
        data = file.read()
    os.chmod(path, 0o644)
    with open(path, "wb") as file:
        file.write(data[:-10])
    with pytest.raises(CorruptRecordError) as info:
        load_snapshot_image(path)
    assert info.value.path == path and "runs past the end" in info.value.reason
    renamed = os.path.join(tmp_path, "copy.checkpoint")
    os.rename(path, renamed)
    with pytest.raises(CorruptRecordError, match="not a snapshot file name"):
        load_snapshot_image(renamed)
