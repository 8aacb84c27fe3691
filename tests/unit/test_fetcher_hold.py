"""A large metadata change applied in turns must not cut a follower's long poll at every turn:
each cut starts a new fetch session, a full fetch of every partition so far (O(n^2) for
thousands of partitions added turn by turn). Partitions added meanwhile join the fetcher's next
round; the end of the change cuts each long poll once. A small change (a leader moving) still
cuts it at once: a new follower must not wait out a long poll that does not include it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker.replica.manager import APPLY_CHUNK
from tests.unit.replica_harness import TOPIC, Cluster


def test_a_small_change_cuts_the_long_poll_at_once(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path)
        cluster.create_topic(replicas=(1, 2, 3), partitions=2)
        cluster.start()
        try:
            fetcher = cluster.nodes[2].fetcher(1)
            assert set(fetcher.partitions) == {(TOPIC, 0), (TOPIC, 1)}
            assert fetcher._restart
        finally:
            await cluster.close()

    asyncio.run(main())


def test_a_change_applied_in_turns_cuts_each_long_poll_once_at_its_end(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path)
        cluster.start()
        node = cluster.nodes[2]
        count = APPLY_CHUNK * 3
        cluster.create_topic(replicas=(1, 2, 3), partitions=count)
        try:
            manager = node.manager
            manager.on_metadata_update(None, cluster.metadata.image, None)  # type: ignore[arg-type]
            task = manager._apply_task
            assert task is not None, "a change this large is applied in turns"
            restarts: list[bool] = []
            while not task.done():
                await asyncio.sleep(0)
                fetcher = manager.fetchers.fetchers.get(1)
                if fetcher is not None and not task.done():
                    restarts.append(fetcher._restart)
                    assert manager.fetchers.holding
            assert restarts and not any(restarts), "no long poll was cut during the change"
            fetcher = manager.fetchers.fetchers[1]
            assert len(fetcher.partitions) == count
            assert fetcher._restart and not manager.fetchers.holding  # cut once, at the end
        finally:
            await cluster.close()

    asyncio.run(main())


def test_a_superseded_change_still_releases_the_fetchers(tmp_path: Path) -> None:
    async def main() -> None:
        cluster = Cluster(tmp_path)
        cluster.start()
        node = cluster.nodes[2]
        cluster.create_topic(replicas=(1, 2, 3), partitions=APPLY_CHUNK * 3)
        try:
            manager = node.manager
            manager.on_metadata_update(None, cluster.metadata.image, None)  # type: ignore[arg-type]
            first = manager._apply_task
            assert first is not None
            await asyncio.sleep(0)  # the first turn runs
            cluster.change(0, isr=(1, 2))  # a newer image replaces the rest of the work
            second = manager._apply_task
            assert second is not None and second is not first
            await asyncio.gather(first, second, return_exceptions=True)
            # The logs' creation goes on in its own tasks (off the loop) and holds them too.
            await asyncio.gather(*list(manager._create_tasks), return_exceptions=True)
            assert not manager.fetchers.holding
            assert manager.fetchers.fetchers[1]._restart
        finally:
            await cluster.close()

    asyncio.run(main())
