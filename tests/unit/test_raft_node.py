"""The asyncio driver on a real log, as a single voter (no network needed)."""

from __future__ import annotations

import asyncio
import errno
import random
from pathlib import Path

import pytest

from kraft.core import rpc_vote
from kraft.core.config import RaftConfig
from kraft.core.errors import Errors, NotLeaderError, RaftError, RaftInvariantError
from kraft.core.messages import VoteRequest, VoteResponse
from kraft.election_state import ElectionState
from kraft.log.quorum_state import QuorumStateStore
from kraft.log.segmented import SegmentedLog
from kraft.node.raft_node import NodeStoppedError, RaftNode


def single_voter(tmp_path: Path, fetch_max_bytes: int = 8 * 1024 * 1024) -> RaftNode:
    config = RaftConfig("test-cluster", 1, {1: "127.0.0.1:1"}, fetch_max_bytes=fetch_max_bytes)
    log = SegmentedLog(tmp_path / "log")
    return RaftNode(config, log, QuorumStateStore(tmp_path / "quorum-state"),
                    rng=random.Random(1))


async def started(node: RaftNode) -> RaftNode:
    await node.start()
    await asyncio.wait_for(_until(lambda: node.status().state == "Leader"), 5)
    return node


async def _until(condition) -> None:  # type: ignore[no-untyped-def]
    while not condition():
        await asyncio.sleep(0.001)  # yields to the node's tasks; bounded by wait_for


def test_concurrent_appends_share_batches_and_all_commit(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await started(single_voter(tmp_path))
        offsets = await asyncio.gather(*(node.append([f"r{i}".encode()]) for i in range(200)))
        assert sorted(offsets) == list(range(offsets[0], offsets[0] + 200))
        batches = list(node.log.batches(0, node.log.end_offset))
        # One LeaderChange batch, then far fewer data batches than appends.
        assert len(batches) - 1 < 200
        records = [r for b in batches if not b.control for r in b.records]
        assert sorted(records) == sorted(f"r{i}".encode() for i in range(200))
        await node.stop()

    asyncio.run(scenario())


def test_an_operation_is_never_split_across_batches(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await started(single_voter(tmp_path, fetch_max_bytes=1000))
        ops = [[bytes([i]) * 100 for _ in range(6)] for i in range(5)]  # 600 bytes each
        lasts = await asyncio.gather(*(node.append(op) for op in ops))
        for op, last in zip(ops, lasts, strict=True):
            batch = next(b for b in node.log.batches(last, last + 1))
            assert batch.base_offset == last - 5 and list(batch.records) == op
        await node.stop()

    asyncio.run(scenario())


def test_an_oversized_append_fails_alone(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await started(single_voter(tmp_path, fetch_max_bytes=1000))
        small = node.append([b"ok"])
        huge = node.append([b"x" * 2000])
        results = await asyncio.gather(small, huge, return_exceptions=True)
        assert isinstance(results[0], int)
        assert isinstance(results[1], RaftError)
        assert results[1].error == Errors.RECORD_BATCH_TOO_LARGE
        await node.stop()

    asyncio.run(scenario())


def test_appends_fail_with_not_leader_after_resignation(tmp_path: Path) -> None:
    async def scenario() -> None:
        node = await started(single_voter(tmp_path))
        await node.append([b"first"])
        node.core.begin_shutdown(0)  # type: ignore[union-attr]
        with pytest.raises(NotLeaderError):
            await node.append([b"refused"])
        await node.stop()

    asyncio.run(scenario())


# -- a node that cannot make its election state durable stops, and answers nothing ----------


class FailingStore(QuorumStateStore):
    """A quorum-state file on a disk that refuses writes (ENOSPC) once armed."""

    armed = False

    def write(self, state: ElectionState) -> None:
        if self.armed:
            raise OSError(errno.ENOSPC, "No space left on device", self.path)
        super().write(state)


def three_voter_node(tmp_path: Path) -> tuple[RaftNode, FailingStore]:
    voters = {1: "127.0.0.1:1", 2: "127.0.0.1:2", 3: "127.0.0.1:3"}
    config = RaftConfig("test-cluster", 1, voters, election_timeout_ms=60_000)
    store = FailingStore(tmp_path / "quorum-state")
    store.write(ElectionState(5, leader_id=3))  # a follower of 3 in epoch 5
    node = RaftNode(config, SegmentedLog(tmp_path / "log"), store, rng=random.Random(1))
    return node, store


def vote_from(candidate: int, epoch: int) -> VoteRequest:
    return VoteRequest("test-cluster", candidate, epoch, 0, 0, pre_vote=False, voter_id=1)


def test_a_vote_whose_state_write_fails_is_never_granted(tmp_path: Path) -> None:
    """The issue's sequence: the write of Voted(6, 2) fails, the candidate asks again; before,
    the second ask was granted with nothing left to persist while the file said epoch 5."""

    async def scenario() -> None:
        node, store = three_voter_node(tmp_path)
        await node.start()
        store.armed = True
        with pytest.raises(NodeStoppedError):
            await node.handle_request(vote_from(2, 6))
        assert isinstance(node.fatal_error, OSError)
        with pytest.raises(NodeStoppedError):  # the retry: no grant, no answer at all
            await node.handle_request(vote_from(2, 6))
        with pytest.raises(NodeStoppedError):
            await node.append([b"x"])
        assert store.read() == ElectionState(5, leader_id=3)
        await node.stop()

    asyncio.run(scenario())


def test_a_vote_is_answered_only_after_its_state_is_written(tmp_path: Path) -> None:
    async def scenario() -> None:
        node, store = three_voter_node(tmp_path)
        await node.start()
        response = await node.handle_request(vote_from(2, 6))
        assert isinstance(response, VoteResponse) and response.vote_granted
        assert store.read() == ElectionState(6, voted_id=2)
        again = await node.handle_request(vote_from(2, 6))  # idempotent
        assert isinstance(again, VoteResponse) and again.vote_granted
        assert node.fatal_error is None
        await node.stop()

    asyncio.run(scenario())


def test_a_broken_invariant_while_handling_a_request_stops_the_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(core: object, request: object, now: int) -> None:
        raise RaftInvariantError("two leaders in epoch 6: 2 and 3")

    async def scenario() -> None:
        node, _ = three_voter_node(tmp_path)
        await node.start()
        monkeypatch.setattr(rpc_vote, "handle_request", broken)
        with pytest.raises(NodeStoppedError):
            await node.handle_request(vote_from(2, 6))
        assert isinstance(node.fatal_error, RaftInvariantError)
        monkeypatch.undo()
        with pytest.raises(NodeStoppedError):  # answers nothing afterwards
            await node.handle_request(vote_from(2, 6))
        await node.stop()

    asyncio.run(scenario())
