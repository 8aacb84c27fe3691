"""KIP-853 with real processes, driven as an operator would: a dynamic quorum started from one
`--standalone` controller grows to three and five voters and shrinks back to three (the leader
removed once) with `kraft-admin quorum add-controller / remove-controller`, and a voter whose
disk is wiped is replaced under a new directory id; a writer appends all along, and every
record it had acknowledged is in the log of every remaining voter at the end."""

from __future__ import annotations

import json
import shutil
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from harness.cluster import ProcessCluster, run_cli, wait_for
from kraft.core.errors import Errors
from kraft.log.segmented import SegmentedLog
from metadata.topics import METADATA_PARTITION_DIR

WAIT_S = 20
SETTINGS: dict[str, str] = {}  # Raft timings as configured by default


@pytest.fixture
def dynamic_cluster(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Callable[..., ProcessCluster]]:
    """Clusters with bootstrap servers only (no controller.quorum.voters); every process is
    killed at teardown, and the node logs are printed when the test failed."""
    clusters: list[ProcessCluster] = []

    def factory(size: int, **extra: str) -> ProcessCluster:
        cluster = ProcessCluster(tmp_path / f"cluster-{len(clusters)}", size,
                                 {**SETTINGS, **extra}, dynamic=True)
        clusters.append(cluster)
        return cluster

    yield factory
    for cluster in clusters:
        cluster.stop_all()
        report = getattr(request.node, "rep_call", None)
        if report is not None and report.failed:
            for node_id in cluster.nodes:
                print(f"----- node {node_id} log -----\n{cluster.logs(node_id)[-6000:]}")


# -- the operator's view: kraft-admin ------------------------------------------------------------


def admin(cluster: ProcessCluster, via: int, *args: str) -> Any:
    """One `kraft-admin --bootstrap-controller` command through node `via` (any controller:
    the tool follows the leader); its --json output for describe, its line otherwise."""
    json_flag = ["--json"] if args[:2] == ("quorum", "describe") else []
    out = run_cli("server.admin_cli", "--bootstrap-controller", cluster.nodes[via].endpoint,
                  *args, *json_flag)
    assert out.returncode == 0, f"kraft-admin {' '.join(args)}: {out.stderr}"
    return json.loads(out.stdout) if json_flag else out.stdout.strip()


def voter_keys(facts: dict[str, Any]) -> list[tuple[int, str]]:
    return [(v["id"], v["directoryId"]) for v in facts["currentVoters"]]


def observer_keys(facts: dict[str, Any]) -> list[tuple[int, str]]:
    return [(o["id"], o["directoryId"]) for o in facts["currentObservers"]]


def key_of(cluster: ProcessCluster, node_id: int) -> tuple[int, str]:
    """The replica key the node itself reports (its meta.properties directory.id), once it
    serves."""
    status = wait_for(lambda: cluster.status(node_id), WAIT_S, f"node {node_id} to serve")
    assert status.directory_id, f"node {node_id} reports no directory id"
    return node_id, status.directory_id


def wait_observer(cluster: ProcessCluster, via: int, key: tuple[int, str]) -> None:
    """Until describe --status lists `key` among the observers."""
    wait_for(lambda: key in observer_keys(admin(cluster, via, "quorum", "describe", "--status")),
             WAIT_S, f"{key} to show as an observer", poll_s=0.1)


def wait_caught_up_observer(cluster: ProcessCluster, via: int, key: tuple[int, str]) -> None:
    """Until the leader lists `key` as an Observer that has reached its end once (what it
    checks before an add: LastCaughtUpTimestamp set, spec 4.1) and is within a few records."""

    def caught_up() -> bool:
        rows = admin(cluster, via, "quorum", "describe", "--replication")
        return any((r["nodeId"], r["directoryId"]) == key and r["status"] == "Observer"
                   and r["lastCaughtUpTimestamp"] >= 0 and 0 <= r["lag"] < 100 for r in rows)

    wait_for(caught_up, WAIT_S, f"observer {key} to catch up", poll_s=0.1)


