"""How `kraft-storage format` starts a KIP-853 (dynamic) quorum.

`--standalone` makes this controller the one voter; `--initial-controllers
id@host:port:directoryId,...` names the first voters (the same string on every controller);
`--no-initial-controllers` starts none (a controller that joins later, or a broker). With the
first two, the metadata log directory gets the bootstrap snapshot 0-0, holding kraft.version 1
and the voter set; the first leader copies it into its log, and from then on the voters live
in the log (spec sections 2.2 and 3.1). Every refusal is one line saying what to do.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum

from kraft.core.voters import (
    ReplicaKey,
    SnapshotVoters,
    VoterNode,
    VoterSet,
    VoterSetError,
    bootstrap_control_records,
)
from kraft.log.base import CorruptRecordError
from kraft.log.meta_properties import StorageError, is_valid_uuid, random_uuid
from kraft.log.snapshots import (
    BOOTSTRAP_SNAPSHOT_ID,
    FileSnapshotStore,
    snapshot_file_name,
    verify_snapshot_file,
)
from metadata.configs import METADATA_VERSION, SUPPORTED_FEATURES, feature_level_name
from metadata.topics import METADATA_PARTITION_DIR
from server.config import NodeConfig

KRAFT_VERSION = "kraft.version"
DYNAMIC_KRAFT_VERSION = 1  # the voters live in the log (KIP-853)
_RESERVED_UUIDS = ("AAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAQ")  # Kafka's ZERO and ONE
_FIRST_DYNAMIC_RELEASE = "3.9-IV0"  # the first metadata.version that allows kraft.version 1
FLAGS = "--standalone, --initial-controllers, or --no-initial-controllers"


class QuorumMode(Enum):
    """Which of the mutually exclusive format flags was given."""

    NONE = "none"  # a broker, or a static controller (controller.quorum.voters)
    STANDALONE = "--standalone"
    INITIAL_CONTROLLERS = "--initial-controllers"
    NO_INITIAL_CONTROLLERS = "--no-initial-controllers"


@dataclass(frozen=True)
class InitialController:
    """One `id@host:port:directoryId` entry."""

    node_id: int
    host: str
    port: int
    directory_id: str

    @property
    def endpoint(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def __str__(self) -> str:
        return f"{self.node_id}@{self.endpoint}:{self.directory_id}"


def _entry_error(entry: str, reason: str) -> StorageError:
    return StorageError(
        f"Invalid --initial-controllers entry {entry!r}: {reason}. Expected "
        "id@host:port:directoryId, e.g. 1@controller-1:9093:<kraft-storage random-uuid>."
    )


def parse_initial_controller(entry: str) -> InitialController:
    """Kafka's DynamicVoter.parse; IPv6 hosts in brackets."""
    text = entry.strip()
    id_text, at, rest = text.partition("@")
    if not at:
        raise _entry_error(entry, "no @ after the node id")
    if not id_text.isascii() or not id_text.isdigit():
        raise _entry_error(entry, f"the node id {id_text!r} is not an integer >= 0")
    if rest.startswith("["):
        host, bracket, rest = rest[1:].partition("]")
        if not bracket:
            raise _entry_error(entry, "the host begins with [ but has no ]")
    else:
        host, _, tail = rest.partition(":")
        rest = rest[len(host):]
        del tail
    if not host:
        raise _entry_error(entry, "the host is empty")
    if not rest.startswith(":"):
        raise _entry_error(entry, "no :port after the host")
    port_text, colon, directory_id = rest[1:].partition(":")
    if not colon:
        raise _entry_error(entry, "no :directoryId after the port")
    if not port_text.isascii() or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise _entry_error(entry, f"the port {port_text!r} is not between 1 and 65535")
    if not is_valid_uuid(directory_id) or directory_id in _RESERVED_UUIDS:
        raise _entry_error(
            entry, f"the directory id {directory_id!r} is not a valid Uuid (make one with "
            "kraft-storage random-uuid)"
        )
    return InitialController(int(id_text), host, int(port_text), directory_id)


