"""What Kafka clients are told of brokers this broker found dead before the controller did."""

from __future__ import annotations

from broker.client_view import ClientView
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.records import Endpoint, PartitionRecord, RegisterBrokerRecord, TopicRecord

TOPIC_ID = "b0sJ5JiHR6qbTzmD8yaGyQ"


def image(epoch_of_2: int = 12) -> MetadataImage:
    delta = MetadataDelta(EMPTY_IMAGE)
    for offset, (broker, epoch) in enumerate(((1, 11), (2, epoch_of_2), (3, 13))):
        delta.replay(RegisterBrokerRecord(
            broker, f"inc{broker}", epoch, (Endpoint("PLAINTEXT", "h", 9000 + broker),),
            fenced=False), offset, 1, 0)
    delta.replay(TopicRecord("t", TOPIC_ID), 10, 1, 0)
    delta.replay(PartitionRecord(0, TOPIC_ID, (2, 1, 3), (2, 1, 3), leader=2), 11, 1, 0)
    return delta.apply()


def test_nothing_unreachable_is_the_image_itself() -> None:
    current = image()
    assert ClientView(lambda: current, {})() is current


def test_a_broker_found_dead_is_shown_fenced_until_it_registers_again() -> None:
    current = image()
    unreachable = {2: 12}
    view = ClientView(lambda: current, unreachable)
    shown = view()
    assert shown.cluster.brokers[2].fenced and not shown.cluster.brokers[1].fenced
    assert not current.cluster.brokers[2].fenced  # the broker's own image is untouched
    assert shown.topics is current.topics  # leadership stays the controller's
    assert view() is shown  # computed once per image and set
    # A new registration (a new process, a new epoch) is shown as the image has it.
    current = image(epoch_of_2=40)
    assert not view().cluster.brokers[2].fenced
