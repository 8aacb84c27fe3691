"""Fetch (API 1, v4-16) for consumers and followers.

Topics are named by id from v13: an id missing from the metadata image answers
UNKNOWN_TOPIC_ID. Fetch sessions (KIP-227, v7+; broker/replica/fetch_sessions.py): a full
fetch with epoch 0 may get a session id, and the client's incremental fetches then list only
what changed and are answered with only what changed (the leader's read:
broker/replica/incremental_fetch.py). Epoch -1 is a fetch without a session (librdkafka
always sends that) or closes the named one. Without a session cache (`sessions` None) every
answer carries session_id 0, "no session, full data", and a request naming a session is
answered FETCH_SESSION_ID_NOT_FOUND, so the client falls back to full fetches.

Authorization (Kafka's handleFetchRequest): a consumer needs READ on each topic
(TOPIC_AUTHORIZATION_FAILED on its partitions); a fetch naming a replica (replica_id >= 0, or
ReplicaState from v15) needs CLUSTER_ACTION on the cluster, and without it every partition is
refused and nothing reaches the replica manager: a client posing as a follower would otherwise
move the high watermark of partitions it does not hold. An incremental fetch is authorized
again on every partition of its session, as Kafka does; a replica's fetch refused
CLUSTER_ACTION never opens, closes or advances a session.

Client quotas (`quotas`, broker/quotas/): a consumer asks at most the bytes its
consumer_byte_rate allows in one quota window, and once read, its answer's bytes and the
request's loop time are recorded; throttled by either, it is answered empty with the throttle
time (Kafka's getThrottledResponse): no session is created, and an incremental fetch's
partitions are answered again next time. A replica's fetch is exempt."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from broker.api import (
    CONSUMER_REPLICA_ID,
    DataPlane,
    FetchParams,
    FetchPartition,
    FetchPartitionResult,
)
from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.metadata_api import node_endpoints
from broker.kafka.reply import NO_THROTTLE, Reply, millis, throttled
from broker.kafka.request_metrics import TopicStats
from broker.kafka.topic_ids import from_wire, to_wire
from broker.kafka.versions import ApiKey
from broker.quotas import RequestQuotas
from broker.replica.fetch_sessions import (
    FINAL_EPOCH,
    INITIAL_EPOCH,
    INVALID_SESSION_ID,
    CachedPartition,
    FullFetch,
    IncrementalFetch,
    PartitionKey,
    SessionError,
)
from broker.replica.incremental_fetch import FetchSessions
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation
from metadata.image import MetadataImage

TOPIC_IDS_VERSION = 13
REPLICA_STATE_VERSION = 15
NO_SESSION = INVALID_SESSION_ID


def replica_of(version: int, request: Any) -> tuple[int, int]:
    """(replica id, replica epoch) the fetch names; replica ids < 0 are consumers."""
    if version >= REPLICA_STATE_VERSION:
        return request.replica_state.replica_id, request.replica_state.replica_epoch
    return request.replica_id, -1


def fetch_params(version: int, request: Any, image: MetadataImage,
                 may_read: Callable[[str], bool] | None) -> tuple[
    FetchParams, list[tuple[Any, int, FetchPartitionResult | None]]
]:
    """The data plane's parameters for the partitions it can be asked about, and the request's
    (topic key, partition, result known already or None) in order: the key is the name
    before v13 and the wire id from v13. A topic `may_read` refuses is
    TOPIC_AUTHORIZATION_FAILED; with `may_read` None, every partition is."""
    by_id = version >= TOPIC_IDS_VERSION
    readable: dict[str, bool] = {}
    asked: list[tuple[Any, int, FetchPartitionResult | None]] = []
    partitions: list[FetchPartition] = []
    for topic in request.topics:
        key = topic.topic_id if by_id else topic.topic
        name: str | None = key
        topic_id: str | None = None
        if by_id:
            topic_id = from_wire(key)
            topic_image = image.topic_by_id(topic_id)
            name = topic_image.name if topic_image is not None else None
        if name is not None and name not in readable:
            readable[name] = may_read is not None and may_read(name)
        for p in topic.partitions:
            if name is None and may_read is not None:
                unknown = FetchPartitionResult(error=Errors.UNKNOWN_TOPIC_ID)
                asked.append((key, p.partition, unknown))
                continue
            if name is None or not readable[name]:
                refused = FetchPartitionResult(error=Errors.TOPIC_AUTHORIZATION_FAILED)
                asked.append((key, p.partition, refused))
                continue
            asked.append((key, p.partition, None))
            partitions.append(FetchPartition(
                topic=name,
                partition=p.partition,
                fetch_offset=p.fetch_offset,
                partition_max_bytes=p.partition_max_bytes,
                current_leader_epoch=getattr(p, "current_leader_epoch", -1),
                last_fetched_epoch=getattr(p, "last_fetched_epoch", -1),
                log_start_offset=getattr(p, "log_start_offset", -1),
                topic_id=topic_id,
            ))
    replica_id, replica_epoch = replica_of(version, request)
    params = FetchParams(
        partitions=partitions,
        max_wait_ms=millis(request.max_wait),
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=request.isolation_level,
        replica_id=replica_id if replica_id >= 0 else CONSUMER_REPLICA_ID,
        replica_epoch=replica_epoch,
    )
    return params, asked


async def handle_fetch(
    data_plane: DataPlane, image: MetadataImage, listener: str, version: int, request: Any,
    auth: RequestAuthorization = ALLOW_ALL, sessions: FetchSessions | None = None,
    quotas: RequestQuotas | None = None, stats: TopicStats | None = None,
) -> Reply:
    module = response_module(ApiKey.FETCH, version)
    session_id = getattr(request, "session_id", NO_SESSION)
    session_epoch = getattr(request, "session_epoch", FINAL_EPOCH)  # v4-6: no sessions
    may_read: Callable[[str], bool] | None
    if replica_of(version, request)[0] >= 0:
        allowed = auth.cluster(AclOperation.CLUSTER_ACTION)
        may_read = (lambda name: True) if allowed else None
        if quotas is not None:
            quotas.exempt()  # replication is not a client: no client quota applies
            quotas = None
    else:
        may_read = lambda name: auth.topic(AclOperation.READ, name)  # noqa: E731
    requested: list[CachedPartition] = []
    if sessions is None or may_read is None:
        if session_epoch not in (INITIAL_EPOCH, FINAL_EPOCH):  # an incremental fetch
            return _session_error(module, Errors.FETCH_SESSION_ID_NOT_FOUND, NO_SESSION)
        context = None  # a full fetch: answered in full, without a session
    else:
        requested = _requested(version, request, image)
        context = sessions.cache.new_context(
            version, session_id, session_epoch, replica_of(version, request)[0] >= 0,
            requested, _forgotten(version, request), sessions.clock_ms())
        if isinstance(context, SessionError):
            return _session_error(module, context.error, NO_SESSION)
        if isinstance(context, IncrementalFetch):
            return await _incremental(sessions, context, module, image, listener, version,
                                      request, may_read, quotas, stats)
    params, asked = fetch_params(version, request, image, may_read)
    params = _within_quota(params, quotas)
    results = await data_plane.fetch(params) if params.partitions else []
    fetched = iter(results)
    answered = [(key, index, known if known is not None else next(fetched))
                for key, index, known in asked]
    throttle = _throttle_ms(quotas, (result for _, _, result in answered))
    if throttle > 0:
        return throttled(_response(module, image, listener, version, NO_SESSION, [],
                                   params.isolation_level), throttle)
    if stats is not None:
        stats.fetched(params.from_follower, zip(
            (p.topic for p in params.partitions), results, strict=True))
    new_session = NO_SESSION
    if isinstance(context, FullFetch) and answered:
        assert sessions is not None
        for c, (_, _, result) in zip(requested, answered, strict=True):
            c.must_respond(result)  # what the session's client now knows
        new_session = sessions.cache.maybe_create_session(
            sessions.clock_ms(), context.privileged, context.uses_topic_ids, requested,
            params.replica_id)
    return _response(module, image, listener, version, new_session, answered,
                     params.isolation_level)


async def _incremental(sessions: FetchSessions, context: IncrementalFetch, module: Any,
                       image: MetadataImage, listener: str, version: int, request: Any,
                       may_read: Callable[[str], bool], quotas: RequestQuotas | None,
                       stats: TopicStats | None) -> Reply:
    """An incremental fetch: the session's partitions with something new."""
    replica_id, replica_epoch = replica_of(version, request)
    params = _within_quota(FetchParams(
        partitions=(), max_wait_ms=millis(request.max_wait), min_bytes=request.min_bytes,
        max_bytes=request.max_bytes, isolation_level=request.isolation_level,
        replica_id=replica_id if replica_id >= 0 else CONSUMER_REPLICA_ID,
        replica_epoch=replica_epoch), quotas)
    by_id = context.session.uses_topic_ids
    out = await sessions.read(context, params, _refusal(image, may_read, by_id))
    if isinstance(out, int):
        return _session_error(module, out, context.session.id)
    throttle = _throttle_ms(quotas, (result for _, result in out))
    if throttle > 0:
        for c, _ in out:
            c.high_watermark = -1  # the client was told nothing: answer it again next time
        return throttled(_response(module, image, listener, version, context.session.id, [],
                                   params.isolation_level), throttle)
    if stats is not None:
        stats.fetched(params.from_follower, ((c.topic, result) for c, result in out))
    answered = [(to_wire(c.topic_id) if by_id and c.topic_id is not None else c.topic,
                 c.partition, result) for c, result in out]
    return _response(module, image, listener, version, context.session.id, answered,
                     params.isolation_level)


