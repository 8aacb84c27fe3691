"""WriteTxnMarkers (API 27, v1): the transaction coordinator's COMMIT/ABORT markers for the
partitions this broker leads (docs/transactions.md), written by broker/replica/txn_markers.py
and answered per partition once replicated.

Authorization (Kafka): CLUSTER_ACTION on the cluster, else every partition is
CLUSTER_AUTHORIZATION_FAILED (brokers are super users)."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from broker.kafka.authorization import ALLOW_ALL, RequestAuthorization
from broker.kafka.codec import build, error_code, response_module
from broker.kafka.reply import Reply
from broker.kafka.versions import ApiKey
from broker.replica.txn_markers import MarkerResults, TxnMarker
from kraft.errors import Errors
from metadata.authorizer.model import AclOperation


@runtime_checkable
class MarkerWriter(Protocol):
    """What the handler needs of the data plane (broker/replica/manager.py)."""

    async def write_txn_markers(self, markers: list[TxnMarker]) -> list[MarkerResults]: ...


def markers_of(request: Any) -> list[TxnMarker]:
    return [TxnMarker(
        int(marker.producer_id), int(marker.producer_epoch), bool(marker.transaction_result),
        int(marker.coordinator_epoch),
        tuple((str(topic.name), int(index)) for topic in marker.topics
              for index in topic.partition_indexes))
        for marker in request.markers]


async def handle_write_txn_markers(data_plane: object, version: int, request: Any,
                                   auth: RequestAuthorization = ALLOW_ALL) -> Reply:
    markers = markers_of(request)
    if not auth.cluster(AclOperation.CLUSTER_ACTION):
        answers = [dict.fromkeys(m.partitions, int(Errors.CLUSTER_AUTHORIZATION_FAILED))
                   for m in markers]
    elif not isinstance(data_plane, MarkerWriter):
        answers = [dict.fromkeys(m.partitions, int(Errors.UNSUPPORTED_VERSION))
                   for m in markers]
    else:
        answers = await data_plane.write_txn_markers(markers)
    module = response_module(ApiKey.WRITE_TXN_MARKERS, version)
    results = []
    for marker, answer in zip(markers, answers, strict=True):
        by_topic: dict[str, list[Any]] = {}
        for (topic, partition), code in answer.items():
            by_topic.setdefault(topic, []).append(build(
                module, "WritableTxnMarkerPartitionResult", partition_index=partition,
                error_code=error_code(code)))
        results.append(build(
            module, "WritableTxnMarkerResult", producer_id=marker.producer_id,
            topics=tuple(build(module, "WritableTxnMarkerTopicResult", name=topic,
                               partitions=tuple(parts)) for topic, parts in by_topic.items())))
    return Reply(build(module, "WriteTxnMarkersResponse", markers=tuple(results)))
