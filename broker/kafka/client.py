"""KafkaClient: an asyncio Kafka-protocol client for broker-to-broker calls (the replica
fetcher asks partition leaders for data, log end offsets and epoch end offsets) and for
`kraft-admin groups` (server/group_client.py), which may log in with SASL: after ApiVersions,
SaslHandshake v1 and SaslAuthenticate rounds carrying a broker/kafka/sasl/client.py exchange.

One connection, requests pipelined (each waits for its own correlation id), versions chosen
from the peer's ApiVersions answer. Every transport failure (connect, a closed connection, a
timeout, a frame that does not decode) raises KafkaClientError, a ConnectionError: the
connection is then closed and every request in flight fails with it; connect() again to
retry. Kafka errors inside an answer are values in the results, never exceptions."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import itertools
import ssl
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from broker.api import (
    DivergingEpoch,
    EpochEndPartition,
    EpochEndResult,
    FetchParams,
    FetchPartition,
    FetchPartitionResult,
    ListOffsetsPartition,
    ListOffsetsResult,
)
from broker.kafka.codec import FrameError, build, decode_response, encode_request, request_module
from broker.kafka.sasl.client import SaslClient, SaslClientError
from broker.kafka.topic_ids import from_wire, to_wire
from broker.kafka.versions import ApiKey
from broker.replica.fetch_sessions import FINAL_EPOCH, INVALID_SESSION_ID, SessionResponse
from kraft.errors import Errors

CLIENT_SOFTWARE_NAME = "kraft-quorum"
CLIENT_SOFTWARE_VERSION = "0.1.0"
FETCH_BY_NAME_VERSION = 12  # the last Fetch naming topics, with last_fetched_epoch (KIP-595)
FETCH_BY_ID_VERSION = 15  # the first with ReplicaState (replica epoch, KIP-903)
WANTED: dict[int, int] = {  # the newest version this client speaks of each API
    ApiKey.API_VERSIONS: 3,
    ApiKey.FETCH: 16,
    ApiKey.LIST_OFFSETS: 7,
    ApiKey.OFFSET_FOR_LEADER_EPOCH: 4,
}
_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class KafkaClientError(ConnectionError):
    """The connection to a broker failed, closed, timed out or sent something unreadable.
    `refused`: the connect was refused — nothing listens there (the process is gone).
    `authentication`: the SASL login failed (another broker would refuse it too)."""

    def __init__(self, message: str, refused: bool = False,
                 authentication: bool = False) -> None:
        super().__init__(message)
        self.refused = refused
        self.authentication = authentication


class KafkaClient:
    def __init__(
        self,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        client_id: str = "kraft-broker",
        *,
        request_timeout_s: float = 30.0,
        connect_timeout_s: float = 10.0,
        sasl: Callable[[], SaslClient] | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self._ssl = ssl_context
        self.client_id = client_id
        self._request_timeout_s = request_timeout_s
        self._connect_timeout_s = connect_timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any]]] = {}
        self._correlation = itertools.count(1)
        self._versions: dict[int, tuple[int, int]] = {}
        self._sasl = sasl  # a fresh exchange per connection

    @property
    def connected(self) -> bool:
        return self._writer is not None

    async def connect(self) -> None:
        """Open the connection and learn the peer's API versions."""
        await self.close()
        try:
            async with asyncio.timeout(self._connect_timeout_s):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=self._ssl
                )
        except (OSError, TimeoutError, ssl.SSLError) as exc:
            raise KafkaClientError(f"connect to {self.host}:{self.port}: {exc!r}",
                                   refused=isinstance(exc, ConnectionRefusedError)) from None
        self._writer = writer
        self._reader_task = asyncio.create_task(self._read_responses(reader))
        versions = await self.request(build(
            request_module(ApiKey.API_VERSIONS, WANTED[ApiKey.API_VERSIONS]),
            "ApiVersionsRequest", client_software_name=CLIENT_SOFTWARE_NAME,
            client_software_version=CLIENT_SOFTWARE_VERSION,
        ))
        if int(versions.error_code) != Errors.NONE:
            await self.close()
            raise KafkaClientError(
                f"{self.host}:{self.port} refused ApiVersions: error {int(versions.error_code)}"
            )
        self._versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys
        }
        if self._sasl is not None:
            await self._authenticate(self._sasl())

    async def _authenticate(self, exchange: SaslClient) -> None:
        """SaslHandshake v1 for the mechanism, then SaslAuthenticate until it completes."""
        where = f"{self.host}:{self.port}"
        try:
            if self.version(ApiKey.SASL_HANDSHAKE, 1) < 1:
                raise KafkaClientError(f"{where} serves no SaslHandshake v1: is it a SASL "
                                       "listener?")
            handshake = await self.request(build(
                request_module(ApiKey.SASL_HANDSHAKE, 1), "SaslHandshakeRequest",
                mechanism=exchange.mechanism))
            code = int(handshake.error_code)
            if code == ErrorCode.unsupported_sasl_mechanism:
                raise KafkaClientError(
                    f"{where} does not accept SASL mechanism {exchange.mechanism} (enabled: "
                    f"{', '.join(handshake.mechanisms) or 'none'})", authentication=True)
            if code != Errors.NONE:
                raise KafkaClientError(f"{where} refused the SASL handshake: "
                                       f"{_error_name(code)}", authentication=True)
            module = request_module(ApiKey.SASL_AUTHENTICATE,
                                    self.version(ApiKey.SASL_AUTHENTICATE, 2))
            token: bytes | None = exchange.initial_response()
            while token is not None:
                answer = await self.request(build(module, "SaslAuthenticateRequest",
                                                  auth_bytes=token))
                if int(answer.error_code) != Errors.NONE:
                    raise KafkaClientError(
                        f"SASL authentication ({exchange.mechanism}) failed at {where}: "
                        f"{answer.error_message or _error_name(int(answer.error_code))}",
                        authentication=True)
                token = exchange.evaluate(bytes(answer.auth_bytes or b""))
        except SaslClientError as exc:
            await self.close()
            raise KafkaClientError(f"SASL authentication ({exchange.mechanism}) with {where}: "
                                   f"{exc}", authentication=True) from None
        except KafkaClientError:
            await self.close()
            raise

    async def close(self) -> None:
        writer, task = self._writer, self._reader_task
        self._writer = self._reader_task = None
        self._fail_pending(KafkaClientError(f"connection to {self.host}:{self.port} closed"))
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    def version(self, api_key: int, newest: int | None = None) -> int:
        """The newest version of an API both sides speak (KafkaClientError if none)."""
        if not self.connected:
            raise KafkaClientError(f"not connected to {self.host}:{self.port}")
        low, high = self._versions.get(api_key, (0, -1))
        chosen = min(high, WANTED.get(api_key, high) if newest is None else newest)
        if chosen < low:
            raise KafkaClientError(f"{self.host}:{self.port} serves no usable api {api_key}")
        return chosen

    # ---- the wire ----

    async def request(self, body: Any, extra_timeout_s: float = 0.0) -> Any:
        """Send a kio request entity; its response entity."""
        writer = self._writer
        if writer is None:
            raise KafkaClientError(f"not connected to {self.host}:{self.port}")
        correlation_id = next(self._correlation) & 0x7FFFFFFF
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[correlation_id] = (
            int(type(body).__api_key__), int(type(body).__version__), future
        )
        try:
            writer.write(encode_request(correlation_id, self.client_id, body))
            await writer.drain()
            async with asyncio.timeout(self._request_timeout_s + extra_timeout_s):
                return await future
        except TimeoutError:
            # Kafka's clients drop a connection whose request timed out: answers are ordered.
            await self.close()
            raise KafkaClientError(f"request to {self.host}:{self.port} timed out") from None
        except (OSError, ssl.SSLError) as exc:
            await self.close()
            raise KafkaClientError(f"send to {self.host}:{self.port}: {exc!r}") from None
        # A request cancelled by its caller (a fetcher re-planning) stays in _pending,
        # its future cancelled, so its answer is recognised and dropped when it comes.

    async def _read_responses(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                size = _SIZE.unpack(await reader.readexactly(4))[0]
                if size < 4 or size > MAX_RESPONSE_BYTES:
                    raise KafkaClientError(f"response size {size} from {self.host}:{self.port}")
                frame = await reader.readexactly(size)
                correlation_id = _SIZE.unpack_from(frame, 0)[0]
                pending = self._pending.pop(correlation_id, None)
                if pending is None:
                    raise KafkaClientError(f"unexpected correlation id {correlation_id}")
                api_key, version, future = pending
                if future.done():
                    continue  # its caller gave up
                _, response = decode_response(api_key, version, frame)
                future.set_result(response)
        except asyncio.CancelledError:
            raise
        except (OSError, asyncio.IncompleteReadError, FrameError, KafkaClientError) as exc:
            error = exc if isinstance(exc, KafkaClientError) else KafkaClientError(
                f"connection to {self.host}:{self.port}: {exc!r}"
            )
            self._fail_pending(error)
            self._writer, writer = None, self._writer
            if writer is not None:
                writer.close()

    def _fail_pending(self, error: KafkaClientError) -> None:
        pending, self._pending = self._pending, {}
        for _, _, future in pending.values():
            if not future.done():
                future.set_exception(error)
                future.exception()  # retrieved: a request that already gave up logs nothing

    # ---- typed calls ----

    async def fetch(self, params: FetchParams) -> list[FetchPartitionResult]:
        """A fetch without a session; results in the order of params.partitions."""
        response = await self.fetch_session(params)
        missing = FetchPartitionResult(error=response.error or Errors.UNKNOWN_SERVER_ERROR)
        return [response.results.get((p.topic, p.partition), missing)
                for p in params.partitions]

    async def fetch_session(
        self, params: FetchParams, session_id: int = INVALID_SESSION_ID,
        epoch: int = FINAL_EPOCH, forgotten: Sequence[FetchPartition] = (),
        names: Mapping[str, str] | None = None,
    ) -> SessionResponse:
        """A Fetch in a session (KIP-227; without one by default) listing params.partitions
        and forgetting `forgotten`. Fetch v15+ when every partition has a topic id (and the
        peer serves it), else v12. The answer's partitions are keyed by (topic name,
        partition): topic ids are named from the listed partitions and `names` (id -> name,
        for a session's partitions this fetch does not list)."""
        listed = list(params.partitions)
        by_id = all(p.topic_id is not None for p in (*listed, *forgotten))
        version = self.version(ApiKey.FETCH)
        if not by_id or version < FETCH_BY_ID_VERSION:
            version = self.version(ApiKey.FETCH, FETCH_BY_NAME_VERSION)
            by_id = False
        module = request_module(ApiKey.FETCH, version)
        topic_field = "topic_id" if by_id else "topic"

        def key(p: FetchPartition) -> Any:
            return to_wire(p.topic_id) if by_id and p.topic_id is not None else p.topic

        topics: dict[Any, list[Any]] = {}
        for p in listed:
            topics.setdefault(key(p), []).append(build(
                module, "FetchPartition", partition=p.partition,
                current_leader_epoch=p.current_leader_epoch, fetch_offset=p.fetch_offset,
                last_fetched_epoch=p.last_fetched_epoch, log_start_offset=p.log_start_offset,
                partition_max_bytes=p.partition_max_bytes,
            ))
        forget: dict[Any, list[int]] = {}
        for p in forgotten:
            forget.setdefault(key(p), []).append(p.partition)
        request = build(
            module, "FetchRequest",
            replica_id=params.replica_id,
            replica_state=build(module, "ReplicaState", replica_id=params.replica_id,
                                replica_epoch=params.replica_epoch)
            if version >= FETCH_BY_ID_VERSION else None,
            max_wait=datetime.timedelta(milliseconds=params.max_wait_ms),
            min_bytes=params.min_bytes, max_bytes=params.max_bytes,
            isolation_level=params.isolation_level, session_id=session_id,
            session_epoch=epoch,
            topics=tuple(build(module, "FetchTopic", partitions=tuple(parts),
                               **{topic_field: k}) for k, parts in topics.items()),
            forgotten_topics_data=tuple(
                build(module, "ForgottenTopic", partitions=tuple(parts), **{topic_field: k})
                for k, parts in forget.items()),
            rack_id="",
        )
        response = await self.request(request, extra_timeout_s=params.max_wait_ms / 1000)
        listed_names = {p.topic_id: p.topic for p in listed if p.topic_id is not None}
        results: dict[tuple[str, int], FetchPartitionResult] = {}
        for topic in response.responses:
            if by_id:
                topic_id = from_wire(topic.topic_id)
                # An id named nowhere stays an id: the session handler's check fails on it.
                name = listed_names.get(topic_id) or (names or {}).get(topic_id, topic_id)
            else:
                name = topic.topic
            for data in topic.partitions:
                results[(name, int(data.partition_index))] = _fetch_result(data)
        return SessionResponse(int(response.error_code),
                               int(getattr(response, "session_id", INVALID_SESSION_ID)), results)

    async def list_offsets(
        self, replica_id: int, partitions: Sequence[ListOffsetsPartition],
        isolation_level: int = 0,
    ) -> list[ListOffsetsResult]:
        version = self.version(ApiKey.LIST_OFFSETS)
        module = request_module(ApiKey.LIST_OFFSETS, version)
        topics: dict[str, list[Any]] = {}
        for p in partitions:
            topics.setdefault(p.topic, []).append(build(
                module, "ListOffsetsPartition", partition_index=p.partition,
                current_leader_epoch=p.current_leader_epoch, timestamp=p.timestamp,
            ))
        response = await self.request(build(
            module, "ListOffsetsRequest", replica_id=replica_id,
            isolation_level=isolation_level,
            topics=tuple(build(module, "ListOffsetsTopic", name=name, partitions=tuple(parts))
                         for name, parts in topics.items()),
        ))
        answers = {
            (topic.name, int(p.partition_index)): ListOffsetsResult(
                error=int(p.error_code), timestamp=int(p.timestamp), offset=int(p.offset),
                leader_epoch=int(getattr(p, "leader_epoch", -1)),
            )
            for topic in response.topics for p in topic.partitions
        }
        return [answers.get((p.topic, p.partition),
                            ListOffsetsResult(error=Errors.UNKNOWN_SERVER_ERROR))
                for p in partitions]

    async def end_offsets_for_epochs(
        self, replica_id: int, partitions: Sequence[EpochEndPartition]
    ) -> list[EpochEndResult]:
        """OffsetForLeaderEpoch: where each asked leader epoch ends on the peer."""
        version = self.version(ApiKey.OFFSET_FOR_LEADER_EPOCH)
        module = request_module(ApiKey.OFFSET_FOR_LEADER_EPOCH, version)
        topics: dict[str, list[Any]] = {}
        for p in partitions:
            topics.setdefault(p.topic, []).append(build(
                module, "OffsetForLeaderPartition", partition=p.partition,
                current_leader_epoch=p.current_leader_epoch, leader_epoch=p.leader_epoch,
            ))
        response = await self.request(build(
            module, "OffsetForLeaderEpochRequest", replica_id=replica_id,
            topics=tuple(build(module, "OffsetForLeaderTopic", topic=name,
                               partitions=tuple(parts)) for name, parts in topics.items()),
        ))
        answers = {
            (topic.topic, int(p.partition)): EpochEndResult(
                error=int(p.error_code), leader_epoch=int(p.leader_epoch),
                end_offset=int(p.end_offset),
            )
            for topic in response.topics for p in topic.partitions
        }
        return [answers.get((p.topic, p.partition),
                            EpochEndResult(error=Errors.UNKNOWN_SERVER_ERROR))
                for p in partitions]


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name.upper()
    except ValueError:
        return f"error {code}"


def _fetch_result(data: Any) -> FetchPartitionResult:
    diverging = getattr(data, "diverging_epoch", None)
    leader = getattr(data, "current_leader", None)
    return FetchPartitionResult(
        error=int(data.error_code),
        high_watermark=int(data.high_watermark),
        last_stable_offset=int(data.last_stable_offset),
        log_start_offset=int(getattr(data, "log_start_offset", -1)),
        records=bytes(data.records or b""),
        diverging_epoch=DivergingEpoch(int(diverging.epoch), int(diverging.end_offset))
        if diverging is not None and diverging.epoch >= 0 else None,
        current_leader=(int(leader.leader_id), int(leader.leader_epoch))
        if leader is not None and leader.leader_id >= 0 else None,
    )
