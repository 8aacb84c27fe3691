"""The broker's Prometheus metrics read the role's state at scrape time."""

from __future__ import annotations

import time

from prometheus_client import generate_latest

from broker.metrics import BrokerMetrics, BrokerSample
from broker.state import BrokerState


def scrape(metrics: BrokerMetrics) -> dict[str, float]:
    out = {}
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_state_offsets_and_lag() -> None:
    metrics = BrokerMetrics()
    assert not any(k.startswith("kraft_broker_state") for k in scrape(metrics))  # unbound
    appended = int(time.time() * 1000) - 2_000
    metrics.bind(lambda: BrokerSample(BrokerState.RECOVERY, applied_offset=41,
                                      high_watermark=50, last_record_timestamp_ms=appended,
                                      initial_catch_up_s=None))
    metrics.image_load.observe(0.003)
    values = scrape(metrics)
    assert values['kraft_broker_state{state="recovery"}'] == 1.0
    assert values['kraft_broker_state{state="running"}'] == 0.0
    assert {k for k in values if k.startswith("kraft_broker_state")} == {
        f'kraft_broker_state{{state="{s}"}}' for s in
        ("starting", "recovery", "running", "pending_controlled_shutdown", "shutting_down")}
    assert values["kraft_broker_last_applied_offset"] == 41
    assert values["kraft_broker_metadata_lag_records"] == 8  # offsets 42..49 are committed
    assert 2_000 <= values["kraft_broker_metadata_lag_ms"] < 60_000
    assert values["kraft_broker_image_load_seconds_count"] == 1
    assert "kraft_broker_initial_catch_up_seconds" not in values


def test_caught_up_broker_without_records_has_no_lag() -> None:
    metrics = BrokerMetrics()
    metrics.bind(lambda: BrokerSample(BrokerState.RUNNING, applied_offset=49,
                                      high_watermark=50, last_record_timestamp_ms=-1,
                                      initial_catch_up_s=1.5))
    values = scrape(metrics)
    assert values["kraft_broker_metadata_lag_records"] == 0
    assert values["kraft_broker_metadata_lag_ms"] == 0
    assert values["kraft_broker_initial_catch_up_seconds"] == 1.5
