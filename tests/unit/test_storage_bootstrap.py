"""kraft-storage format's KIP-853 flags: --standalone, --initial-controllers,
--no-initial-controllers, their refusals (spec R3.1, T25) and the bootstrap snapshot 0-0."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent import futures
from pathlib import Path

import grpc
import pytest

from kraft.core.voters import ReplicaKey, VoterNode, VoterSet
from kraft.errors import Errors
from kraft.log.codec import KRAFT_VERSION, KRAFT_VOTERS
from kraft.log.meta_properties import StorageError, random_uuid, read_meta_properties
from kraft.log.snapshots import verify_snapshot_file
from kraft.rpc import raft_pb2 as pb
from kraft.rpc import raft_pb2_grpc as rpc
from server import format_probe
from server.config import load_config
from server.quorum_bootstrap import (
    InitialController,
    parse_initial_controller,
    parse_initial_controllers,
    parse_release_version,
)
from server.storage import ensure_formatted
from server.storage_cli import main
from tests.unit.test_admin_quorum import FakeQuorum

CLUSTER = "MkU3OEVBNTcwNTJENDM2Qg"
D1, D2, D3 = "3DOJ8GF4TLuIQcDdnvI4dQ", "q1Sh-9_ISia_zwGINzRvyQ", "aR9kVtKfQxK2n5sYrMZ1cg"
CHECKPOINT = Path("__cluster_metadata-0") / "00000000000000000000-0000000000.checkpoint"


def write_config(
    tmp_path: Path, *, node_id: int = 1, roles: str = "controller", voters: str = "",
    port: int = 9093, extra: str = "", bootstrap: str = "127.0.0.1:9093",
) -> Path:
    """A node whose log dir is tmp_path/data; dynamic (bootstrap servers only) by default."""
    if roles == "broker":
        listeners = f"PLAINTEXT://127.0.0.1:{port}"
    elif "broker" in roles:
        listeners = f"PLAINTEXT://127.0.0.1:{port + 100},CONTROLLER://127.0.0.1:{port}"
    else:
        listeners = f"CONTROLLER://127.0.0.1:{port}"
    quorum = (f"controller.quorum.voters={voters}\n" if voters
              else f"controller.quorum.bootstrap.servers={bootstrap}\n")
    path = tmp_path / f"node-{node_id}.properties"
    path.write_text(
        f"process.roles={roles}\nnode.id={node_id}\n{quorum}listeners={listeners}\n"
        f"controller.listener.names=CONTROLLER\nlog.dirs={tmp_path / 'data'}\n{extra}"
    )
    return path


def run(capsys: pytest.CaptureFixture[str], *argv: str | Path) -> tuple[int, str, str]:
    code = main([str(arg) for arg in argv])
    out, err = capsys.readouterr()
    return code, out, err


def fmt(capsys: pytest.CaptureFixture[str], path: Path, *flags: str) -> tuple[int, str, str]:
    return run(capsys, "format", "-t", CLUSTER, "-c", path, *flags)


def bootstrap_snapshot(tmp_path: Path) -> tuple[int, VoterSet]:
    """(kraft.version, voters) of the 0-0 snapshot, which must verify as a snapshot."""
    info = verify_snapshot_file(str(tmp_path / "data" / CHECKPOINT))
    assert info.records == 0  # control records only: no metadata state
    kinds = [kind for kind, _ in info.control_records]
    assert kinds == [KRAFT_VERSION, KRAFT_VOTERS]
    version_body, voters_body = (body for _, body in info.control_records)
    return int(str(version_body["kRaftVersion"])), VoterSet.from_record(voters_body)


def directory_id(tmp_path: Path) -> str | None:
    meta = read_meta_properties(str(tmp_path / "data"))
    assert meta is not None
    return meta.directory_id


# -- parsing --initial-controllers -------------------------------------------------------------


def test_parse_an_entry() -> None:
    assert parse_initial_controller(f" 1@c1.example:9093:{D1} ") == InitialController(
        1, "c1.example", 9093, D1)
    ipv6 = parse_initial_controller(f"2@[::1]:9094:{D2}")
    assert ipv6 == InitialController(2, "::1", 9094, D2)
    assert (ipv6.endpoint, str(ipv6)) == ("[::1]:9094", f"2@[::1]:9094:{D2}")


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (f"c1:9093:{D1}", "no @ after the node id"),
        (f"@c1:9093:{D1}", "the node id '' is not an integer >= 0"),
        (f"-1@c1:9093:{D1}", "the node id '-1' is not an integer >= 0"),
        (f"x@c1:9093:{D1}", "the node id 'x' is not an integer >= 0"),
        (f"1@:9093:{D1}", "the host is empty"),
        (f"1@[::1:9093:{D1}", "the host begins with [ but has no ]"),
        ("1@c1", "no :port after the host"),
        (f"1@[::1]9093:{D1}", "no :port after the host"),
        ("1@c1:9093", "no :directoryId after the port"),
        (f"1@c1:0:{D1}", "the port '0' is not between 1 and 65535"),
        (f"1@c1:70000:{D1}", "the port '70000' is not between 1 and 65535"),
        (f"1@c1:x:{D1}", "the port 'x' is not between 1 and 65535"),
        ("1@c1:9093:not-a-uuid", "the directory id 'not-a-uuid' is not a valid Uuid (make one "
         "with kraft-storage random-uuid)"),
        ("1@c1:9093:AAAAAAAAAAAAAAAAAAAAAA", "the directory id 'AAAAAAAAAAAAAAAAAAAAAA' is not a "
         "valid Uuid (make one with kraft-storage random-uuid)"),
    ],
)
def test_bad_entries_are_named(entry: str, reason: str) -> None:
    with pytest.raises(StorageError) as info:
        parse_initial_controller(entry)
    assert str(info.value) == (
        f"Invalid --initial-controllers entry {entry!r}: {reason}. Expected "
        "id@host:port:directoryId, e.g. 1@controller-1:9093:<kraft-storage random-uuid>."
    )


def test_parse_a_list() -> None:
    controllers = parse_initial_controllers(f"2@h:2:{D2},1@h:1:{D1},")
    assert [c.node_id for c in controllers] == [1, 2]  # sorted by id; a trailing comma is fine


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--initial-controllers lists no controllers: give id@host:port:directoryId,..."),
        (f"1@h:1:{D1},1@h:2:{D2}", "Node id 1 was specified more than once in "
         "--initial-controllers: ids are unique in a voter set."),
        (f"1@h:1:{D1},2@h:2:{D1}", f"The directory id {D1} of 2 is also that of 1 in "
         "--initial-controllers: give each controller its own kraft-storage random-uuid."),
    ],
)
def test_bad_lists(text: str, message: str) -> None:
    with pytest.raises(StorageError) as info:
        parse_initial_controllers(text)
    assert str(info.value) == message


def test_release_versions() -> None:
    assert parse_release_version("3.9") == parse_release_version("3.9-IV0") == 21
    assert parse_release_version("3.8") == 20
    assert parse_release_version("4.0") == 25  # known, refused when formatting (below)
    with pytest.raises(StorageError, match=r"Unknown release version '9\.9'"):
        parse_release_version("9.9")


# -- format --standalone ----------------------------------------------------------------------


def test_standalone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path, extra="advertised.listeners=CONTROLLER://c1.example:9093\n")
    code, out, err = fmt(capsys, path, "--standalone")
    assert (code, err) == (0, "")
    version, voters = bootstrap_snapshot(tmp_path)
    own = directory_id(tmp_path)
    assert own is not None
    assert version == 1
    assert voters == VoterSet.of([VoterNode(ReplicaKey(1, own), "c1.example:9093")])
    assert out.splitlines() == [
        f"Formatting metadata directory {tmp_path / 'data'} with cluster.id {CLUSTER} and "
        "node.id 1.",
        f"Wrote the bootstrap snapshot {tmp_path / 'data' / CHECKPOINT} with kraft.version 1 "
        f"and the voters 1@c1.example:9093:{own}.",
    ]
    assert ensure_formatted(load_config(path)) == CLUSTER
    # Each --standalone is a new replica key: a fresh directory id every time.
    other = tmp_path / "other"
    other.mkdir()
    assert fmt(capsys, write_config(other), "-s")[0] == 0
    assert directory_id(other) != own


def test_standalone_with_a_separate_metadata_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, extra=f"metadata.log.dir={tmp_path / 'meta'}\n")
    assert fmt(capsys, path, "-s")[0] == 0
    assert (tmp_path / "meta" / CHECKPOINT).exists()
    assert not (tmp_path / "data" / "__cluster_metadata-0").exists()
    meta = read_meta_properties(str(tmp_path / "meta"))
    assert meta is not None
    info = verify_snapshot_file(str(tmp_path / "meta" / CHECKPOINT))
    voters = VoterSet.from_record(info.control_records[1][1])
    assert voters.key_of(1) == ReplicaKey(1, str(meta.directory_id))


def test_ignore_formatted_writes_no_second_bootstrap_snapshot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path)
    assert fmt(capsys, path, "-N")[0] == 0
    code, out, _ = fmt(capsys, path, "-s", "--ignore-formatted")
    assert (code, out) == (0, "All of the log directories are already formatted.\n")
    assert not (tmp_path / "data" / CHECKPOINT).exists()


def test_a_failed_snapshot_write_leaves_the_directory_unformatted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "__cluster_metadata-0").write_text("a file, not a directory")
    code, _, err = fmt(capsys, write_config(tmp_path), "-s")
    assert code == 1
    assert err == (
        f"kraft-storage: error: Cannot write the bootstrap snapshot "
        f"{tmp_path / 'data' / CHECKPOINT}: File exists.\n"
    )
    assert read_meta_properties(str(tmp_path / "data")) is None


# -- format --initial-controllers / --no-initial-controllers ----------------------------------


def test_initial_controllers_a_listed_node_adopts_its_directory_id(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = f"1@127.0.0.1:9093:{D1},2@127.0.0.1:9094:{D2},3@127.0.0.1:9095:{D3}"
    code, _, err = fmt(capsys, write_config(tmp_path, node_id=2, port=9094), "-I", text)
    assert (code, err) == (0, "")
    assert directory_id(tmp_path) == D2
    version, voters = bootstrap_snapshot(tmp_path)
    assert version == 1
    assert [(v.key, v.endpoint, v.listener) for v in voters] == [
        (ReplicaKey(1, D1), "127.0.0.1:9093", "CONTROLLER"),
        (ReplicaKey(2, D2), "127.0.0.1:9094", "CONTROLLER"),
        (ReplicaKey(3, D3), "127.0.0.1:9095", "CONTROLLER"),
    ]


def test_initial_controllers_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    unlisted = tmp_path / "unlisted"
    unlisted.mkdir()
    code, _, err = fmt(capsys, write_config(unlisted, node_id=4),
                       "--initial-controllers", f"1@127.0.0.1:9093:{D1}")
    assert code == 0
    assert err == (
        "kraft-storage: warning: node 4 is not one of --initial-controllers: it starts as an "
        "observer; make it a voter later with kraft-admin quorum add-controller.\n"
    )
    assert directory_id(unlisted) not in (None, D1)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, _, err = fmt(capsys, write_config(elsewhere), "-I", f"1@10.0.0.1:9093:{D1}")
    assert code == 0
    assert err == (
        f"kraft-storage: warning: this node's entry 1@10.0.0.1:9093:{D1} in "
        "--initial-controllers names 10.0.0.1:9093, but its advertised controller listener is "
        "127.0.0.1:9093; the other controllers will connect to 10.0.0.1:9093.\n"
    )


@pytest.mark.parametrize(
    ("roles", "voters"),
    [("controller", ""), ("broker", ""), ("broker", "1@127.0.0.1:9093"),
     ("controller", "1@127.0.0.1:9093")],
)
def test_no_initial_controllers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], roles: str, voters: str
) -> None:
    path = write_config(tmp_path, node_id=1 if roles == "controller" else 7, roles=roles,
                        voters=voters)
    code, _, err = fmt(capsys, path, "--no-initial-controllers")
    assert (code, err) == (0, "")
    assert directory_id(tmp_path) is not None
    assert not (tmp_path / "data" / "__cluster_metadata-0").exists()


@pytest.mark.parametrize(
    ("roles", "voters"), [("broker", ""), ("controller", "1@127.0.0.1:9093")]
)
def test_no_flag_for_brokers_and_static_controllers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], roles: str, voters: str
) -> None:
    path = write_config(tmp_path, node_id=1 if roles == "controller" else 7, roles=roles,
                        voters=voters)
    assert fmt(capsys, path)[:3:2] == (0, "")
    assert not (tmp_path / "data" / "__cluster_metadata-0").exists()


def test_combined_node_standalone(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert fmt(capsys, write_config(tmp_path, roles="broker,controller"), "-s")[0] == 0
    _, voters = bootstrap_snapshot(tmp_path)
    assert voters.endpoints() == {1: "127.0.0.1:9093"}


# -- refusals -----------------------------------------------------------------------------------


def refusal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], path: Path, *flags: str
) -> str:
    code, out, err = fmt(capsys, path, *flags)
    assert (code, out) == (1, "")
    assert not (tmp_path / "data").exists()  # nothing written
    assert err.startswith("kraft-storage: error: ") and err.count("\n") == 1
    return err.removeprefix("kraft-storage: error: ").rstrip("\n")


def test_a_dynamic_controller_needs_a_flag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path)
    assert refusal(tmp_path, capsys, path) == (
        f"Because controller.quorum.voters is not set on this controller ({path}), you must "
        "specify one of the following: --standalone, --initial-controllers, or "
        "--no-initial-controllers."
    )


def test_standalone_and_initial_controllers_only_on_controllers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path, node_id=7, roles="broker")
    assert refusal(tmp_path, capsys, path, "--standalone") == (
        f"You can only use --standalone on a controller, and {path} has process.roles=broker: "
        "format a broker with no flag or --no-initial-controllers."
    )
    assert refusal(tmp_path, capsys, path, "-I", f"1@127.0.0.1:9093:{D1}") == (
        f"--initial-controllers is for controllers, and {path} has process.roles=broker: "
        "format a broker with no flag or --no-initial-controllers."
    )


@pytest.mark.parametrize(
    ("flags", "name"),
    [(("-s",), "--standalone"), (("-I", f"1@127.0.0.1:9093:{D1}"), "--initial-controllers")],
)
def test_dynamic_flags_refuse_static_voters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: tuple[str, ...], name: str
) -> None:
    path = write_config(tmp_path, voters="1@127.0.0.1:9093")
    assert refusal(tmp_path, capsys, path, *flags) == (
        f"You cannot specify controller.quorum.voters (in {path}) and format the node with "
        f"{name}. If you want to use a dynamic quorum, remove controller.quorum.voters and set "
        "controller.quorum.bootstrap.servers instead."
    )


def test_kraft_version_feature_must_match_the_flags(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path)
    assert refusal(tmp_path, capsys, path, "-N", "--feature", "kraft.version=1") == (
        "Cannot set kraft.version=1 without --standalone or --initial-controllers: "
        "kraft.version 1 needs the initial voter set those flags write."
    )
    assert refusal(tmp_path, capsys, path, "-s", "-f", "kraft.version=0") == (
        "Cannot set kraft.version=0 with --standalone: a dynamic quorum needs kraft.version=1 "
        "(drop the --feature or the --standalone flag)."
    )
    assert refusal(tmp_path, capsys, path, "-s", "-f", "metadata.version=21") == (
        "Unsupported feature 'metadata.version' in --feature: only kraft.version is set at "
        "format time (metadata.version follows --release-version)."
    )
    assert refusal(tmp_path, capsys, path, "-s", "-f", "kraft.version=2") == (
        "Unsupported kraft.version level 2: this release supports 0 (static) and 1 (dynamic)."
    )
    assert refusal(tmp_path, capsys, path, "-s", "-f", "kraft.version") == (
        "Invalid --feature 'kraft.version': expected NAME=LEVEL, e.g. kraft.version=1."
    )
    assert fmt(capsys, path, "-s", "-f", "kraft.version=1")[0] == 0


def test_release_version_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_config(tmp_path)
    assert refusal(tmp_path, capsys, path, "-s", "--release-version", "3.8") == (
        "kraft.version 1 (--standalone) needs metadata.version 3.9-IV0 or later, but "
        "--release-version is 3.8-IV0."
    )
    assert refusal(tmp_path, capsys, path, "-N", "-r", "3.8") == (
        "This implementation starts a cluster at metadata.version 3.9-IV0 only, not 3.8-IV0: "
        "pass --release-version 3.9-IV0 or leave it out."
    )
    assert refusal(tmp_path, capsys, path, "-N", "-r", "nope").startswith(
        "Unknown release version 'nope'")
    assert fmt(capsys, path, "-s", "-r", "3.9")[0] == 0


def test_the_quorum_flags_are_mutually_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["format", "-t", CLUSTER, "-c", "x.properties", "-s", "-N"]) == 2
    assert ("argument -N/--no-initial-controllers: not allowed with argument -s/--standalone"
            in capsys.readouterr().err)
    assert main(["format", "-t", CLUSTER, "-c", "x", "-s", "-I", f"1@h:1:{D1}"]) == 2


def test_random_uuid_makes_directory_ids(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["random-uuid"]) == 0
    text = capsys.readouterr().out.strip()
    assert parse_initial_controller(f"1@h:1:{text}").directory_id == text
    assert random_uuid() != text


# -- a quorum of this cluster already running ---------------------------------------------------


@pytest.fixture
def running() -> Iterator[tuple[FakeQuorum, str]]:
    """A controller of CLUSTER answering on loopback: node 1, leader of voters 1, 2, 3."""
    quorum = FakeQuorum()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    rpc.add_QuorumServicer_to_server(quorum, server)
    endpoint = f"127.0.0.1:{server.add_insecure_port('127.0.0.1:0')}"
    server.start()
    quorum.answers = {
        "NodeStatus": [pb.NodeStatusResponse(node_id=1, cluster_id=CLUSTER, leader_id=1)],
        "DescribeQuorum": [pb.DescribeQuorumResponse(
            error_code=Errors.NONE, cluster_id=CLUSTER, leader_id=1, current_voters=[
                pb.ReplicaState(replica_id=1, directory_id=D1, log_end_offset=90,
                                last_fetch_timestamp=1000),
                pb.ReplicaState(replica_id=2, directory_id=D2, log_end_offset=-1,
                                last_fetch_timestamp=-1),
                pb.ReplicaState(replica_id=3, directory_id=D3, log_end_offset=90,
                                last_fetch_timestamp=1000)])],
    }
    yield quorum, endpoint
    server.stop(0)


INITIAL = f"1@127.0.0.1:9093:{D1},2@127.0.0.1:9094:{D2},3@127.0.0.1:9095:{D3}"


def test_standalone_refuses_to_split_a_running_quorum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], running: tuple[FakeQuorum, str]
) -> None:
    quorum, endpoint = running
    path = write_config(tmp_path, node_id=3, port=9095,
                        bootstrap=f"127.0.0.1:9095,127.0.0.1:1,{endpoint}")
    assert refusal(tmp_path, capsys, path, "-s") == (
        f"A controller of cluster {CLUSTER} already runs at {endpoint} (node 1, leader 1): "
        "--standalone would start a second quorum under the same cluster id. To add node 3 to "
        "that quorum, format it with --no-initial-controllers, start it, and add it with "
        "kraft-admin quorum add-controller."
    )
    # A node of another cluster proves nothing.
    quorum.answers["NodeStatus"] = [pb.NodeStatusResponse(node_id=1, cluster_id="other")]
    assert fmt(capsys, path, "-s")[0] == 0


def test_initial_controllers_against_a_running_quorum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], running: tuple[FakeQuorum, str]
) -> None:
    _, endpoint = running
    # Node 3 has replicated already: formatting it with -I again is a disk-loss mistake.
    three = write_config(tmp_path, node_id=3, port=9095, bootstrap=endpoint)
    assert refusal(tmp_path, capsys, three, "-I", INITIAL) == (
        f"Controller 3 with directory id {D3} has already replicated the log of cluster "
        f"{CLUSTER} (end offset 90): formatted again with --initial-controllers it would come "
        "back with an empty disk under the same replica key, and its old acknowledgements "
        "would still count. Format it with --no-initial-controllers, start it, then kraft-admin "
        f"quorum remove-controller -i 3 -d {D3} and add-controller."
    )
    # Voters other than the list: -I is only for the first controllers.
    other = f"1@127.0.0.1:9093:{D1},3@127.0.0.1:9095:{D3}"
    assert refusal(tmp_path, capsys, three, "-I", other) == (
        f"The quorum of cluster {CLUSTER} already runs with the voters 1/{D1}, 2/{D2}, "
        f"3/{D3}, not those of --initial-controllers: it is only for the first controllers; "
        "format it with --no-initial-controllers, start it, and add it with kraft-admin quorum "
        "add-controller."
    )
    # Node 2 never fetched: formatting it late with the same list is the normal bootstrap.
    two = write_config(tmp_path, node_id=2, port=9094, bootstrap=endpoint)
    assert fmt(capsys, two, "-I", INITIAL)[::2] == (0, "")


def test_initial_controllers_warns_when_the_quorum_has_committed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], running: tuple[FakeQuorum, str]
) -> None:
    """Not fetched from the current leader: never ran, or ran under an earlier leader."""
    quorum, endpoint = running
    quorum.answers["DescribeQuorum"][0].high_watermark = 90
    two = write_config(tmp_path, node_id=2, port=9094, bootstrap=endpoint)
    code, _, err = fmt(capsys, two, "-I", INITIAL)
    assert code == 0
    assert err == (
        f"kraft-storage: warning: the quorum of cluster {CLUSTER} has committed records (high "
        "watermark 90) and node 2 has not fetched from its leader 1: fine if node 2 has never "
        "run; if this disk replaces one that had replicated, re-format it with "
        "--no-initial-controllers instead, or its old acknowledgements would still count.\n"
    )


def test_initial_controllers_while_no_leader_is_elected(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], running: tuple[FakeQuorum, str]
) -> None:
    quorum, endpoint = running
    quorum.answers["DescribeQuorum"] = [pb.DescribeQuorumResponse(
        error_code=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=-1)]
    path = write_config(tmp_path, node_id=3, port=9095, bootstrap=endpoint)
    assert fmt(capsys, path, "-I", INITIAL)[0] == 0


def test_initial_controllers_between_leaders_of_a_committed_quorum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], running: tuple[FakeQuorum, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Committed and between leaders: nothing can tell whether this key replicated before,
    so the format waits a little for a leader, then refuses."""
    quorum, endpoint = running
    monkeypatch.setattr(format_probe, "LEADER_WAIT_S", 0.3)
    quorum.answers["NodeStatus"] = [pb.NodeStatusResponse(
        node_id=1, cluster_id=CLUSTER, leader_id=-1, high_watermark=90)]
    quorum.answers["DescribeQuorum"] = [pb.DescribeQuorumResponse(
        error_code=Errors.NOT_LEADER_OR_FOLLOWER, leader_id=-1)]
    path = write_config(tmp_path, node_id=3, port=9095, bootstrap=endpoint)
    assert refusal(tmp_path, capsys, path, "-I", INITIAL) == (
        f"The quorum of cluster {CLUSTER} runs (high watermark 90 at {endpoint}) but has no "
        "leader to say whether node 3's key has replicated before: retry once it has one, or "
        "format it with --no-initial-controllers, start it, and add it with kraft-admin quorum "
        "add-controller."
    )


def test_info_shows_the_bootstrap_voter_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_config(tmp_path)
    assert fmt(capsys, path, "-I", f"1@127.0.0.1:9093:{D1},2@127.0.0.1:9094:{D2}")[0] == 0
    code, out, _ = run(capsys, "info", "-c", path)
    assert code == 0
    assert out.endswith(
        f"\nFound the bootstrap voter set in {tmp_path / 'data' / CHECKPOINT}: kraft.version 1, "
        f"voters 1@127.0.0.1:9093:{D1}, 2@127.0.0.1:9094:{D2}\n")
    checkpoint = tmp_path / "data" / CHECKPOINT
    checkpoint.chmod(0o644)
    checkpoint.write_bytes(checkpoint.read_bytes()[:-3])  # a torn copy
    code, out, _ = run(capsys, "info", "-c", path)
    assert code == 1
    problems = out.split("Found problem(s):\n")[1].splitlines()
    assert len(problems) == 1
    assert problems[0].startswith(f"  The bootstrap snapshot {checkpoint} cannot be read: ")
