"""Broker lifecycle at the controller (spec §2): registration, heartbeats and session expiry.

Registrations, fencing and controlled shutdown are records. What is *not* in the log is the
soft state of the heartbeat manager: when each broker was last heard from, the metadata offset
it reported, and where its controlled shutdown began. A new active controller starts it afresh,
as if every broker had just sent a heartbeat, so fencing after a failover takes up to one full
session timeout (Kafka does the same).

Unlike Kafka, that assumed contact does not make a new incarnation's registration a duplicate:
only a heartbeat this controller received from the registered incarnation does. Otherwise a
restarted broker is refused (DUPLICATE_BROKER_REGISTRATION) for as long as controllers keep
failing over within a session timeout of each other, each restarting the dead incarnation's
session; the chaos campaign saw 83 s of it, and the broker gave up registering and exited.
A live registered broker heartbeats a new controller within its heartbeat interval, so a
second live broker with the same id is still refused after that; before it, the newcomer wins,
the old one's heartbeats are refused as stale and its own registration is then the duplicate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum

from kraft.errors import Errors
from metadata.errors import ControllerApiError, ControllerResult
from metadata.image import MetadataImage
from metadata.records import Endpoint, Record, RegisterBrokerRecord
from metadata.replication import (
    begin_controlled_shutdown,
    fence_broker,
    remove_from_isrs,
    unfence_broker,
)


@dataclass(frozen=True, slots=True)
class BrokerRegistrationRequest:
    broker_id: int
    cluster_id: str
    incarnation_id: str
    endpoints: tuple[Endpoint, ...]
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool
    want_shutdown: bool


@dataclass(frozen=True, slots=True)
class BrokerHeartbeatReply:
    is_caught_up: bool
    is_fenced: bool
    in_controlled_shutdown: bool
    should_shutdown: bool


class BrokerControlState(Enum):
    FENCED = "FENCED"
    UNFENCED = "UNFENCED"
    CONTROLLED_SHUTDOWN = "CONTROLLED_SHUTDOWN"
    SHUTDOWN_NOW = "SHUTDOWN_NOW"


@dataclass
class _Contact:
    last_contact_ms: int
    metadata_offset: int = -1
    heard: bool = False  # a heartbeat reached this controller (not only assumed at activation)
    controlled_shutdown_offset: int | None = None


@dataclass
class BrokerHeartbeatManager:
    """Soft state: last contact and reported metadata offset of every registered broker.
    Times are milliseconds on the controller's monotonic session clock, never the wall
    clock (a step of it would fence every broker, or none)."""

    session_timeout_ms: int = 9000
    _contacts: dict[int, _Contact] = field(default_factory=dict)

    def reset(self, image: MetadataImage, now_ms: int) -> None:
        """On activation: every registered broker counts as just heard from."""
        self._contacts = {b: _Contact(now_ms) for b in image.cluster.brokers}

    def touch(self, broker_id: int, now_ms: int, metadata_offset: int) -> None:
        contact = self._contacts.setdefault(broker_id, _Contact(now_ms))
        contact.last_contact_ms = now_ms
        contact.heard = True
        contact.metadata_offset = max(contact.metadata_offset, metadata_offset)

    def has_valid_session(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        registration = image.cluster.broker(broker_id)
        contact = self._contacts.get(broker_id)
        if registration is None or registration.fenced or contact is None:
            return False
        return contact.last_contact_ms + self.session_timeout_ms >= now_ms

    def heard_alive(self, image: MetadataImage, broker_id: int, now_ms: int) -> bool:
        """A valid session this controller heard a heartbeat for: the registered incarnation
        is alive, and another incarnation's registration is a duplicate."""
        contact = self._contacts.get(broker_id)
        return contact is not None and contact.heard \
            and self.has_valid_session(image, broker_id, now_ms)

    def stale_broker(self, image: MetadataImage, now_ms: int) -> int | None:
        """The unfenced broker heard from longest ago whose session expired (one at a time, so
        the effect of each fencing is visible before the next)."""
        stale = [
            (contact.last_contact_ms, broker_id)
            for broker_id, contact in self._contacts.items()
            if (registration := image.cluster.broker(broker_id)) is not None
            and not registration.fenced
            and contact.last_contact_ms + self.session_timeout_ms < now_ms
        ]
        return min(stale)[1] if stale else None

    def note_controlled_shutdown(self, broker_id: int, offset: int) -> None:
        contact = self._contacts.get(broker_id)
        if contact is not None and contact.controlled_shutdown_offset is None:
            contact.controlled_shutdown_offset = offset

    def controlled_shutdown_settled(self, image: MetadataImage, broker_id: int) -> bool:
        """Every active broker has seen the records that moved this broker's leaderships."""
        contact = self._contacts.get(broker_id)
        if contact is None or contact.controlled_shutdown_offset is None:
            return False
        offsets = [
            self._contacts[b].metadata_offset
            for b in image.cluster.active_broker_ids()
            if b in self._contacts and b != broker_id
        ]
        return all(o >= contact.controlled_shutdown_offset for o in offsets)


