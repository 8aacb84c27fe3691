"""Broker registration rules (metadata/brokers.py), checked by replaying the records each rule
produces: a new incarnation first shuts the old one down (Kafka's handleBrokerShutdown)."""

from __future__ import annotations

import pytest

from kraft.errors import Errors
from metadata.brokers import (
    BrokerHeartbeatManager,
    BrokerRegistrationRequest,
    register_broker,
)
from metadata.errors import ControllerApiError
from metadata.image import MetadataImage, PartitionRegistration
from metadata.records import NO_LEADER, PartitionChangeRecord, RegisterBrokerRecord
from metadata.replication import unfence_broker
from tests.unit.test_metadata_helpers import FOO, INCARNATION, cluster, commit, with_topic

NEW_INCARNATION = "Zq3xWmHkT1y1yQpS2Hc0Xg"
SESSION_MS = 9000


def foo_cluster() -> MetadataImage:
    """Brokers 1-3, unfenced; foo-0 on [1,2,3] led by 1, foo-1 on [2,3,1] led by 2, foo-2 on
    [1] only (led by 1)."""
    return with_topic(cluster([1, 2, 3]), "foo", FOO, [[1, 2, 3], [2, 3, 1], [1]])


def foo(image: MetadataImage, partition_id: int) -> PartitionRegistration:
    partition = image.partition(FOO, partition_id)
    assert partition is not None
    return partition


def expired_session() -> BrokerHeartbeatManager:
    """Broker 1 last heard from at 0: its session expired at SESSION_MS, but the controller
    has not fenced it yet (its registration still says unfenced)."""
    heartbeats = BrokerHeartbeatManager(SESSION_MS)
    heartbeats.touch(1, 0, 0)
    return heartbeats


def test_a_restarted_incarnation_never_leads_in_its_old_epoch() -> None:
    """Issue 28, defect 2: the registration of a new incarnation carries, in the same atomic
    batch and before it, the records that take the old incarnation out of every ISR and
    move its leaderships to new epochs. Without them the restarted broker (which may have
    lost its unflushed tail) would find itself leader in the old epoch."""
    image = foo_cluster()
    old_epochs = {p: foo(image, p).leader_epoch for p in range(3)}
    next_offset = image.provenance.offset + 1
    request = BrokerRegistrationRequest(1, "c", NEW_INCARNATION, ())
    result = register_broker(image, request, "c", next_offset, expired_session(),
                             SESSION_MS + 1)
    after = commit(image, result)
    for p in (0, 2):  # the partitions it led: new epochs, other leaders or none
        partition = foo(after, p)
        assert partition.leader != 1 and partition.leader_epoch > old_epochs[p]
    assert 1 not in foo(after, 0).isr and 1 not in foo(after, 1).isr

    assert result.atomic
    assert result.records[:3] == (
        PartitionChangeRecord(0, FOO, isr=(2, 3), leader=2),
        PartitionChangeRecord(1, FOO, isr=(2, 3)),
        PartitionChangeRecord(2, FOO, leader=NO_LEADER),  # sole ISR member: ISR stays [1]
    )
    registration = result.records[3]
    assert isinstance(registration, RegisterBrokerRecord)
    assert (registration.incarnation_id, registration.fenced) == (NEW_INCARNATION, True)
    # The epoch is still the offset of the registration record.
    assert result.response == registration.broker_epoch == next_offset + 3
    assert after.cluster.brokers[1].registration_offset == result.response

    # Once unfenced it leads again only through a new election, in a newer epoch still.
    led = foo(commit(after, unfence_broker(after, 1)), 2)
    assert (led.leader, led.leader_epoch) == (1, old_epochs[2] + 2)


def test_a_resent_registration_or_a_first_one_writes_only_the_registration() -> None:
    image = foo_cluster()
    same = BrokerRegistrationRequest(1, "c", INCARNATION, ())
    result = register_broker(image, same, "c", 500, expired_session(), SESSION_MS + 1)
    assert len(result.records) == 1 and result.response == image.cluster.brokers[1].epoch
    first = BrokerRegistrationRequest(4, "c", NEW_INCARNATION, ())
    result = register_broker(image, first, "c", 500, expired_session(), SESSION_MS + 1)
    assert len(result.records) == 1 and result.response == 500


def test_only_a_heartbeat_heard_here_makes_a_new_incarnation_a_duplicate() -> None:
    """A new active controller assumes every broker was just heard from (its sessions start
    afresh), but that assumption alone does not refuse a restarted broker: with controllers
    failing over every few seconds the dead incarnation's session never ran out, and the
    restarted broker was refused for 83 s (chaos seed 129294) until it gave up and exited."""
    image = foo_cluster()
    restarted = BrokerRegistrationRequest(1, "c", NEW_INCARNATION, ())
    heartbeats = BrokerHeartbeatManager(SESSION_MS)
    heartbeats.reset(image, 0)  # activation: broker 1's session is valid until SESSION_MS
    assert heartbeats.has_valid_session(image, 1, 1000)
    result = register_broker(image, restarted, "c", 500, heartbeats, 1000)
    registration = result.records[-1]
    assert isinstance(registration, RegisterBrokerRecord)
    assert registration.incarnation_id == NEW_INCARNATION

    # A heartbeat of the registered incarnation reached this controller: it is alive.
    heartbeats.touch(1, 2000, 0)
    with pytest.raises(ControllerApiError) as duplicate:
        register_broker(image, restarted, "c", 500, heartbeats, 2000 + SESSION_MS)
    assert duplicate.value.error == Errors.DUPLICATE_BROKER_REGISTRATION
    # Once its session ran out, the new incarnation is taken.
    assert register_broker(image, restarted, "c", 500, heartbeats, 2001 + SESSION_MS).records