def _within_quota(params: FetchParams, quotas: RequestQuotas | None) -> FetchParams:
    """A consumer asks at most what its quota allows in one window (Kafka's
    getMaxValueInQuotaWindow), so that no single answer is throttled for sure."""
    most = quotas.fetch_max_bytes() if quotas is not None else None
    if most is None or most >= params.max_bytes:
        return params
    return replace(params, max_bytes=most, min_bytes=min(params.min_bytes, most))


def _throttle_ms(quotas: RequestQuotas | None, results: Iterable[FetchPartitionResult]) -> int:
    """The answer's throttle: its records' bytes and the request's loop time recorded."""
    if quotas is None:
        return 0
    return quotas.fetch_throttle_ms(sum(len(result.records) for result in results))


def _refusal(image: MetadataImage, may_read: Callable[[str], bool], by_id: bool
             ) -> Callable[[CachedPartition], int | None]:
    """The same rule as fetch_params for a session's partitions, decided once per topic
    per fetch: an id the image does not know is UNKNOWN_TOPIC_ID, a topic `may_read`
    refuses is TOPIC_AUTHORIZATION_FAILED. Resolves a session partition's topic name."""
    decided: dict[str | None, tuple[str | None, int | None]] = {}

    def decide(key: str | None) -> tuple[str | None, int | None]:
        name: str | None = key
        if by_id:
            topic = image.topic_by_id(key) if key is not None else None
            name = topic.name if topic is not None else None
        if name is None:
            return None, Errors.UNKNOWN_TOPIC_ID
        return name, None if may_read(name) else Errors.TOPIC_AUTHORIZATION_FAILED

    def refusal(c: CachedPartition) -> int | None:
        key = c.topic_id if by_id else c.topic
        decision = decided.get(key)
        if decision is None:
            decision = decided[key] = decide(key)
        if by_id and decision[0] is not None:
            c.topic = decision[0]
        return decision[1]

    return refusal


