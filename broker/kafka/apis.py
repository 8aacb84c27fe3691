"""KafkaApis: one decoded request in, one Reply out (Kafka's KafkaApis, one module per API).

Every request is authorized with the connection's principal before it touches state, each
handler as Kafka's (broker/kafka/authorization.py's API_AUTHORIZATION says what each needs).
With client quotas (broker/quotas/), each request's loop time, a Produce's bytes and a Fetch's
answer are recorded against its user and client id, and the throttle they earn goes in the
answer (broker/quotas/request_quotas.py says which counts where). With `metrics`
(broker/kafka/request_metrics.py), each request's latency is observed per API and the produce
and fetch handlers count their records' bytes per topic."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from broker.api import DataPlane, Request
from broker.group.storage import GroupStorage
from broker.kafka.acls_api import handle_create_acls, handle_delete_acls, handle_describe_acls
from broker.kafka.admin_auto_create import AutoTopicCreator
from broker.kafka.admin_cluster_api import (
    handle_alter_partition_reassignments,
    handle_describe_cluster,
    handle_elect_leaders,
    handle_list_partition_reassignments,
)
from broker.kafka.admin_common import AdminBackend
from broker.kafka.admin_configs_api import (
    handle_alter_configs,
    handle_describe_configs,
    handle_incremental_alter_configs,
)
from broker.kafka.admin_log_api import LogDirs, handle_delete_records, handle_describe_log_dirs
from broker.kafka.admin_topics_api import (
    handle_create_partitions,
    handle_create_topics,
    handle_delete_topics,
)
from broker.kafka.api_versions_api import handle_api_versions
from broker.kafka.authorization import RequestAuthorization
from broker.kafka.codec import DecodedRequest
from broker.kafka.consumer_group_api import (
    handle_consumer_group_describe,
    handle_consumer_group_heartbeat,
)
from broker.kafka.coordinator_api import handle_find_coordinator
from broker.kafka.fetch_api import handle_fetch, replica_of
from broker.kafka.group_admin_api import (
    handle_delete_groups,
    handle_describe_groups,
    handle_list_groups,
    handle_offset_delete,
)
from broker.kafka.group_membership_api import (
    handle_heartbeat,
    handle_join_group,
    handle_leave_group,
    handle_sync_group,
)
from broker.kafka.group_offsets_api import handle_offset_commit, handle_offset_fetch
from broker.kafka.metadata_api import handle_metadata
from broker.kafka.offsets_api import handle_list_offsets, handle_offset_for_leader_epoch
from broker.kafka.produce_api import handle_produce
from broker.kafka.producer_id_api import handle_init_producer_id
from broker.kafka.quotas_api import handle_alter_client_quotas, handle_describe_client_quotas
from broker.kafka.reply import Reply, throttled
from broker.kafka.request_metrics import FETCH_CONSUMER, FETCH_FOLLOWER, RequestMetrics, api_name
from broker.kafka.scram_api import (
    handle_alter_user_scram_credentials,
    handle_describe_user_scram_credentials,
)
from broker.kafka.txn_admin_api import (
    handle_describe_producers,
    handle_describe_transactions,
    handle_list_transactions,
)
from broker.kafka.txn_api import (
    handle_add_offsets_to_txn,
    handle_add_partitions_to_txn,
    handle_end_txn,
)
from broker.kafka.txn_markers_api import handle_write_txn_markers
from broker.kafka.txn_offset_commit_api import handle_txn_offset_commit
from broker.kafka.versions import ApiKey
from broker.quotas import ClientQuotas, RequestQuotas
from broker.replica.incremental_fetch import FetchSessions
from broker.txn.producers import ProducerStates
from broker.txn.storage import TxnStorage
from kraft.security.authorizer import RequestAuthorizer
from metadata.image import MetadataImage


class UnsupportedApi(LookupError):
    """A request for an API this front does not serve (ApiVersions does not advertise it)."""


class KafkaApis:
    def __init__(
        self,
        data_plane: DataPlane,
        metadata_image: Callable[[], MetadataImage],
        cluster_id: str,
        *,
        admin: AdminBackend | None = None,
        broker_id: int = -1,
        log_dirs: LogDirs | None = None,
        auto_create: AutoTopicCreator | None = None,
        authorizer: RequestAuthorizer | None = None,
        fetch_sessions: FetchSessions | None = None,
        quotas: ClientQuotas | None = None,
        metrics: RequestMetrics | None = None,
    ) -> None:
        """`admin`: the admin operations (metadata/admin_ops.py) the admin APIs translate
        onto; without it they are not served. `auto_create`: Metadata's auto topic creation.
        `authorizer`: the node's StandardAuthorizer; None allows everything. `fetch_sessions`:
        the incremental fetch sessions (KIP-227); without them every Fetch is answered in
        full with session id 0. `quotas`: the client quotas to enforce; None: unlimited.
        `metrics`: the request and topic traffic metrics; None: not measured."""
        self._data_plane = data_plane
        self._image = metadata_image
        self._cluster_id = cluster_id
        # The group coordinator, set by the broker role; without it the group APIs answer
        # COORDINATOR_NOT_AVAILABLE.
        self.groups: GroupStorage | None = None
        # The transaction coordinator, set by the broker role; without it the transaction
        # APIs answer COORDINATOR_NOT_AVAILABLE.
        self.txns: TxnStorage | None = None
        # The partitions' producer states (DescribeProducers), set by the broker role;
        # without them every partition answers NOT_LEADER_OR_FOLLOWER.
        self.producer_states: ProducerStates | None = None
        self._admin = admin
        self._broker_id = broker_id
        self._log_dirs = log_dirs
        self._auto_create = auto_create
        self._authorizer = authorizer
        self._fetch_sessions = fetch_sessions
        self._quotas = quotas
        self._metrics = metrics
        self._stats = metrics.topics if metrics is not None else None

    async def handle(self, request: DecodedRequest, context: Request) -> Reply:
        """The reply to a decoded request. Produce reaches the data plane before this
        coroutine first suspends (see produce_api)."""
        metrics = self._metrics
        if metrics is None:
            return await self._handle_within_quotas(request, context)
        # The connection starts this coroutine as soon as the request is decoded.
        start = time.perf_counter()
        api = _api_label(request)
        try:
            return await self._handle_within_quotas(request, context)
        except Exception:
            metrics.failed(api)
            raise
        finally:
            metrics.observe(api, time.perf_counter() - start)

    async def _handle_within_quotas(self, request: DecodedRequest, context: Request) -> Reply:
        if self._quotas is None:
            return await self._handle(request, context, None)
        quotas = self._quotas.for_request(context.principal, request.client_id)
        bandwidth = 0
        if request.api_key == ApiKey.PRODUCE:
            bandwidth = quotas.produce_bytes_throttle_ms(request.size)
            if bandwidth > 0:
                context.mute(bandwidth)  # before the connection reads its next request
        reply = await quotas.timed(self._handle(request, context, quotas))
        if request.api_key == ApiKey.PRODUCE:
            throttle = quotas.produce_throttle_ms(bandwidth, request.body.acks)
        elif not quotas.recorded:
            throttle = quotas.throttle_ms()
        else:  # a Fetch decided its own
            return reply
        return throttled(reply, throttle)

    async def _metadata(self, context: Request, version: int, body: Any,
                        auth: RequestAuthorization) -> Reply:
        """Metadata; an answer that started auto-creating topics waits (briefly) for their
        leaders and is built again, so the client can produce at once (admin_auto_create)."""
        creator = self._auto_create
        started: list[str] = []

        def create(names: Sequence[str]) -> None:
            assert creator is not None
            creator.create(names)
            started.extend(names)

        def answer(creating: Callable[[Sequence[str]], None]) -> Reply:
            enabled = creator is not None and creator.enabled
            return handle_metadata(self._image(), self._cluster_id, context.listener, version,
                                   body, creating if enabled else None, auth,
                                   broker_id=self._broker_id)

        reply = answer(create)
        if not started or creator is None:
            return reply
        await creator.wait_created(started)
        # Built the same way (a topic the caller may not create is still refused), but the
        # creation is under way: not asked for twice.
        return answer(lambda _names: None)

    async def _handle(self, request: DecodedRequest, context: Request,
                      quotas: RequestQuotas | None) -> Reply:
        version, body = request.api_version, request.body
        auth = RequestAuthorization(self._authorizer, context)
        match request.api_key:
            case ApiKey.PRODUCE:
                return await handle_produce(
                    self._data_plane, self._image(), context.listener, version, body, auth,
                    self._stats)
            case ApiKey.FETCH:
                return await handle_fetch(
                    self._data_plane, self._image(), context.listener, version, body, auth,
                    self._fetch_sessions, quotas, self._stats)
            case ApiKey.LIST_OFFSETS:
                return handle_list_offsets(self._data_plane, version, body, auth)
            case ApiKey.METADATA:
                return await self._metadata(context, version, body, auth)
            case ApiKey.API_VERSIONS:
                return handle_api_versions(version, body)
            case ApiKey.INIT_PRODUCER_ID:
                return await handle_init_producer_id(self._data_plane, version, body, auth,
                                                     self.txns)
            case ApiKey.ADD_PARTITIONS_TO_TXN:
                return await handle_add_partitions_to_txn(self.txns, self._image(), version,
                                                          body, auth)
            case ApiKey.ADD_OFFSETS_TO_TXN:
                groups = self.groups
                return await handle_add_offsets_to_txn(
                    self.txns, groups.config.offsets_topic_num_partitions
                    if groups is not None else 50, version, body, auth)
            case ApiKey.END_TXN:
                return await handle_end_txn(self.txns, version, body, auth)
            case ApiKey.WRITE_TXN_MARKERS:
                return await handle_write_txn_markers(self._data_plane, version, body, auth)
            case ApiKey.TXN_OFFSET_COMMIT:
                return await handle_txn_offset_commit(self.groups, self._image(), version, body,
                                                      auth)
            case ApiKey.DESCRIBE_TRANSACTIONS:
                return handle_describe_transactions(self.txns, version, body, auth)
            case ApiKey.LIST_TRANSACTIONS:
                return handle_list_transactions(self.txns, version, body, auth)
            case ApiKey.DESCRIBE_PRODUCERS:
                return handle_describe_producers(self.producer_states, self._image(), version,
                                                 body, auth)
            case ApiKey.OFFSET_FOR_LEADER_EPOCH:
                return handle_offset_for_leader_epoch(self._data_plane, version, body, auth)
            case ApiKey.FIND_COORDINATOR:
                return handle_find_coordinator(
                    self.groups, self._image(), context.listener, version, body, auth,
                    self.txns)
            case ApiKey.JOIN_GROUP:
                return await handle_join_group(self.groups, context, version, body, auth)
            case ApiKey.SYNC_GROUP:
                return await handle_sync_group(self.groups, version, body, auth)
            case ApiKey.HEARTBEAT:
                return handle_heartbeat(self.groups, version, body, auth)
            case ApiKey.LEAVE_GROUP:
                return handle_leave_group(self.groups, version, body, auth)
            case ApiKey.OFFSET_COMMIT:
                return await handle_offset_commit(self.groups, self._image(), version, body,
                                                  auth)
            case ApiKey.OFFSET_FETCH:
                return handle_offset_fetch(self.groups, version, body, auth)
            case ApiKey.LIST_GROUPS:
                return handle_list_groups(self.groups, version, body, auth)
            case ApiKey.DESCRIBE_GROUPS:
                return handle_describe_groups(self.groups, version, body, auth)
            case ApiKey.DELETE_GROUPS:
                return await handle_delete_groups(self.groups, version, body, auth)
            case ApiKey.OFFSET_DELETE:
                return await handle_offset_delete(self.groups, self._image(), version, body,
                                                  auth)
            case ApiKey.CONSUMER_GROUP_HEARTBEAT:
                return await handle_consumer_group_heartbeat(self.groups, context, version,
                                                             body, auth)
            case ApiKey.CONSUMER_GROUP_DESCRIBE:
                return handle_consumer_group_describe(self.groups, self._image(), version, body,
                                                      auth)
            case ApiKey.DELETE_RECORDS:
                return await handle_delete_records(self._data_plane, version, body, auth)
            case ApiKey.DESCRIBE_CLUSTER:
                return handle_describe_cluster(
                    self._image(), self._cluster_id, context.listener, version, body, auth,
                    broker_id=self._broker_id)
            case ApiKey.DESCRIBE_LOG_DIRS if self._log_dirs is not None:
                return handle_describe_log_dirs(self._log_dirs, version, body, auth)
        if self._admin is not None:
            return await self._handle_admin(auth.admin(self._admin, self._image()), request,
                                            auth)
        raise UnsupportedApi(f"api key {request.api_key}")

    async def _handle_admin(self, admin: AdminBackend, request: DecodedRequest,
                            auth: RequestAuthorization) -> Reply:
        """The admin APIs that are admin operations (metadata/admin_ops.py)."""
        version, body = request.api_version, request.body
        match request.api_key:
            case ApiKey.CREATE_TOPICS:
                return await handle_create_topics(admin, self._image(), version, body, auth)
            case ApiKey.DELETE_TOPICS:
                return await handle_delete_topics(admin, version, body)
            case ApiKey.CREATE_PARTITIONS:
                return await handle_create_partitions(admin, version, body)
            case ApiKey.DESCRIBE_CONFIGS:
                return await handle_describe_configs(admin, self._broker_id, version, body)
            case ApiKey.INCREMENTAL_ALTER_CONFIGS:
                return await handle_incremental_alter_configs(
                    admin, self._broker_id, version, body)
            case ApiKey.ALTER_CONFIGS:
                return await handle_alter_configs(
                    admin, self._image(), self._broker_id, version, body)
            case ApiKey.ELECT_LEADERS:
                return await handle_elect_leaders(admin, version, body)
            case ApiKey.ALTER_PARTITION_REASSIGNMENTS:
                return await handle_alter_partition_reassignments(admin, version, body)
            case ApiKey.LIST_PARTITION_REASSIGNMENTS:
                return await handle_list_partition_reassignments(admin, version, body)
            case ApiKey.DESCRIBE_ACLS:
                return await handle_describe_acls(admin, version, body)
            case ApiKey.CREATE_ACLS:
                return await handle_create_acls(admin, version, body)
            case ApiKey.DELETE_ACLS:
                return await handle_delete_acls(admin, version, body)
            case ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS:
                return await handle_describe_user_scram_credentials(admin, version, body)
            case ApiKey.ALTER_USER_SCRAM_CREDENTIALS:
                return await handle_alter_user_scram_credentials(admin, version, body)
            case ApiKey.DESCRIBE_CLIENT_QUOTAS:
                return await handle_describe_client_quotas(admin, version, body)
            case ApiKey.ALTER_CLIENT_QUOTAS:
                return await handle_alter_client_quotas(admin, version, body)
        raise UnsupportedApi(f"api key {request.api_key}")


def _api_label(request: DecodedRequest) -> str:
    """Kafka's request name; a Fetch is FetchConsumer or FetchFollower, as Kafka counts it."""
    if request.api_key == ApiKey.FETCH:
        follower = replica_of(request.api_version, request.body)[0] >= 0
        return FETCH_FOLLOWER if follower else FETCH_CONSUMER
    return api_name(request.api_key)
