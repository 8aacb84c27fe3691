"""KafkaApis: one decoded request in, one Reply out (Kafka's KafkaApis, one module per API)."""

from __future__ import annotations

from collections.abc import Callable

from broker.api import DataPlane, Request
from broker.kafka.api_versions_api import handle_api_versions
from broker.kafka.codec import DecodedRequest
from broker.kafka.fetch_api import handle_fetch
from broker.kafka.metadata_api import handle_metadata
from broker.kafka.offsets_api import handle_list_offsets, handle_offset_for_leader_epoch
from broker.kafka.produce_api import handle_produce
from broker.kafka.producer_id_api import handle_init_producer_id
from broker.kafka.reply import Reply
from broker.kafka.versions import ApiKey
from metadata.image import MetadataImage


class UnsupportedApi(LookupError):
    """A request for an API this front does not serve (ApiVersions does not advertise it)."""


class KafkaApis:
    def __init__(
        self,
        data_plane: DataPlane,
        metadata_image: Callable[[], MetadataImage],
        cluster_id: str,
    ) -> None:
        self._data_plane = data_plane
        self._image = metadata_image
        self._cluster_id = cluster_id

    async def handle(self, request: DecodedRequest, context: Request) -> Reply:
        """The reply to a decoded request. Produce reaches the data plane before this
        coroutine first suspends (see produce_api)."""
        version, body = request.api_version, request.body
        match request.api_key:
            case ApiKey.PRODUCE:
                return await handle_produce(
                    self._data_plane, self._image(), context.listener, version, body
                )
            case ApiKey.FETCH:
                return await handle_fetch(
                    self._data_plane, self._image(), context.listener, version, body
                )
            case ApiKey.LIST_OFFSETS:
                return handle_list_offsets(self._data_plane, version, body)
            case ApiKey.METADATA:
                return handle_metadata(
                    self._image(), self._cluster_id, context.listener, version, body
                )
            case ApiKey.API_VERSIONS:
                return handle_api_versions(version, body)
            case ApiKey.INIT_PRODUCER_ID:
                return await handle_init_producer_id(self._data_plane, version, body)
            case ApiKey.OFFSET_FOR_LEADER_EPOCH:
                return handle_offset_for_leader_epoch(self._data_plane, version, body)
        raise UnsupportedApi(f"api key {request.api_key}")
