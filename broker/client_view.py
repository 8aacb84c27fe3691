"""The metadata as this broker tells Kafka clients.

It is the broker's image, except for brokers this broker has found dead before the controller
has: a follower whose fetch to its leader broke and whose reconnect was *refused* (no process
listens on the port — kill -9, crash) shows that leader as fenced, so Metadata answers name no
leader for its partitions (LEADER_NOT_AVAILABLE) and leave it out of the broker list. Clients
then wait for the next leader on their fast leader query instead of retrying a dead address
and, in librdkafka's case, falling into a one-second re-query after the dead broker vanishes
from a later answer together with the new leader. Only metadata answers change: leadership,
the ISR and fencing remain the controller's, and the mark goes away once the broker answers
again or registers anew (docs/data-plane.md, "Failover").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from types import MappingProxyType

from metadata.image import ClusterImage, MetadataImage


class ClientView:
    def __init__(self, image: Callable[[], MetadataImage],
                 unreachable: Mapping[int, int]) -> None:
        """`unreachable`: broker id -> the broker epoch it had when found dead (a new
        registration has a new epoch and is shown as the image has it)."""
        self._image = image
        self._unreachable = unreachable
        self._memo: tuple[MetadataImage, frozenset[tuple[int, int]], MetadataImage] | None = None

    def __call__(self) -> MetadataImage:
        image = self._image()
        if not self._unreachable:
            return image
        key = frozenset(self._unreachable.items())
        if self._memo is not None and self._memo[0] is image and self._memo[1] == key:
            return self._memo[2]
        brokers = dict(image.cluster.brokers)
        for broker_id, epoch in key:
            registration = brokers.get(broker_id)
            if registration is not None and registration.epoch == epoch \
                    and not registration.fenced:
                brokers[broker_id] = replace(registration, fenced=True)
        view = replace(image, cluster=ClusterImage(MappingProxyType(brokers)))
        self._memo = (image, key, view)
        return view
