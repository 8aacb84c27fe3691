"""broker/quotas/: Kafka's sampled Rate against hand-computed values, the quota match order
and which sensor a client's bytes go to, the throttle formula and its cap, the bound on
sensors, the loop time of a request's own steps, and the managers following the image."""

from __future__ import annotations

import asyncio
import time

import pytest

from broker.quotas import ClientQuotaManager, ClientQuotas, LoopTimed, QuotaWindow, Rate
from broker.quotas.client_quotas import match_quota, quota_user
from metadata.security_records import QuotaEntity

WINDOW = QuotaWindow(samples=11, size_ms=1000)
BYTES = "producer_byte_rate"


def entity(user: str | bool | None = False, client: str | bool | None = False) -> QuotaEntity:
    """An image key: False leaves the part out, None is its default entity."""
    parts: list[tuple[str, str | None]] = []
    if client is not False:
        parts.append(("client-id", client))  # type: ignore[arg-type]
    if user is not False:
        parts.append(("user", user))  # type: ignore[arg-type]
    return tuple(parts)


# ---- Rate ----


def test_a_first_sample_is_read_over_samples_minus_one_windows() -> None:
    rate = Rate(WINDOW)
    rate.record(100, 0)
    assert rate.window_ms(0) == 10_000  # 0 elapsed + 10 full windows assumed
    assert rate.measure(0) == pytest.approx(10.0)
    rate.record(100, 500)  # same sample (500 ms < 1000)
    assert rate.window_ms(500) == 10_500
    assert rate.measure(500) == pytest.approx(200 / 10.5)


def test_samples_advance_and_the_window_grows_with_the_elapsed_time() -> None:
    rate = Rate(WINDOW)
    rate.record(100, 0)
    rate.record(100, 1500)  # a new sample from 1500
    # elapsed 1500: 1 full window, 9 more assumed.
    assert rate.window_ms(1500) == 1500 + 9 * 1000
    assert rate.measure(1500) == pytest.approx(200 / 10.5)
    for t in range(2000, 11_000, 1000):  # one event per second
        rate.record(10, t)
    # 10_999 elapsed from the oldest start (0): 10 full windows, nothing added.
    assert rate.window_ms(10_999) == 10_999
    assert rate.total(10_999) == 100 + 100 + 9 * 10
    # At 11_000 the first sample expires: the oldest start is 1500, 9 full windows + 1.
    assert rate.total(11_000) == 100 + 9 * 10
    assert rate.window_ms(11_000) == 9500 + 1000


def test_a_sample_expires_samples_times_size_after_its_last_event() -> None:
    rate = Rate(WINDOW)
    rate.record(100, 0)
    rate.record(50, 1500)
    assert rate.total(10_999) == 150
    # At 11_000 the first sample's last event (0) is 11 s old: reset (start 11_000).
    assert rate.total(11_000) == 50
    # The oldest start is now 1500: 9.5 s elapsed, 9 full windows, one more assumed.
    assert rate.window_ms(11_000) == 9500 + 1000
    assert rate.measure(11_000) == pytest.approx(50 / 10.5)


def test_an_idle_rate_is_zero_over_the_minimum_window() -> None:
    rate = Rate(WINDOW)
    assert rate.measure(5) == 0.0
    assert rate.window_ms(5) == 10_000


def test_the_ring_holds_samples_plus_one() -> None:
    rate = Rate(QuotaWindow(samples=2, size_ms=1000))
    for second in range(6):
        rate.record(1, second * 1000 + 999)  # the last event of each sample at x999
    # Samples of seconds 3, 4, 5 could be live; those whose last event is >= 2 s old reset.
    assert rate.total(5999) == 2  # seconds 4 and 5
    assert rate.total(6999) == 1  # second 5


# ---- matching ----