def _requested(version: int, request: Any, image: MetadataImage) -> list[CachedPartition]:
    """The request's partitions as session entries, in request order."""
    by_id = version >= TOPIC_IDS_VERSION
    out = []
    for topic in request.topics:
        topic_id: str | None = None
        name: str | None = topic.topic if not by_id else None
        if by_id:
            topic_id = from_wire(topic.topic_id)
            topic_image = image.topic_by_id(topic_id)
            name = topic_image.name if topic_image is not None else None
        for p in topic.partitions:
            out.append(CachedPartition(
                name, topic_id, p.partition, p.fetch_offset, p.partition_max_bytes,
                getattr(p, "current_leader_epoch", -1), getattr(p, "last_fetched_epoch", -1),
                getattr(p, "log_start_offset", -1)))
    return out


def _forgotten(version: int, request: Any) -> list[PartitionKey]:
    by_id = version >= TOPIC_IDS_VERSION
    return [(from_wire(topic.topic_id) if by_id else topic.topic, int(p))
            for topic in getattr(request, "forgotten_topics_data", None) or ()
            for p in topic.partitions]


def _session_error(module: Any, error: int, session_id: int) -> Reply:
    return Reply(build(
        module, "FetchResponse", throttle_time=NO_THROTTLE, error_code=error_code(error),
        session_id=session_id, responses=(),
    ))


def _response(module: Any, image: MetadataImage, listener: str, version: int, session_id: int,
              answered: list[tuple[Any, int, FetchPartitionResult]], isolation: int) -> Reply:
    by_topic: dict[Any, list[Any]] = {}
    leaders: list[int] = []
    for key, index, result in answered:
        if result.current_leader is not None:
            leaders.append(result.current_leader[0])
        by_topic.setdefault(key, []).append(_partition_data(module, index, result, isolation))
    topic_field = "topic_id" if version >= TOPIC_IDS_VERSION else "topic"
    responses = tuple(
        build(module, "FetchableTopicResponse", partitions=tuple(parts), **{topic_field: key})
        for key, parts in by_topic.items()
    )
    return Reply(build(
        module, "FetchResponse", throttle_time=NO_THROTTLE, error_code=error_code(Errors.NONE),
        session_id=session_id, responses=responses,
        node_endpoints=node_endpoints(module, image, leaders, listener),
    ))


def _partition_data(module: Any, index: int, result: FetchPartitionResult, isolation: int) -> Any:
    fields: dict[str, Any] = {}
    if result.diverging_epoch is not None:
        fields["diverging_epoch"] = build(
            module, "EpochEndOffset", epoch=result.diverging_epoch.epoch,
            end_offset=result.diverging_epoch.end_offset,
        )
    if result.current_leader is not None:
        fields["current_leader"] = build(
            module, "LeaderIdAndEpoch", leader_id=result.current_leader[0],
            leader_epoch=result.current_leader[1],
        )
    return build(
        module, "PartitionData", partition_index=index, error_code=error_code(result.error),
        high_watermark=result.high_watermark, last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        # read_committed readers get the aborted transactions the records overlap (a list,
        # maybe empty); others get null.
        aborted_transactions=tuple(
            build(module, "AbortedTransaction", producer_id=producer_id,
                  first_offset=first_offset)
            for producer_id, first_offset in result.aborted_transactions)
        if isolation == 1 else None,
        preferred_read_replica=-1, records=result.records, **fields,
    )