def add_controller(cluster: ProcessCluster, via: int, node_id: int) -> int:
    """add-controller once `node_id` has caught up, as docs/operations.md says: on
    REQUEST_TIMED_OUT or NOT_LEADER_OR_FOLLOWER, describe --status first (a timed-out add
    may have committed), and retry only if it did not. Returns the retries it took."""
    key = key_of(cluster, node_id)
    wait_caught_up_observer(cluster, via, key)
    for retries in range(3):
        out = run_cli("server.admin_cli", "--bootstrap-controller", cluster.nodes[via].endpoint,
                      "quorum", "add-controller", "--command-config",
                      str(cluster.nodes[node_id].config_path))
        if out.returncode == 0:
            line = out.stdout.strip()
            assert line.startswith(f"Added controller {node_id} with directory id {key[1]} "), line
            return retries
        assert "REQUEST_TIMED_OUT" in out.stderr or "NOT_LEADER_OR_FOLLOWER" in out.stderr, out
        print(f"add-controller {node_id}: {out.stderr.strip()}")
        if key in voter_keys(admin(cluster, via, "quorum", "describe", "--status")):
            return retries + 1
        wait_caught_up_observer(cluster, via, key)
    raise AssertionError(f"add-controller {node_id} failed three times")


def remove_controller(cluster: ProcessCluster, via: int, key: tuple[int, str]) -> None:
    line = admin(cluster, via, "quorum", "remove-controller", "--controller-id", str(key[0]),
                 "--controller-directory-id", key[1])
    assert line == f"Removed KRaft controller {key[0]} with directory id {key[1]}", line


def assert_voters(cluster: ProcessCluster, via: int, keys: list[tuple[int, str]]) -> None:
    """describe --status lists exactly `keys` as voters, each with its endpoint."""
    facts = admin(cluster, via, "quorum", "describe", "--status")
    assert sorted(voter_keys(facts)) == sorted(keys), facts
    for voter in facts["currentVoters"]:
        assert voter["endpoints"] == [f"CONTROLLER://{cluster.nodes[voter['id']].endpoint}"]


# -- the load: a writer that remembers what was acknowledged --------------------------------------


class Writer(threading.Thread):
    """Appends one record at a time through the TestHooks service of whichever node leads;
    `acked` maps each acknowledged (committed) offset to its record. Refusals and dropped
    connections during elections are retried with the next record."""

    def __init__(self, cluster: ProcessCluster, candidates: set[int]) -> None:
        super().__init__(daemon=True)
        self.cluster = cluster
        self.candidates = candidates  # the nodes that may lead; the test updates it
        self.acked: dict[int, bytes] = {}
        self.stop = threading.Event()
        self.failure: BaseException | None = None

    def leader(self) -> int | None:
        best: tuple[int, int] | None = None
        for node_id in sorted(self.candidates):
            try:
                status = self.cluster.status(node_id)
            except grpc.RpcError:
                continue
            if status.state == "Leader" and (best is None or status.epoch > best[0]):
                best = (status.epoch, node_id)
        return None if best is None else best[1]

    def run(self) -> None:
        sequence = 0
        leader: int | None = None
        try:
            while not self.stop.is_set():
                leader = leader or self.leader()
                if leader is None:
                    self.stop.wait(0.02)  # no leader yet: poll again
                    continue
                record = f"record-{sequence}".encode()
                sequence += 1
                try:
                    resp = self.cluster.append(leader, [record])
                except grpc.RpcError:
                    leader = None
                    continue
                if resp.error_code == Errors.NONE:
                    assert resp.last_offset not in self.acked, resp
                    self.acked[resp.last_offset] = record
                else:
                    leader = None
        except BaseException as exc:  # surfaced by finish()
            self.failure = exc

    def count(self) -> int:
        return len(self.acked)

    def wait_progress(self, what: str) -> None:
        """Until more records are acknowledged than now: the quorum still commits."""
        before = self.count()
        wait_for(lambda: self.count() >= before + 20, WAIT_S, f"writes to commit {what}")

    def finish(self) -> dict[int, bytes]:
        self.stop.set()
        self.join(timeout=WAIT_S)
        assert not self.is_alive() and self.failure is None, self.failure
        return dict(self.acked)


