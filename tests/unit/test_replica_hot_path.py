"""What every acks=all append and every follower fetch asks on the leader is answered without
re-deriving it (issue 28's paced producer at 3,000 partitions): the topic's
min.insync.replicas is parsed once per metadata image, and the leader-epoch lookup of a
follower fetching in the latest epoch copies nothing — with the same answers as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.leader_epochs import LeaderEpochCache
from kraft.errors import Errors
from metadata.image import MetadataImage
from metadata.records import ConfigRecord, ConfigResourceType
from tests.unit.replica_harness import TOPIC, Cluster, batch, run


def test_min_isr_is_parsed_once_per_image_and_a_change_takes_effect(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[str] = []
    original = MetadataImage.topic_setting

    def counted(self: MetadataImage, topic: str, key: str) -> object:
        if key == "min.insync.replicas":
            parsed.append(topic)
        return original(self, topic, key)

    monkeypatch.setattr(MetadataImage, "topic_setting", counted)

    async def scenario(c: Cluster) -> None:
        leader = c.nodes[1]
        assert (await leader.produce(batch(1), acks=-1))[0].error == Errors.NONE
        parsed.clear()
        for _ in range(5):
            assert (await leader.produce(batch(1), acks=-1))[0].error == Errors.NONE
        assert parsed == []  # parsed already for this image (by the first append, or before)
        # The ISR is the leader alone: with min.insync.replicas 2, acks=all is refused.
        c.metadata.replay(ConfigRecord(ConfigResourceType.TOPIC, TOPIC,
                                       "min.insync.replicas", "2"))
        c.publish()
        assert (await leader.produce(batch(1), acks=-1))[0].error == \
            Errors.NOT_ENOUGH_REPLICAS
        assert parsed == [TOPIC]

    run(tmp_path, scenario, replicas=(1, 2), isr=(1,), min_isr=1)


def test_the_latest_epochs_end_is_the_log_end_and_older_epochs_end_where_the_next_starts(
        tmp_path: Path) -> None:
    cache = LeaderEpochCache(str(tmp_path), [(0, 0), (3, 10), (5, 40)])
    assert cache.end_offset_for(5, 77) == (5, 77)  # the latest: the log end
    assert cache.end_offset_for(3, 77) == (3, 40)
    assert cache.end_offset_for(4, 77) == (3, 40)  # none of its own: the one below
    assert cache.end_offset_for(6, 77) == (-1, -1)  # above every entry
    assert cache.end_offset_for(-1, 77) == (-1, -1)
    assert LeaderEpochCache(str(tmp_path), []).end_offset_for(0, 5) == (-1, -1)
