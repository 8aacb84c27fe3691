"""Who the voters are (KIP-853): replica keys, voter sets and the voter-set history of a log.

A replica is a (node id, directory id) pair: a re-formatted disk gets a new directory id, so
it is a new replica and the acknowledgements its old disk gave never count again. A voter set
is immutable; the history maps log offsets to the sets the log's VotersRecords hold, and the
set in effect is always the latest one, committed or not (spec R2.2, R2.3): a change is used
from the moment it is appended, and truncating it away reverts it.

The control records (codec kinds KRAFT_VERSION and VOTERS) carry Kafka's field names in JSON.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from kraft.log.codec import (
    KRAFT_VERSION,
    KRAFT_VOTERS,
    decode_control_record,
    encode_control_record,
)

NO_DIRECTORY = ""  # Kafka's zero Uuid: a static voter, or a sender that does not say
SUPPORTED_KRAFT_VERSIONS = (0, 1)  # what this release can run: static (0), dynamic (1)
DEFAULT_LISTENER = "CONTROLLER"


class VoterSetError(ValueError):
    """A voter set or a voter record that breaks the rules; the message says which."""


@dataclass(frozen=True, slots=True, order=True)
class ReplicaKey:
    node_id: int
    directory_id: str = NO_DIRECTORY

    def __str__(self) -> str:
        return f"{self.node_id}" + (f"/{self.directory_id}" if self.directory_id else "")


@dataclass(frozen=True, slots=True)
class VoterNode:
    """One voter: its key, the host:port of its controller listener and the kraft.version
    range it supports."""

    key: ReplicaKey
    endpoint: str
    listener: str = DEFAULT_LISTENER
    min_kraft_version: int = SUPPORTED_KRAFT_VERSIONS[0]
    max_kraft_version: int = SUPPORTED_KRAFT_VERSIONS[-1]

    @property
    def node_id(self) -> int:
        return self.key.node_id

    def matches(self, key: ReplicaKey) -> bool:
        """Kafka's isVoter: the ids match, and the voter has no directory id (a static voter)
        or the same one."""
        return key.node_id == self.key.node_id and (
            not self.key.directory_id or self.key.directory_id == key.directory_id
        )

    def supports(self, kraft_version: int) -> bool:
        return self.min_kraft_version <= kraft_version <= self.max_kraft_version


@dataclass(frozen=True)
class VoterSet:
    """An immutable voter set, by node id (ids are unique within a set)."""

    nodes: Mapping[int, VoterNode] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", MappingProxyType(dict(sorted(self.nodes.items()))))
        for node_id, node in self.nodes.items():
            if node.node_id != node_id or node_id < 0:
                raise VoterSetError(f"voter entry {node_id} holds the key {node.key}")

    @classmethod
    def of(cls, nodes: Iterable[VoterNode]) -> VoterSet:
        by_id: dict[int, VoterNode] = {}
        for node in nodes:
            if node.node_id in by_id:
                raise VoterSetError(f"node {node.node_id} is listed twice as a voter")
            by_id[node.node_id] = node
        return cls(by_id)

    @classmethod
    def static(cls, endpoints: Mapping[int, str]) -> VoterSet:
        """`controller.quorum.voters`: ids and endpoints, no directory ids."""
        return cls({i: VoterNode(ReplicaKey(i), ep) for i, ep in endpoints.items()})

    # -- questions ------------------------------------------------------------------------------

    @property
    def ids(self) -> frozenset[int]:
        return frozenset(self.nodes)

    @property
    def majority(self) -> int:
        return len(self.nodes) // 2 + 1

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self) -> Iterator[VoterNode]:
        return iter(self.nodes.values())

    def is_voter(self, key: ReplicaKey) -> bool:
        node = self.nodes.get(key.node_id)
        return node is not None and node.matches(key)

    def endpoint(self, node_id: int) -> str:
        node = self.nodes.get(node_id)
        return node.endpoint if node is not None else ""

    def endpoints(self) -> dict[int, str]:
        return {i: n.endpoint for i, n in self.nodes.items()}

    def key_of(self, node_id: int) -> ReplicaKey | None:
        node = self.nodes.get(node_id)
        return node.key if node is not None else None

    def overlaps_in_majority(self, other: VoterSet) -> bool:
        """KIP-853's history rule (R2.5): a new set may differ from the previous one by at most
        one key removed and one added, so every majority of one meets every majority of the
        other."""
        mine = {n.key for n in self}
        theirs = {n.key for n in other}
        return len(mine - theirs) <= 1 and len(theirs - mine) <= 1

    # -- changes (each returns a new set) -------------------------------------------------------

    def adding(self, node: VoterNode) -> VoterSet:
        if node.node_id in self.nodes:
            raise VoterSetError(f"node {node.node_id} is already a voter")
        return VoterSet({**self.nodes, node.node_id: node})

    def removing(self, key: ReplicaKey) -> VoterSet:
        if not self.is_voter(key) or self.nodes[key.node_id].key != key:
            raise VoterSetError(f"{key} is not a voter")
        return VoterSet({i: n for i, n in self.nodes.items() if i != key.node_id})

    def updating(self, node: VoterNode) -> VoterSet:
        current = self.nodes.get(node.node_id)
        if current is None or current.key != node.key:
            raise VoterSetError(f"{node.key} is not a voter")
        return VoterSet({**self.nodes, node.node_id: node})

    # -- the VotersRecord -------------------------------------------------------------------------

    def to_record(self) -> dict[str, object]:
        return {
            "version": 0,
            "voters": [
                {
                    "voterId": n.node_id,
                    "voterDirectoryId": n.key.directory_id,
                    "endpoints": [_endpoint_json(n.listener, n.endpoint)],
                    "kRaftVersionFeature": {
                        "minSupportedVersion": n.min_kraft_version,
                        "maxSupportedVersion": n.max_kraft_version,
                    },
                }
                for n in self
            ],
        }

    @classmethod
    def from_record(cls, body: Mapping[str, object]) -> VoterSet:
        """Parse a VotersRecord body; VoterSetError names what is wrong."""
        voters = body.get("voters")
        if not isinstance(voters, list) or not voters:
            raise VoterSetError("a VotersRecord must list at least one voter")
        nodes = []
        for entry in voters:
            if not isinstance(entry, dict):
                raise VoterSetError(f"a VotersRecord entry is not an object: {entry!r}")
            try:
                node_id = int(entry["voterId"])
                directory_id = str(entry["voterDirectoryId"])
                endpoints = entry["endpoints"]
                feature = entry.get("kRaftVersionFeature") or {}
                listener, host, port = _endpoint_parts(endpoints[0])
                nodes.append(VoterNode(
                    ReplicaKey(node_id, directory_id), f"{host}:{port}", listener,
                    int(feature.get("minSupportedVersion", 0)),
                    int(feature.get("maxSupportedVersion", 0)),
                ))
            except (KeyError, IndexError, TypeError, ValueError) as exc:
                raise VoterSetError(
                    f"a VotersRecord entry is malformed ({exc}): {entry!r}"
                ) from None
        return cls.of(nodes)

    def describe(self) -> str:
        return ", ".join(f"{n.key}@{n.endpoint}" for n in self) or "none"


def _endpoint_json(listener: str, endpoint: str) -> dict[str, object]:
    host, _, port = endpoint.rpartition(":")
    return {"name": listener, "host": host, "port": int(port) if port.isdigit() else 0}


def _endpoint_parts(raw: object) -> tuple[str, str, int]:
    if not isinstance(raw, dict):
        raise TypeError("an endpoint is not an object")
    port = int(raw["port"])
    if not 0 < port < 65536:
        raise ValueError(f"port {port} out of range")
    return str(raw.get("name", DEFAULT_LISTENER)), str(raw["host"]), port


# Offsets at which sets enter the history: a snapshot's set is valid from its end offset - 1
# (R2.6), the bootstrap snapshot's from -1; a set with no offset at all is the static one.
BOOTSTRAP_OFFSET = -1


class VoterHistory:
    """The voter sets and kraft.version levels a replica's log and snapshots hold, by offset,
    over the static set of `controller.quorum.voters` (R2.2). Appends add entries, truncation
    drops those at or past its offset, loading a snapshot starts over."""

    def __init__(self, static: VoterSet) -> None:
        self.static = static
        self._offsets: list[int] = []
        self._sets: list[VoterSet] = []
        self._version_offsets: list[int] = []
        self._versions: list[int] = []

    # -- what is in effect ----------------------------------------------------------------------

    def latest(self) -> VoterSet:
        return self._sets[-1] if self._sets else self.static

    def latest_offset(self) -> int | None:
        """The offset of the latest set's record; BOOTSTRAP_OFFSET for the bootstrap
        snapshot's, None for the static set."""
        return self._offsets[-1] if self._offsets else None

    def set_at(self, offset: int) -> VoterSet:
        """The set in effect after the record at `offset` (the latest at or below it)."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._sets[i - 1] if i else self.static

    def kraft_version(self) -> int:
        return self._versions[-1] if self._versions else 0

    def kraft_version_at(self, offset: int) -> int:
        i = bisect.bisect_right(self._version_offsets, offset)
        return self._versions[i - 1] if i else 0

    # -- changes --------------------------------------------------------------------------------

    def add_voters(self, offset: int, voters: VoterSet) -> None:
        """A VotersRecord at `offset`. A log record must share a majority with the previous
        log-derived set (R2.5); a broken history is corruption and fails fast."""
        if self._offsets and offset <= self._offsets[-1]:
            raise VoterSetError(
                f"voter set at offset {offset} is not after the latest one at {self._offsets[-1]}"
            )
        previous_from_log = self._sets[-1] if self._offsets and self._offsets[-1] >= 0 else None
        if offset >= 0 and previous_from_log is not None and not (
            previous_from_log.overlaps_in_majority(voters)
        ):
            raise VoterSetError(
                f"the voter set at offset {offset} ({voters.describe()}) differs from the one "
                f"before it ({previous_from_log.describe()}) by more than one voter"
            )
        self._offsets.append(offset)
        self._sets.append(voters)

    def add_kraft_version(self, offset: int, version: int) -> None:
        if version not in SUPPORTED_KRAFT_VERSIONS:
            raise VoterSetError(f"kraft.version {version} is not supported by this release")
        if version < self.kraft_version():
            raise VoterSetError(
                f"kraft.version goes down from {self.kraft_version()} to {version} at offset "
                f"{offset}; a downgrade is not possible"
            )
        self._version_offsets.append(offset)
        self._versions.append(version)

    def truncate_from(self, offset: int) -> None:
        """The log dropped every record at or past `offset`: so do its sets (R2.3)."""
        cut = bisect.bisect_left(self._offsets, offset)
        del self._offsets[max(cut, 0):]
        del self._sets[max(cut, 0):]
        vcut = bisect.bisect_left(self._version_offsets, offset)
        del self._version_offsets[vcut:]
        del self._versions[vcut:]
        # The bootstrap set sits at -1 and a snapshot's below the log start: neither is cut
        # by a truncation, which never goes below the high watermark.

    def reset(self) -> None:
        """A snapshot replaces the log: its records are added next."""
        self._offsets.clear()
        self._sets.clear()
        self._version_offsets.clear()
        self._versions.clear()

    def entries(self) -> list[tuple[int, VoterSet]]:
        return list(zip(self._offsets, self._sets, strict=True))


def kraft_version_record_body(version: int) -> dict[str, object]:
    return {"version": 0, "kRaftVersion": version}


def parse_kraft_version(body: Mapping[str, object]) -> int:
    value = body.get("kRaftVersion")
    if not isinstance(value, int):
        raise VoterSetError(f"a KRaftVersionRecord without a kRaftVersion: {dict(body)!r}")
    return value


@dataclass(frozen=True, slots=True)
class SnapshotVoters:
    """What a snapshot's control batch says: the kraft.version and voter set in effect at its
    last contained offset (`offset`, BOOTSTRAP_OFFSET for the bootstrap snapshot)."""

    offset: int
    kraft_version: int
    voters: VoterSet | None

    @classmethod
    def from_control_records(
        cls, snapshot_end_offset: int, records: Iterable[tuple[int, Mapping[str, object]]]
    ) -> SnapshotVoters:
        version = 0
        voters = None
        for kind, body in records:
            if kind == KRAFT_VERSION:
                version = parse_kraft_version(body)
            elif kind == KRAFT_VOTERS:
                voters = VoterSet.from_record(body)
        return cls(snapshot_end_offset - 1, version, voters)

    def apply_to(self, history: VoterHistory) -> None:
        history.reset()
        if self.kraft_version:
            history.add_kraft_version(self.offset, self.kraft_version)
        if self.voters is not None:
            history.add_voters(self.offset, self.voters)


def control_records_for(kraft_version: int, voters: VoterSet | None) -> list[bytes]:
    """The control records a snapshot (or an epoch-start batch) carries for the voter set:
    none at kraft.version 0 (R2.2: a static quorum's snapshots hold no voter set)."""
    if kraft_version < 1 or voters is None:
        return []
    return [
        encode_control_record(KRAFT_VERSION, kraft_version_record_body(kraft_version)),
        encode_control_record(KRAFT_VOTERS, voters.to_record()),
    ]


def bootstrap_control_records(voters: VoterSet) -> list[bytes]:
    """The bootstrap snapshot's records (`kraft-storage format --standalone` or
    `--initial-controllers`): kraft.version 1 and the initial voters."""
    return control_records_for(1, voters)


def apply_control_record(
    history: VoterHistory, offset: int, record: bytes
) -> bool:
    """Apply one control record of the log at `offset`; True when it changed the history."""
    kind, body = decode_control_record(record)
    if kind == KRAFT_VERSION:
        history.add_kraft_version(offset, parse_kraft_version(body))
        return True
    if kind == KRAFT_VOTERS:
        history.add_voters(offset, VoterSet.from_record(body))
        return True
    return False