def log_records(cluster: ProcessCluster, node_id: int) -> dict[int, bytes]:
    """offset -> record of a stopped node's metadata log, read from its files."""
    log = SegmentedLog(cluster.data_dir(node_id) / METADATA_PARTITION_DIR)
    try:
        out = {}
        for batch in log.batches(log.start_offset, log.end_offset):
            for i, record in enumerate(batch.records):
                out[batch.base_offset + i] = record
        return out
    finally:
        log.close()


def assert_nothing_lost(cluster: ProcessCluster, writer: Writer, voters: list[int]) -> None:
    """Stop the writer; once every voter has flushed the leader's end (its acknowledged end in
    DescribeQuorum: a follower fetches only what it flushed), kill everything and check that
    every acknowledged record sits at its offset in every voter's files."""
    acked = writer.finish()
    assert len(acked) > 100, f"only {len(acked)} writes acknowledged"
    leader = wait_for(lambda: writer.leader(), WAIT_S, "a leader")
    end = max(acked) + 1

    def flushed() -> bool:
        described = cluster.describe(leader)
        ends = {r.replica_id: r.log_end_offset for r in described.current_voters}
        return sorted(ends) == sorted(voters) and min(ends.values()) >= end

    wait_for(flushed, WAIT_S, f"voters {voters} to flush offset {end}")
    cluster.stop_all()
    for node_id in voters:
        held = log_records(cluster, node_id)
        missing = [o for o, record in acked.items() if held.get(o) != record]
        assert not missing, f"node {node_id} lost acknowledged offsets {missing[:10]}"


def stop_removed(cluster: ProcessCluster, node_id: int) -> None:
    """A removed controller is stopped as the procedure says (spec 9.3), cleanly."""
    cluster.signal(node_id, signal.SIGTERM)
    assert cluster.wait_exit(node_id, WAIT_S) == 0


def start_dynamic(
    make: Callable[..., ProcessCluster], size: int, **extra: str
) -> ProcessCluster:
    """`size` controllers with bootstrap servers only: 1 formatted --standalone and leading
    alone, the others -N and running as observers."""
    cluster = make(size, **extra)
    cluster.format_dynamic(standalone=1)
    cluster.start(1)
    wait_for(lambda: cluster.leader(among={1}), WAIT_S, "the standalone controller to lead")
    for node_id in range(2, size + 1):
        cluster.start(node_id)
    facts = admin(cluster, 1, "quorum", "describe", "--status")
    assert voter_keys(facts) == [key_of(cluster, 1)], facts
    return cluster


# -- the tests -----------------------------------------------------------------------------------