def register_broker(
    image: MetadataImage,
    request: BrokerRegistrationRequest,
    cluster_id: str,
    next_offset: int,
    heartbeats: BrokerHeartbeatManager,
    now_ms: int,
) -> ControllerResult[int]:
    """Kafka's registerBroker: the broker epoch is the offset its record will get (after the
    records that shut the previous incarnation down, when there was one)."""
    if request.cluster_id != cluster_id:
        raise ControllerApiError(
            Errors.INCONSISTENT_CLUSTER_ID,
            f"Expected cluster ID {cluster_id}, but got cluster ID {request.cluster_id}",
        )
    existing = image.cluster.broker(request.broker_id)
    shutdown: tuple[Record, ...] = ()
    if existing is not None and existing.incarnation_id == request.incarnation_id:
        # A re-sent registration: same epoch and state, endpoints may be amended.
        epoch, fenced, in_cs = existing.epoch, existing.fenced, existing.in_controlled_shutdown
    else:
        if existing is not None and heartbeats.heard_alive(image, request.broker_id, now_ms):
            raise ControllerApiError(
                Errors.DUPLICATE_BROKER_REGISTRATION,
                "Another broker is registered with that broker id.",
            )
        if existing is not None:
            # Kafka's handleBrokerShutdown for the old incarnation, in the same batch: out of
            # every ISR, its leaderships moved with new epochs. Otherwise a restarted leader
            # that lost its unflushed tail would lead again in its old epoch, and followers
            # would truncate acknowledged records to match it.
            shutdown = remove_from_isrs(image, request.broker_id)
        epoch, fenced, in_cs = next_offset + len(shutdown), True, False
    record = RegisterBrokerRecord(
        broker_id=request.broker_id,
        incarnation_id=request.incarnation_id,
        broker_epoch=epoch,
        endpoints=request.endpoints,
        rack=request.rack,
        fenced=fenced,
        in_controlled_shutdown=in_cs,
    )
    return ControllerResult((*shutdown, record), epoch)


def _current_state(image: MetadataImage, broker_id: int) -> BrokerControlState:
    registration = image.cluster.brokers[broker_id]
    if registration.fenced:
        return BrokerControlState.FENCED
    if registration.in_controlled_shutdown:
        return BrokerControlState.CONTROLLED_SHUTDOWN
    return BrokerControlState.UNFENCED


def next_broker_state(
    image: MetadataImage,
    request: BrokerHeartbeatRequest,
    heartbeats: BrokerHeartbeatManager,
) -> tuple[BrokerControlState, BrokerControlState]:
    """(current, next) per Kafka's BrokerHeartbeatManager.calculateNextBrokerState."""
    current = _current_state(image, request.broker_id)
    registration = image.cluster.brokers[request.broker_id]
    leads = image.leads_any_partition(request.broker_id)
    S = BrokerControlState
    if current is S.FENCED:
        if request.want_shutdown:
            return current, S.SHUTDOWN_NOW
        caught_up = request.current_metadata_offset >= registration.registration_offset
        return current, S.UNFENCED if not request.want_fence and caught_up else S.FENCED
    if current is S.UNFENCED:
        if request.want_fence:
            return current, S.SHUTDOWN_NOW if request.want_shutdown else S.FENCED
        if request.want_shutdown:
            return current, S.CONTROLLED_SHUTDOWN if leads else S.SHUTDOWN_NOW
        return current, S.UNFENCED
    if leads or not heartbeats.controlled_shutdown_settled(image, request.broker_id):
        return current, S.CONTROLLED_SHUTDOWN
    return current, S.SHUTDOWN_NOW


def process_heartbeat(
    image: MetadataImage,
    request: BrokerHeartbeatRequest,
    heartbeats: BrokerHeartbeatManager,
    now_ms: int,
) -> ControllerResult[BrokerHeartbeatReply]:
    registration = image.cluster.broker(request.broker_id)
    if registration is None:
        raise ControllerApiError(
            Errors.STALE_BROKER_EPOCH,
            f"No broker registration found for broker id {request.broker_id}",
        )
    if registration.epoch != request.broker_epoch:
        raise ControllerApiError(
            Errors.STALE_BROKER_EPOCH,
            f"Expected broker epoch {registration.epoch}, but got broker epoch "
            f"{request.broker_epoch}",
        )
    heartbeats.touch(request.broker_id, now_ms, request.current_metadata_offset)
    current, nxt = next_broker_state(image, request, heartbeats)
    records: tuple[Record, ...] = ()
    S = BrokerControlState
    if nxt != current:
        if nxt in (S.FENCED, S.SHUTDOWN_NOW) and current is not S.FENCED:
            records = fence_broker(image, request.broker_id).records
        elif nxt is S.UNFENCED:
            records = unfence_broker(image, request.broker_id).records
        elif nxt is S.CONTROLLED_SHUTDOWN:
            records = begin_controlled_shutdown(image, request.broker_id).records
    reply = BrokerHeartbeatReply(
        is_caught_up=request.current_metadata_offset >= registration.registration_offset,
        is_fenced=nxt in (S.FENCED, S.SHUTDOWN_NOW),
        in_controlled_shutdown=nxt is S.CONTROLLED_SHUTDOWN,
        should_shutdown=nxt is S.SHUTDOWN_NOW,
    )
    return ControllerResult(records, reply, atomic=False)
