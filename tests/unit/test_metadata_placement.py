"""Replica placement: the seed rule, racks, and Kafka's placer errors."""

from __future__ import annotations

from collections.abc import Iterable

import pytest

from kraft.errors import Errors
from metadata.errors import ControllerApiError
from metadata.image import BrokerRegistration, MetadataImage
from metadata.placement import place_replicas, rack_alternated
from metadata.records import BrokerRegistrationChangeRecord
from tests.unit.test_metadata_helpers import cluster, epoch_of, replay


def brokers(image: MetadataImage) -> Iterable[BrokerRegistration]:
    return image.cluster.brokers.values()


def test_seed_rule_stripes_first_replicas() -> None:
    image = cluster([3, 1, 2, 4])
    assert place_replicas(brokers(image), 4, 3) == [
        (1, 2, 3), (2, 3, 4), (3, 4, 1), (4, 1, 2),
    ]
    assert place_replicas(brokers(image), 2, 2, start=2) == [(3, 4), (4, 1)]


def test_racks_alternate() -> None:
    image = cluster([1, 2, 3, 4, 5, 6], racks={1: "a", 2: "a", 3: "b", 4: "b", 5: "c", 6: "c"})
    assert rack_alternated(brokers(image)) == [1, 3, 5, 2, 4, 6]
    for replicas in place_replicas(brokers(image), 6, 3):
        racks = {image.cluster.brokers[b].rack for b in replicas}
        assert racks == {"a", "b", "c"}


def test_fenced_brokers_only_fill_what_live_ones_cannot() -> None:
    image = cluster([1, 2, 3], fenced=[2])
    assert place_replicas(brokers(image), 2, 2) == [(1, 3), (3, 1)]
    # RF 3 needs the fenced broker: it comes last, never first.
    assert place_replicas(brokers(image), 2, 3) == [(1, 3, 2), (3, 1, 2)]


def test_controlled_shutdown_brokers_are_not_used() -> None:
    image = replay(cluster([1, 2, 3]), [
        BrokerRegistrationChangeRecord(3, epoch_of(3), in_controlled_shutdown=1)])
    assert place_replicas(brokers(image), 2, 2) == [(1, 2), (2, 1)]
    with pytest.raises(ControllerApiError, match="only 2 broker"):
        place_replicas(brokers(image), 1, 3)


@pytest.mark.parametrize(
    ("fenced", "rf", "message"),
    [
        ((), 4, "The target replication factor of 4 cannot be reached because only 3 broker(s) "
                "are registered."),
        ((1, 2, 3), 1, "All brokers are currently fenced."),
        ((), 0, "Invalid replication factor 0: the replication factor must be positive."),
    ],
)
def test_kafkas_placer_errors(fenced: tuple[int, ...], rf: int, message: str) -> None:
    with pytest.raises(ControllerApiError) as raised:
        place_replicas(brokers(cluster(fenced=fenced)), 1, rf)
    assert raised.value.error is Errors.INVALID_REPLICATION_FACTOR
    assert raised.value.message == message