def test_the_match_order_is_kafkas() -> None:
    levels = [
        (entity("alice", "app"), ("alice", "app")),
        (entity("alice", None), ("alice", "app")),
        (entity("alice"), ("alice", "")),
        (entity(None, "app"), ("alice", "app")),
        (entity(None, None), ("alice", "app")),
        (entity(None), ("alice", "")),
        (entity(client="app"), ("", "app")),
        (entity(client=None), ("", "app")),
    ]
    quotas = {key: float(i + 1) for i, (key, _) in enumerate(levels)}
    for i, (key, sensor) in enumerate(levels):
        assert match_quota(quotas, "alice", "app") == (sensor, float(i + 1)), key
        del quotas[key]  # the next level wins once this one is gone
    assert match_quota(quotas, "alice", "app") is None  # no quota: unlimited


def test_other_names_do_not_match() -> None:
    quotas = {entity("bob"): 5.0, entity(client="other"): 6.0, entity("bob", "app"): 7.0}
    assert match_quota(quotas, "alice", "app") is None


def test_the_user_of_a_principal() -> None:
    assert quota_user("User:alice") == "alice"
    assert quota_user("User:CN=a,OU=b") == "CN=a,OU=b"
    assert quota_user("Group:x") == "Group:x"


def manager(quotas: dict[QuotaEntity, float], **kwargs: int) -> ClientQuotaManager:
    m = ClientQuotaManager(BYTES, WINDOW, **kwargs)
    m.update({key: {BYTES: value} for key, value in quotas.items()})
    return m


def test_a_user_quota_is_shared_by_the_users_client_ids() -> None:
    m = manager({entity("alice"): 100.0})
    assert m.record("alice", "one", 600, 0) == 0  # 600 / 10 s = 60 <= 100
    # The second client id adds to the same sensor: 1200 / 10 s = 120.
    assert m.record("alice", "two", 600, 0) == round((120 - 100) / 100 * 10_000)
    assert m.sensors == 1


def test_a_default_quota_is_each_entitys_own() -> None:
    m = manager({entity(None): 100.0, entity(client=None): 100.0})
    assert m.record("alice", "x", 900, 0) == 0
    assert m.record("bob", "x", 900, 0) == 0  # bob's own sensor
    assert m.sensors == 2
    assert m.record("", "one", 900, 0) == 0  # (no user name) default user: ("", "")
    c = manager({entity(client=None): 100.0})
    assert c.record("alice", "one", 900, 0) == 0
    assert c.record("bob", "two", 900, 0) == 0  # per client id
    assert c.record("carol", "one", 900, 0) == 8000  # client "one" again: 1800 / 10 s


def test_quotas_are_per_key() -> None:
    m = ClientQuotaManager(BYTES, WINDOW)
    m.update({entity("alice"): {"consumer_byte_rate": 1.0},
              entity(client=None): {BYTES: 100.0}})
    # alice has no producer_byte_rate: the default client id's applies.
    assert m.quota("alice", "app") == (("", "app"), 100.0)


# ---- throttle ----


def test_throttle_is_the_time_back_to_the_quota() -> None:
    m = manager({entity(client="c"): 1000.0})
    assert m.record("u", "c", 10_000, 0) == 0  # exactly the quota: 10_000 / 10 s
    # 15_000 over 10.5 s: rate 1428.57; (rate - q) / q * window.
    throttle = m.record("u", "c", 5000, 500)
    assert throttle == round((15_000 / 10.5 - 1000) / 1000 * 10_500)  # 4500
    # Nothing recorded for that long brings the rate back to the quota.
    assert 15_000 / ((10_500 + throttle) / 1000) == pytest.approx(1000)


def test_the_request_quota_caps_its_throttle_at_one_sample() -> None:
    capped = manager({entity(client="c"): 10.0}, max_throttle_ms=WINDOW.size_ms)
    assert capped.record("u", "c", 1000, 0) == 1000
    uncapped = manager({entity(client="c"): 10.0})
    assert uncapped.record("u", "c", 1000, 0) == 90_000