def test_grow_1_3_5_and_shrink_to_3_removing_the_leader_under_load(
    dynamic_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = start_dynamic(dynamic_cluster, 5)
    writer = Writer(cluster, {1})
    writer.start()
    writer.wait_progress("on the standalone voter")
    epoch = cluster.status(1).epoch
    voters = [1]
    for node_id in (2, 3, 4, 5):
        retries = add_controller(cluster, 1, node_id)
        if node_id == 2:
            # A lone voter hears from no one; with a second voter its check-quorum must
            # start afresh, not find the window since its election already expired.
            assert retries == 0 and cluster.status(1).epoch == epoch, (
                "the standalone leader lost its leadership when its first voter was added")
        voters.append(node_id)
        writer.candidates = set(voters)
        assert_voters(cluster, node_id, [key_of(cluster, n) for n in voters])
        writer.wait_progress(f"with voters {voters}")

    # Shrink 5 -> 3: the leader first (it resigns once the removal commits), then a follower.
    leader = wait_for(writer.leader, WAIT_S, "a leader")
    for target in (leader, max(set(voters) - {leader})):
        key = key_of(cluster, target)
        via = min(set(voters) - {target})
        remove_controller(cluster, via, key)
        voters.remove(target)
        writer.candidates = set(voters)
        new_leader = wait_for(lambda: writer.leader(), WAIT_S, "a leader among the voters left")
        assert new_leader in voters
        assert_voters(cluster, via, [key_of(cluster, n) for n in voters])
        # The removed replica carries on as an observer until it is stopped.
        wait_observer(cluster, via, key)
        assert cluster.status(target).state != "Leader"
        stop_removed(cluster, target)
        writer.wait_progress(f"with voters {voters}")
    assert len(voters) == 3
    assert_nothing_lost(cluster, writer, voters)


def test_a_voter_with_a_wiped_disk_is_replaced_under_a_new_directory_id(
    dynamic_cluster: Callable[..., ProcessCluster],
) -> None:
    cluster = start_dynamic(dynamic_cluster, 3)
    for node_id in (2, 3):
        add_controller(cluster, 1, node_id)
    writer = Writer(cluster, {1, 2, 3})
    writer.start()
    writer.wait_progress("with three voters")
    lost = max({1, 2, 3} - {wait_for(writer.leader, WAIT_S, "a leader")})
    old_key = key_of(cluster, lost)

    # The disk is gone: the process dies with it, a new disk is formatted -N and started.
    cluster.kill(lost)
    shutil.rmtree(cluster.data_dir(lost))
    cluster.format_node(lost, cluster.cluster_id, "--no-initial-controllers")
    cluster.start(lost)
    new_key = key_of(cluster, lost)
    assert new_key != old_key
    writer.wait_progress("while the old key is a voter that makes no progress")

    via = min({1, 2, 3} - {lost})
    # The new replica is an observer; its old key is still a voter (it acknowledges nothing).
    wait_caught_up_observer(cluster, via, new_key)
    facts = admin(cluster, via, "quorum", "describe", "--status")
    assert old_key in voter_keys(facts) and new_key not in voter_keys(facts), facts
    assert new_key in observer_keys(facts), facts
    # Ids are unique among voters: adding the new key first is refused, with one line.
    out = run_cli("server.admin_cli", "--bootstrap-controller", cluster.nodes[via].endpoint,
                  "quorum", "add-controller", "--command-config",
                  str(cluster.nodes[lost].config_path))
    assert out.returncode == 1 and "DUPLICATE_VOTER" in out.stderr, out
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr

    remove_controller(cluster, via, old_key)
    assert_voters(cluster, via, [key_of(cluster, n) for n in sorted({1, 2, 3} - {lost})])
    writer.wait_progress("with the two voters left")
    add_controller(cluster, via, lost)
    assert_voters(cluster, via, [key_of(cluster, n) for n in (1, 2, 3)])
    assert new_key in voter_keys(admin(cluster, lost, "quorum", "describe", "--status"))
    writer.wait_progress("with the replaced voter")
    assert_nothing_lost(cluster, writer, [1, 2, 3])


def test_real_controllers_keep_their_leader_and_metadata_while_voters_are_added(
    dynamic_cluster: Callable[..., ProcessCluster],
) -> None:
    """The same growth with the metadata controller on every node (no test hooks): adding a
    voter needs no election, and the controller's own writes carry on across the change."""
    cluster = start_dynamic(dynamic_cluster, 3, **{"internal.test.hooks.enable": "false"})
    epoch = cluster.status(1).epoch
    for node_id, partitions in ((2, "4"), (3, "5")):
        admin(cluster, 1, "configs", "alter", "--entity-type", "brokers", "--entity-default",
              "--add-config", f"num.partitions={partitions}")
        assert add_controller(cluster, 1, node_id) == 0
        status = cluster.status(1)
        assert (status.state, status.epoch) == ("Leader", epoch), (
            f"adding controller {node_id} cost controller 1 its leadership: {status}")
    assert_voters(cluster, 2, [key_of(cluster, n) for n in (1, 2, 3)])
    features = admin(cluster, 3, "features", "describe")
    assert "Feature: kraft.version\tSupportedMinVersion: 0\tSupportedMaxVersion: 1\t" \
           "FinalizedVersionLevel: 1" in features, features
    for node_id in (1, 2, 3):  # each node answers from its own image
        wait_for(lambda n=node_id: "num.partitions=5" in admin(
            cluster, n, "configs", "describe", "--entity-type", "brokers", "--entity-default"),
            WAIT_S, f"node {node_id}'s image to hold the last write")
