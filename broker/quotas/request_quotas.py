"""The broker's client quotas (produce, fetch, request) and what one request records against
them, in the order Kafka's KafkaApis records (handleProduceRequest, handleFetchRequest,
sendResponseMaybeThrottle):

* Produce: the request's bytes against producer_byte_rate, its loop time against
  request_percentage (not with acks=0); the throttle is the larger of the two.
* A consumer's Fetch: its loop time so far, then the answer's bytes against consumer_byte_rate;
  throttled by either, it is answered empty and its bytes are taken back. A replica's fetch
  is exempt from both.
* Any other request: its loop time against request_percentage.

The request quota's value is the loop time in percent-seconds (100 for one second), so its
rate is the percentage of the event loop the client took, as Kafka's is of a handler thread.
The quotas follow the metadata image: each request looks at the image's quota map and the
managers are updated when it is a new one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from broker.quotas.client_quotas import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaManager,
    quota_user,
)
from broker.quotas.loop_time import LoopTimed
from broker.quotas.rate import QuotaWindow
from metadata.security_records import QuotaEntity

T = TypeVar("T")
DEFAULT_WINDOW = QuotaWindow()  # Kafka's: 11 samples of 1 s
QuotaMap = Mapping[QuotaEntity, Mapping[str, float]]


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class ClientQuotas:
    """The three managers, kept in step with the image's quotas."""

    def __init__(self, quotas: Callable[[], QuotaMap], window: QuotaWindow = DEFAULT_WINDOW,
                 clock_ms: Callable[[], int] = _monotonic_ms) -> None:
        """`quotas`: the current image's client quotas (MetadataImage.client_quotas)."""
        self._quotas = quotas
        self._seen: QuotaMap | None = None
        self.window = window
        self.clock_ms = clock_ms
        self.produce = ClientQuotaManager(PRODUCER_BYTE_RATE, window)
        # Kafka's ClientRequestQuotaManager: a throttle of at most one sample.
        self.request = ClientQuotaManager(REQUEST_PERCENTAGE, window,
                                          max_throttle_ms=window.size_ms)
        self.fetch = ClientQuotaManager(CONSUMER_BYTE_RATE, window)

    @property
    def managers(self) -> tuple[ClientQuotaManager, ...]:
        return self.produce, self.fetch, self.request

    def refresh(self) -> None:
        quotas = self._quotas()
        if quotas is not self._seen:  # the image's map is replaced only when quotas change
            self._seen = quotas
            for manager in self.managers:
                manager.update(quotas)

    def for_request(self, principal: str, client_id: str | None) -> RequestQuotas:
        self.refresh()
        return RequestQuotas(self, quota_user(principal), client_id or "")


class RequestQuotas:
    """What one request records; `recorded` once its loop time is (or is exempt)."""

    def __init__(self, quotas: ClientQuotas, user: str, client_id: str) -> None:
        self._quotas = quotas
        self.user = user
        self.client_id = client_id
        self._handler: LoopTimed[Any] | None = None
        self.recorded = False

    def timed(self, handler: Coroutine[Any, Any, T]) -> LoopTimed[T]:
        """The request's handler, its loop time counted as this request's."""
        timed = self._handler = LoopTimed(handler)
        return timed

    def _loop_seconds(self) -> float:
        return self._handler.seconds() if self._handler is not None else 0.0

    def exempt(self) -> None:
        """A replica's fetch: no client quota applies."""
        self.recorded = True

    def request_throttle_ms(self) -> int:
        """Record the request's loop time so far (once); its request-quota throttle."""
        if self.recorded:
            return 0
        self.recorded = True
        quotas = self._quotas
        percent_seconds = self._loop_seconds() * 100
        return quotas.request.record(self.user, self.client_id, percent_seconds,
                                     quotas.clock_ms())

    def throttle_ms(self) -> int:
        """A request without byte quotas: its request throttle, counted."""
        return self._throttled(self._quotas.request, 0, self.request_throttle_ms())

    def produce_bytes_throttle_ms(self, request_bytes: int) -> int:
        """Record a Produce's bytes as it arrives: their throttle. Kafka records them once the
        append is done, but reads no other request of the connection meanwhile; here later
        requests are read while this one is handled, so the bytes count at once."""
        quotas = self._quotas
        return quotas.produce.record(self.user, self.client_id, request_bytes,
                                     quotas.clock_ms())

    def produce_throttle_ms(self, bandwidth: int, acks: int) -> int:
        """A handled Produce: the larger of its bytes' throttle and its request time's."""
        quotas = self._quotas
        if acks == 0:
            self.recorded = True  # acks=0 is exempt from the request quota
            request = 0
        else:
            request = self.request_throttle_ms()
        return self._throttled(quotas.produce, bandwidth, request)

    def fetch_max_bytes(self) -> int | None:
        """The bytes a consumer's fetch may ask at most (None: unlimited)."""
        most = self._quotas.fetch.max_value_in_window(self.user, self.client_id)
        return None if most is None else max(1, min(int(most), 2**31 - 1))

    def fetch_throttle_ms(self, response_bytes: int) -> int:
        """A consumer's fetch answering `response_bytes`: its throttle; > 0 means the answer
        must be empty, and the bytes are not counted."""
        quotas = self._quotas
        request = self.request_throttle_ms()
        now_ms = quotas.clock_ms()
        bandwidth = quotas.fetch.record(self.user, self.client_id, response_bytes, now_ms)
        throttle = self._throttled(quotas.fetch, bandwidth, request)
        if throttle > 0:
            quotas.fetch.unrecord(self.user, self.client_id, response_bytes, now_ms)
        return throttle

    def _throttled(self, bandwidth_manager: ClientQuotaManager, bandwidth: int,
                   request: int) -> int:
        """The larger throttle, counted on the quota that set it (as Kafka mutes for it)."""
        throttle = max(bandwidth, request)
        if throttle > 0:
            manager = bandwidth_manager if bandwidth > request else self._quotas.request
            manager.note_throttle(throttle)
        return throttle