def test_unrecord_takes_the_value_back() -> None:
    m = manager({entity(client="c"): 100.0})
    assert m.record("u", "c", 5000, 0) > 0
    m.unrecord("u", "c", 5000, 0)
    assert m.record("u", "c", 1000, 0) == 0  # as if the 5000 had never been


def test_the_most_one_fetch_may_take_is_the_quota_over_samples_minus_one() -> None:
    m = manager({entity(client="c"): 100.0})
    assert m.max_value_in_window("u", "c") == 100.0 * 10
    assert m.max_value_in_window("u", "other") is None


# ---- bounded sensors ----


def test_idle_sensors_are_dropped_after_a_whole_window() -> None:
    m = manager({entity(client=None): 1e9})
    for i in range(1000):
        m.record("u", f"client-{i}", 1, 0)
    assert m.sensors == 1000
    m.record("u", "late", 1, WINDOW.total_ms - 1)  # swept at most once a window
    assert m.sensors == 1001
    m.record("u", "later", 1, WINDOW.total_ms)
    assert m.sensors == 2  # "late" and "later": the rest held nothing any more


def test_sensors_are_capped_least_recently_used_first() -> None:
    m = manager({entity(client=None): 1e9}, max_sensors=3)
    for name in ("a", "b", "c"):
        m.record("u", name, 1, 0)
    m.record("u", "a", 1, 1)  # a is used again
    m.record("u", "d", 1, 2)  # b goes
    assert m.sensors == 3
    m.update({entity(client=None): {BYTES: 0.1}})
    assert m.record("u", "a", 0, 3) > 0  # a kept its bytes
    assert m.record("u", "b", 0, 3) == 0  # b starts again


def test_unlimited_clients_hold_no_sensor() -> None:
    m = manager({entity("alice"): 100.0})
    for i in range(100):
        assert m.record(f"user-{i}", "c", 10**9, 0) == 0
    assert m.sensors == 0


# ---- the managers follow the image ----


def test_quotas_follow_the_image_map() -> None:
    current: dict[QuotaEntity, dict[str, float]] = {}
    quotas = ClientQuotas(lambda: current, WINDOW, clock_ms=lambda: 0)
    request = quotas.for_request("User:alice", "app")
    assert request.produce_bytes_throttle_ms(10**6) == 0
    current = {entity("alice"): {BYTES: 1000.0}}
    assert quotas.for_request("User:alice", "app").produce_bytes_throttle_ms(10**6) > 0
    assert quotas.for_request("User:bob", "app").produce_bytes_throttle_ms(10**6) == 0


# ---- loop time ----


def test_loop_time_counts_the_steps_not_the_awaits() -> None:
    async def handler() -> str:
        time.sleep(0.02)  # on the loop
        await asyncio.sleep(0.2)  # not on the loop
        time.sleep(0.02)
        return "done"

    async def main() -> tuple[str, float]:
        timed = LoopTimed(handler())
        return await timed, timed.seconds()

    result, seconds = asyncio.run(main())
    assert result == "done"
    assert 0.04 <= seconds < 0.24  # the two steps, never the 0.2-s await between them


def test_loop_time_passes_a_cancellation_to_the_coroutine() -> None:
    cleaned: list[bool] = []

    async def handler() -> None:
        try:
            await asyncio.sleep(10)
        finally:
            cleaned.append(True)

    async def main() -> None:
        task = asyncio.ensure_future(LoopTimed(handler()))
        await asyncio.sleep(0)  # one turn: the handler starts and parks in its sleep
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert cleaned == [True]


def test_loop_time_sees_the_running_step() -> None:
    seen: list[float] = []
    timed: LoopTimed[None]

    async def handler() -> None:
        time.sleep(0.03)
        seen.append(timed.seconds())

    async def main() -> None:
        nonlocal timed
        timed = LoopTimed(handler())
        await timed

    asyncio.run(main())
    assert seen[0] >= 0.03
