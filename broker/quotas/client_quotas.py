"""One type of client quota on a broker: which quota a (user, client id) is under, its
sensors, and the throttle time a recorded value earns (Kafka's ClientQuotaManager with its
DefaultQuotaCallback, and QuotaUtils.throttleTime).

Which quota: the first of these entities with a value for this manager's key, in Kafka's
order: user+client, user+default-client, user, default-user+client,
default-user+default-client, default-user, client, default-client; none: unlimited. The level
found names the sensor: (user, client id) for the levels naming both parts, (user, "") for a
user level, ("", client id) for a client level. So a user quota is shared by all that user's
client ids, and a default quota is each user's or client id's own.

Throttling: the value is recorded, then the rate checked; over the bound, the throttle is
round((rate - bound) / bound * window_ms), the time at which the rate falls back to the bound
with nothing more recorded. The request quota caps it at one window sample (Kafka's
ClientRequestQuotaManager); the byte rates do not (a fetch is bounded by `max_value_in_window`
instead), but an int32 holds it.

Sensors are bounded: one idle for a whole quota window holds nothing (every sample expired)
and is dropped, and at most `max_sensors` are kept, the least recently used dropped first,
so a client cycling through client ids cannot make the broker hold unbounded state.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping

from broker.quotas.rate import QuotaWindow, Rate
from metadata.security_records import QuotaEntity

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
INT32_MAX = 2**31 - 1
DEFAULT_MAX_SENSORS = 100_000

# (user, client id) as Kafka's quota metric tags: "" where the quota's level names no such part.
SensorKey = tuple[str, str]


def quota_user(principal: str) -> str:
    """The user a quota names: a User principal's name (KafkaPrincipal.getName), else the
    whole principal."""
    kind, colon, name = principal.partition(":")
    return name if colon and kind == "User" else principal


def match_quota(quotas: Mapping[QuotaEntity, float], user: str,
                client_id: str) -> tuple[SensorKey, float] | None:
    """The sensor key and bound of the first entity in Kafka's order with a quota; None."""
    if not quotas:
        return None
    u, default_u = ("user", user), ("user", None)
    c, default_c = ("client-id", client_id), ("client-id", None)
    both, user_only, client_only = (user, client_id), (user, ""), ("", client_id)
    # Entities as image keys: parts sorted by type ("client-id" < "user").
    for entity, key in (((c, u), both), ((default_c, u), both), ((u,), user_only),
                        ((c, default_u), both), ((default_c, default_u), both),
                        ((default_u,), user_only), ((c,), client_only),
                        ((default_c,), client_only)):
        bound = quotas.get(entity)
        if bound is not None:
            return key, bound
    return None


def quotas_of(client_quotas: Mapping[QuotaEntity, Mapping[str, float]],
              key: str) -> dict[QuotaEntity, float]:
    """The entities with a value for `key` (IP entities take none of these keys)."""
    return {entity: values[key] for entity, values in client_quotas.items() if key in values}


class ClientQuotaManager:
    """The sensors of one quota key and the throttles they earned."""

    def __init__(self, key: str, window: QuotaWindow, *, max_throttle_ms: int = INT32_MAX,
                 max_sensors: int = DEFAULT_MAX_SENSORS) -> None:
        self.key = key
        self.window = window
        self._max_throttle_ms = max_throttle_ms
        self._max_sensors = max_sensors
        self._quotas: Mapping[QuotaEntity, float] = {}
        self._sensors: OrderedDict[SensorKey, tuple[Rate, int]] = OrderedDict()  # LRU first
        self._next_sweep_ms: int | None = None
        # For metrics: answers this quota throttled, and the time they were throttled.
        self.throttled = 0
        self.throttle_time_ms = 0

    def update(self, client_quotas: Mapping[QuotaEntity, Mapping[str, float]]) -> None:
        """New quotas (an image's): existing sensors keep their samples, as Kafka's do."""
        self._quotas = quotas_of(client_quotas, self.key)

    @property
    def sensors(self) -> int:
        return len(self._sensors)

    def quota(self, user: str, client_id: str) -> tuple[SensorKey, float] | None:
        return match_quota(self._quotas, user, client_id)

    def record(self, user: str, client_id: str, value: float, now_ms: int) -> int:
        """Record `value`, then the throttle time in ms it earned (0: within the quota)."""
        matched = self.quota(user, client_id)
        if matched is None:
            return 0  # unlimited: nothing to keep
        key, bound = matched
        rate = self._sensor(key, now_ms)
        rate.record(value, now_ms)
        measured = rate.measure(now_ms)
        if measured <= bound:
            return 0
        throttle = round((measured - bound) / bound * rate.window_ms(now_ms))
        return min(throttle, self._max_throttle_ms)

    def unrecord(self, user: str, client_id: str, value: float, now_ms: int) -> None:
        """Take back a recorded value (a throttled fetch is answered empty)."""
        matched = self.quota(user, client_id)
        if matched is not None:
            self._sensor(matched[0], now_ms).record(-value, now_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most one request may take without being throttled for sure: the bound over
        samples - 1 windows (Kafka's getMaxValueInQuotaWindow); None: unlimited."""
        matched = self.quota(user, client_id)
        if matched is None:
            return None
        return matched[1] * (self.window.samples - 1) * self.window.size_ms / 1000

    def note_throttle(self, throttle_ms: int) -> None:
        self.throttled += 1
        self.throttle_time_ms += throttle_ms

    def _sensor(self, key: SensorKey, now_ms: int) -> Rate:
        self._sweep(now_ms)
        entry = self._sensors.get(key)
        if entry is None:
            while len(self._sensors) >= self._max_sensors:
                self._sensors.popitem(last=False)
            rate = Rate(self.window)
        else:
            rate = entry[0]
            self._sensors.move_to_end(key)
        self._sensors[key] = (rate, now_ms)
        return rate

    def _sweep(self, now_ms: int) -> None:
        """Drop the sensors idle for a whole window (in use order, so the idle come first);
        at most once a window."""
        if self._next_sweep_ms is not None and now_ms < self._next_sweep_ms:
            return
        idle_before = now_ms - self.window.total_ms
        while self._sensors:
            _, (_, last_used_ms) = next(iter(self._sensors.items()))
            if last_used_ms > idle_before:
                break
            self._sensors.popitem(last=False)
        self._next_sweep_ms = now_ms + self.window.total_ms
