"""`kraft-admin quorum add-controller` / `remove-controller` (KIP-853), as Kafka's
`kafka-metadata-quorum` does them.

add-controller takes everything from the NEW controller's config file: its node.id, its
roles (it must be a controller), the directory id in its metadata directory's meta.properties
(so it runs where that directory is readable) and one endpoint per controller listener
(advertised.listeners before listeners). The leader checks the rest: that the node answers,
is caught up, supports kraft.version 1, and that no other change is pending (spec 4.1).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kraft.core.voters import SUPPORTED_KRAFT_VERSIONS
from kraft.errors import Errors, error_name
from kraft.log.meta_properties import StorageError, is_valid_uuid, read_meta_properties
from kraft.rpc import raft_pb2 as pb
from kraft.security.tls import TlsConfig
from server.config import ConfigError, NodeConfig, load_config
from server.quorum_client import (
    GaveUp,
    QuorumError,
    Unanswered,
    VoterChange,
    change_voters,
    describe_quorum,
)

_ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"
_CHECK = "run kraft-admin quorum describe --status"


@dataclass(frozen=True)
class ControllerEndpoint:
    name: str
    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.name}://{host}:{self.port}"


@dataclass(frozen=True)
class NewController:
    """What AddRaftVoter says about the controller to add."""

    node_id: int
    directory_id: str
    cluster_id: str
    endpoints: tuple[ControllerEndpoint, ...]
    config: NodeConfig

    def describe(self) -> str:
        return (f"controller {self.node_id} with directory id {self.directory_id} and "
                f"endpoints: {', '.join(str(e) for e in self.endpoints)}")

    def request(self, timeout_s: float) -> pb.AddRaftVoterRequest:
        return pb.AddRaftVoterRequest(
            cluster_id=pb.OptionalString(value=self.cluster_id),
            timeout_ms=int(timeout_s * 1000), voter_id=self.node_id,
            voter_directory_id=self.directory_id,
            listeners=[pb.RaftEndpoint(name=e.name, host=e.host, port=e.port)
                       for e in self.endpoints],
            min_kraft_version=SUPPORTED_KRAFT_VERSIONS[0],
            max_kraft_version=SUPPORTED_KRAFT_VERSIONS[-1],
        )


def read_new_controller(path: str) -> NewController:
    """The controller described by its own config file (Kafka's add-controller rules)."""
    where = f"add-controller --command-config {path}"
    try:
        config = load_config(path)
    except ConfigError as exc:
        message = str(exc)
        raise QuorumError(f"{where}: {message.removeprefix(f'{path}: ')}") from exc
    if not config.is_controller:
        raise QuorumError(
            f"{where}: process.roles={','.join(sorted(config.process_roles))} has no "
            "controller role: only a controller can be added to the quorum."
        )
    directory = config.metadata_log_dir
    try:
        meta = read_meta_properties(directory)
    except StorageError as exc:
        raise QuorumError(f"{where}: {exc}") from exc
    if meta is None:
        raise QuorumError(
            f"{where}: the metadata directory {directory} is not formatted: run kraft-storage "
            f"format -t <cluster-id> -c {path} --no-initial-controllers, start the node, and "
            "add it once it has caught up."
        )
    if meta.node_id != config.node_id:
        raise QuorumError(
            f"{where}: the metadata directory {directory} belongs to node {meta.node_id}, not "
            f"node.id {config.node_id}."
        )
    if meta.directory_id is None:
        raise QuorumError(
            f"{where}: the metadata directory {directory} has no directory.id yet: start the "
            "node once (it writes one) and retry."
        )
    endpoints = []
    for name in config.controller_listener_names:
        listener = config.advertised_listeners.get(name) or config.listeners.get(name)
        if listener is None:
            raise QuorumError(f"{where}: the controller listener {name} is not in listeners.")
        endpoints.append(ControllerEndpoint(name, listener.host or "localhost", listener.port))
    return NewController(config.node_id, meta.directory_id, meta.cluster_id, tuple(endpoints),
                         config)


def add_controller(
    bootstrap: str, new: NewController, *, dry_run: bool, tls: TlsConfig | None,
    timeout_s: float,
) -> str:
    if dry_run:
        return f"DRY RUN of adding {new.describe()}"
    key = (new.node_id, new.directory_id)
    before = _voter_keys(bootstrap, tls)
    change = _send(bootstrap, "AddRaftVoter", new.request(timeout_s), tls, timeout_s, "add")
    resp = change.response
    if resp.error_code == Errors.DUPLICATE_VOTER and _made_by_us(
        change, before, lambda: key in _voter_keys(bootstrap, tls, required=True), key, True
    ):
        pass  # a leader took the add before leadership moved, and it committed: done
    elif resp.error_code != Errors.NONE:
        raise _explain(resp, "add", new.node_id, new.directory_id)
    return f"Added {new.describe()}"


def check_remove_arguments(node_id: int, directory_id: str) -> None:
    if node_id < 0:
        raise QuorumError(f"--controller-id {node_id}: a node id is an integer >= 0.")
    if not is_valid_uuid(directory_id) or directory_id == _ZERO_UUID:
        raise QuorumError(
            f"--controller-directory-id {directory_id!r} is not a valid directory id: take it "
            "from quorum describe --status (directoryId)."
        )


def remove_controller(
    bootstrap: str, node_id: int, directory_id: str, *, dry_run: bool, tls: TlsConfig | None,
    timeout_s: float,
) -> str:
    check_remove_arguments(node_id, directory_id)
    what = f"KRaft controller {node_id} with directory id {directory_id}"
    if dry_run:
        return f"DRY RUN of removing {what}"
    request = pb.RemoveRaftVoterRequest(voter_id=node_id, voter_directory_id=directory_id)
    key = (node_id, directory_id)
    before = _voter_keys(bootstrap, tls)
    change = _send(bootstrap, "RemoveRaftVoter", request, tls, timeout_s, "remove")
    resp = change.response
    if resp.error_code == Errors.VOTER_NOT_FOUND and _made_by_us(
        change, before, lambda: key not in _voter_keys(bootstrap, tls, required=True), key,
        False,
    ):
        pass  # a leader took the remove before leadership moved, and it committed: done
    elif resp.error_code != Errors.NONE:
        raise _explain(resp, "remove", node_id, directory_id)
    return f"Removed {what}"


def _voter_keys(
    bootstrap: str, tls: TlsConfig | None, *, required: bool = False
) -> frozenset[tuple[int, str]]:
    """The (id, directory id) keys of the voters now. Empty if the leader refuses to
    describe (say the principal may Alter but not Describe), unless `required`; no leader at
    all is an error at once: the change could not be made either."""
    try:
        described = describe_quorum(bootstrap, tls=tls)
    except GaveUp:
        raise
    except QuorumError:
        if required:
            raise
        return frozenset()
    return frozenset((v.replica_id, v.directory_id) for v in described.current_voters)


def _made_by_us(
    change: VoterChange, before: frozenset[tuple[int, str]], done_now: Callable[[], bool],
    key: tuple[int, str], adding: bool,
) -> bool:
    """An "already made" answer (DUPLICATE_VOTER, VOTER_NOT_FOUND) to a change that went to a
    second node after a NOT_LEADER_OR_FOLLOWER: a leader may have taken it and lost
    leadership after the append. It is ours if the quorum was not in the asked state before
    we sent it and is now; otherwise the refusal stands, as Kafka reports it."""
    if change.answers < 2 or not before:
        return False
    was_done = (key in before) == adding
    return not was_done and done_now()


def _send(
    bootstrap: str, method: str, request: object, tls: TlsConfig | None, timeout_s: float,
    verb: str,
) -> VoterChange:
    try:
        return change_voters(bootstrap, method, request, tls, timeout_s=timeout_s)
    except Unanswered as exc:
        raise QuorumError(
            f"{exc}; {_CHECK} before retrying: a timed-out {verb} may still commit."
        ) from exc


def _explain(resp: pb.VoterChangeResponse, verb: str, node_id: int, directory_id: str
             ) -> QuorumError:
    """One line: Kafka's error name, the leader's message, and what to do."""
    code = resp.error_code
    advice: dict[int, str] = {
        Errors.REQUEST_TIMED_OUT:
            f"{_CHECK} before retrying; a timed-out {verb} may still commit (another change "
            "may also be pending, or the new controller not caught up yet).",
        Errors.DUPLICATE_VOTER:
            f"node ids are unique among voters: quorum describe --status shows node {node_id}'s "
            "current directory id; to replace its disk, remove-controller that key first.",
        Errors.VOTER_NOT_FOUND:
            f"no voter is ({node_id}, {directory_id}), or it is the last one: check the id "
            "and directory id with quorum describe --status.",
        Errors.UNSUPPORTED_VERSION:
            "the quorum runs kraft.version 0 (static controller.quorum.voters); membership "
            "changes need a quorum formatted with --standalone or --initial-controllers.",
        Errors.INCONSISTENT_CLUSTER_ID:
            "the new controller's storage was formatted for another cluster: re-format it "
            "with the cluster's id and --no-initial-controllers.",
        Errors.INVALID_REQUEST:
            "check the controller's directory id and that it serves the controller listener "
            "and supports kraft.version 1.",
        Errors.CLUSTER_AUTHORIZATION_FAILED:
            "a voter change needs ALTER on the cluster: use a principal in super.users or "
            "grant it: kraft-admin acls --add --allow-principal <principal> --operation Alter "
            "--cluster.",
        Errors.NOT_LEADER_OR_FOLLOWER:
            f"leadership moved while the {verb} was pending; {_CHECK} to see whether it "
            "committed before retrying.",
        Errors.BROKER_NOT_AVAILABLE: "the leader is shutting down: retry in a moment.",
    }
    hint = advice.get(code, f"{_CHECK} to see the quorum's state.")
    hint = hint[0].upper() + hint[1:]
    message = resp.error_message.rstrip(".")
    return QuorumError(f"{error_name(code)}: {message + '. ' if message else ''}{hint}")
