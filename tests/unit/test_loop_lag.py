"""kraft_event_loop_lag_seconds (issue 15): a wakeup scheduled every 50 ms that fires late
shows how long something blocked the event loop."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path

from kraft.core.config import RaftConfig
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.metrics import LoopLagSampler, RaftMetrics
from kraft.node.raft_node import RaftNode


def _lag(metrics: RaftMetrics) -> tuple[float, float, float]:
    """(count, sum, count of samples at or below 50 ms)."""
    registry = metrics.registry
    count = registry.get_sample_value("kraft_event_loop_lag_seconds_count") or 0.0
    total = registry.get_sample_value("kraft_event_loop_lag_seconds_sum") or 0.0
    fast = registry.get_sample_value("kraft_event_loop_lag_seconds_bucket", {"le": "0.05"}) or 0.0
    return count, total, fast


async def _next_sample(sampler: LoopLagSampler) -> None:
    sampler.sampled.clear()
    await asyncio.wait_for(sampler.sampled.wait(), 5)


def test_a_blocked_loop_shows_in_the_histogram() -> None:
    metrics = RaftMetrics(1)

    async def scenario() -> None:
        sampler = LoopLagSampler(metrics.event_loop_lag, interval_s=0.05)
        task = asyncio.create_task(sampler.run())
        await _next_sample(sampler)  # the sampler is between two wakeups now
        count, total, _ = _lag(metrics)
        time.sleep(0.1)  # the stall under test: nothing else runs on the loop meanwhile
        await _next_sample(sampler)
        after_count, after_total, after_fast = _lag(metrics)
        assert after_count == count + 1
        # Asleep 50 ms of its interval when the stall began at most, so ≥ 50 ms late.
        assert after_total - total >= 0.05
        assert after_count - after_fast == 1  # the sample sits above the 50 ms bucket
        assert sampler.max_lag_s >= 0.05
        task.cancel()

    asyncio.run(scenario())


def test_the_node_starts_the_sampler_with_its_registry(tmp_path: Path) -> None:
    config = RaftConfig("test-cluster", 1, {1: "127.0.0.1:1"})
    node = RaftNode(config, SegmentedLog(tmp_path / "log"),
                    QuorumStateStore(tmp_path / "quorum-state"), rng=random.Random(1))

    async def scenario() -> None:
        await node.start()
        await _next_sample(node.loop_lag)
        time.sleep(0.1)
        await _next_sample(node.loop_lag)
        assert node.loop_lag.max_lag_s >= 0.05
        count, _, fast = _lag(node.metrics)
        assert count >= 2 and count - fast >= 1
        await node.stop()

    asyncio.run(scenario())