def parse_initial_controllers(text: str) -> tuple[InitialController, ...]:
    """Kafka's DynamicVoters.parse: comma-separated entries, ids and directory ids unique."""
    controllers = [parse_initial_controller(e) for e in text.split(",") if e.strip()]
    if not controllers:
        raise StorageError(
            "--initial-controllers lists no controllers: give id@host:port:directoryId,..."
        )
    ids: dict[int, InitialController] = {}
    directories: dict[str, InitialController] = {}
    for controller in controllers:
        if controller.node_id in ids:
            raise StorageError(
                f"Node id {controller.node_id} was specified more than once in "
                "--initial-controllers: ids are unique in a voter set."
            )
        if controller.directory_id in directories:
            raise StorageError(
                f"The directory id {controller.directory_id} of {controller.node_id} is also "
                f"that of {directories[controller.directory_id].node_id} in "
                "--initial-controllers: give each controller its own kraft-storage random-uuid."
            )
        ids[controller.node_id] = controller
        directories[controller.directory_id] = controller
    return tuple(sorted(controllers, key=lambda c: c.node_id))


def advertised_controller_endpoint(config: NodeConfig) -> tuple[str, int]:
    """The host and port of the first controller listener as advertised (Kafka: `localhost`
    when it has no host)."""
    name = config.controller_listener_names[0]
    listener = config.advertised_listeners.get(name) or config.listeners.get(name)
    if listener is None:
        raise StorageError(f"{config.source}: this node has no {name} listener")
    return listener.host or "localhost", listener.port


def standalone_controller(config: NodeConfig) -> InitialController:
    host, port = advertised_controller_endpoint(config)
    return InitialController(config.node_id, host, port, random_uuid())


def voter_set(controllers: tuple[InitialController, ...], listener: str) -> VoterSet:
    return VoterSet.of(
        VoterNode(ReplicaKey(c.node_id, c.directory_id), c.endpoint, listener)
        for c in controllers
    )


# -- the format flags --------------------------------------------------------------------------


def parse_release_version(text: str) -> int:
    """The metadata.version level of a release name such as `3.9` or `3.9-IV0` (a bare
    release means its latest level)."""
    names = {feature_level_name(METADATA_VERSION, level): level for level in range(1, 64)}
    wanted = text.strip()
    matches = [level for name, level in names.items()
               if not name.startswith("UNKNOWN")
               and (name == wanted or name.partition("-")[0] == wanted)]
    if not matches:
        raise StorageError(
            f"Unknown release version {text!r}: use a metadata.version such as "
            f"{feature_level_name(METADATA_VERSION, SUPPORTED_FEATURES[METADATA_VERSION][1])}."
        )
    return max(matches)


def check_release_version(level: int) -> None:
    """The first leader writes the latest metadata.version this implementation runs, so
    formatting for any other release would be a promise it does not keep."""
    latest = SUPPORTED_FEATURES[METADATA_VERSION][1]
    if level != latest:
        name = feature_level_name(METADATA_VERSION, latest)
        raise StorageError(
            f"This implementation starts a cluster at metadata.version {name} only, not "
            f"{feature_level_name(METADATA_VERSION, level)}: pass --release-version {name} or "
            "leave it out."
        )


def parse_features(items: list[str]) -> dict[str, int]:
    """`--feature NAME=LEVEL`: only kraft.version is set at format time here."""
    features: dict[str, int] = {}
    for item in items:
        name, eq, level = item.partition("=")
        name = name.strip()
        if not eq or not level.strip().isdigit():
            raise StorageError(f"Invalid --feature {item!r}: expected NAME=LEVEL, e.g. "
                               f"{KRAFT_VERSION}=1.")
        if name != KRAFT_VERSION:
            raise StorageError(
                f"Unsupported feature {name!r} in --feature: only {KRAFT_VERSION} is set at "
                "format time (metadata.version follows --release-version)."
            )
        if name in features:
            raise StorageError(f"The feature {name} was given more than once in --feature.")
        value = int(level)
        if value not in (0, DYNAMIC_KRAFT_VERSION):
            raise StorageError(f"Unsupported {KRAFT_VERSION} level {value}: this release "
                               f"supports 0 (static) and 1 (dynamic).")
        features[name] = value
    return features


