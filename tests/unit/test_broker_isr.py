"""ISR expansion by partition leaders: which replicas a leader adds back, and when it asks."""

from __future__ import annotations

import asyncio

from broker.isr import IsrExpander, expansions
from kraft.log.meta_properties import random_uuid
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import (
    BrokerRegistrationChangeRecord,
    FencingChange,
    PartitionRecord,
    RegisterBrokerRecord,
    TopicRecord,
)
from metadata.rpc import broker_pb2 as pb

TOPIC = random_uuid()


def image(fenced: set[int], isr: tuple[int, ...], leader: int = 1) -> MetadataImage:
    delta = MetadataDelta(EMPTY_IMAGE)
    offset = 0
    for broker in (1, 2, 3):
        delta.replay(RegisterBrokerRecord(broker, random_uuid(), 10 + broker, fenced=False),
                     offset, 1, 0)
        offset += 1
    for broker in sorted(fenced):
        delta.replay(BrokerRegistrationChangeRecord(broker, 10 + broker,
                                                    fenced=FencingChange.FENCE), offset, 1, 0)
        offset += 1
    delta.replay(TopicRecord("orders", TOPIC), offset, 1, 0)
    delta.replay(PartitionRecord(0, TOPIC, (1, 2, 3), isr, leader=leader), offset + 1, 1, 0)
    delta.replay(PartitionRecord(1, TOPIC, (2, 3, 1), (2,), leader=2), offset + 2, 1, 0)
    return delta.apply()


def test_a_leader_adds_active_replicas_in_replica_order() -> None:
    assert expansions(image(set(), (1,)), 1) == [(TOPIC, 0, (1, 2, 3))]
    assert expansions(image({3}, (1,)), 1) == [(TOPIC, 0, (1, 2))]
    assert expansions(image(set(), (1, 2, 3)), 1) == []
    # Only partitions it leads: broker 2 leads partition 1.
    assert expansions(image(set(), (1, 2, 3)), 2) == [(TOPIC, 1, (2, 3, 1))]


def test_the_expander_asks_once_per_change_of_active_brokers() -> None:
    async def scenario() -> None:
        sent: list[pb.AlterPartitionRequest] = []

        async def alter(request: pb.AlterPartitionRequest) -> pb.AlterPartitionResponse:
            sent.append(request)
            return pb.AlterPartitionResponse()

        expander = IsrExpander(1, alter, lambda: 11, lambda: True)
        shrunk = image({3}, (1, 2))
        expander.on_image(shrunk)
        await asyncio.sleep(0)
        assert sent == []  # broker 3 is fenced: nothing to add
        expander.on_image(shrunk)
        back = image(set(), (1, 2))
        expander.on_image(back)
        await asyncio.sleep(0)
        assert len(sent) == 1
        [topic] = sent[0].topics
        [partition] = topic.partitions
        assert [b.broker_id for b in partition.new_isr] == [1, 2, 3]
        assert [b.broker_epoch for b in partition.new_isr] == [11, 12, 13]
        assert sent[0].broker_epoch == 11
        expander.on_image(back)
        await asyncio.sleep(0)
        assert len(sent) == 1

    asyncio.run(scenario())