def check_format_flags(
    config: NodeConfig, mode: QuorumMode, features: dict[str, int],
    release_level: int | None = None,
) -> None:
    """Kafka's StorageTool/Formatter rules for the quorum flags (spec R3.1, T25)."""
    dynamic = mode in (QuorumMode.STANDALONE, QuorumMode.INITIAL_CONTROLLERS)
    kraft_version = features.get(KRAFT_VERSION)
    if mode is QuorumMode.STANDALONE and not config.is_controller:
        raise StorageError(
            f"You can only use --standalone on a controller, and {config.source} has "
            "process.roles=broker: format a broker with no flag or --no-initial-controllers."
        )
    if mode is QuorumMode.INITIAL_CONTROLLERS and not config.is_controller:
        raise StorageError(
            f"--initial-controllers is for controllers, and {config.source} has "
            "process.roles=broker: format a broker with no flag or --no-initial-controllers."
        )
    if dynamic and config.voters:
        raise StorageError(
            f"You cannot specify controller.quorum.voters (in {config.source}) and format the "
            f"node with {mode.value}. If you want to use a dynamic quorum, remove "
            "controller.quorum.voters and set controller.quorum.bootstrap.servers instead."
        )
    if config.is_controller and not config.voters and mode is QuorumMode.NONE:
        raise StorageError(
            f"Because controller.quorum.voters is not set on this controller ({config.source}), "
            f"you must specify one of the following: {FLAGS}."
        )
    if kraft_version == DYNAMIC_KRAFT_VERSION and not dynamic:
        raise StorageError(
            f"Cannot set {KRAFT_VERSION}=1 without --standalone or --initial-controllers: "
            "kraft.version 1 needs the initial voter set those flags write."
        )
    if kraft_version == 0 and dynamic:
        raise StorageError(
            f"Cannot set {KRAFT_VERSION}=0 with {mode.value}: a dynamic quorum needs "
            f"{KRAFT_VERSION}=1 (drop the --feature or the {mode.value} flag)."
        )
    if dynamic and release_level is not None:
        first = parse_release_version(_FIRST_DYNAMIC_RELEASE)
        if release_level < first:
            raise StorageError(
                f"{KRAFT_VERSION} 1 ({mode.value}) needs metadata.version "
                f"{_FIRST_DYNAMIC_RELEASE} or later, but --release-version is "
                f"{feature_level_name(METADATA_VERSION, release_level)}."
            )


# -- the bootstrap snapshot --------------------------------------------------------------------


def metadata_partition_dir(config: NodeConfig) -> str:
    return os.path.join(config.metadata_log_dir, METADATA_PARTITION_DIR)


def bootstrap_snapshot_path(config: NodeConfig) -> str:
    return os.path.join(metadata_partition_dir(config), snapshot_file_name(BOOTSTRAP_SNAPSHOT_ID))


def has_bootstrap_snapshot(config: NodeConfig) -> bool:
    return os.path.exists(bootstrap_snapshot_path(config))


def write_bootstrap_snapshot(
    config: NodeConfig, controllers: tuple[InitialController, ...]
) -> str:
    """Write (durably, replacing any earlier one) the 0-0 snapshot holding kraft.version 1
    and these voters on the first controller listener; return its path."""
    voters = voter_set(controllers, config.controller_listener_names[0])
    try:
        store = FileSnapshotStore(metadata_partition_dir(config))
        store.builder(
            BOOTSTRAP_SNAPSHOT_ID, 0, control_records=bootstrap_control_records(voters)
        ).freeze()
    except OSError as err:
        raise StorageError(
            f"Cannot write the bootstrap snapshot {bootstrap_snapshot_path(config)}: "
            f"{err.strerror}."
        ) from None
    return bootstrap_snapshot_path(config)


def read_bootstrap_snapshot(config: NodeConfig) -> SnapshotVoters | None:
    """What the metadata directory's bootstrap snapshot holds; None when there is none."""
    path = bootstrap_snapshot_path(config)
    if not os.path.exists(path):
        return None
    try:
        info = verify_snapshot_file(path)
        return SnapshotVoters.from_control_records(BOOTSTRAP_SNAPSHOT_ID.offset,
                                                   info.control_records)
    except (CorruptRecordError, VoterSetError, OSError) as err:
        raise StorageError(f"The bootstrap snapshot {path} cannot be read: {err}") from None
