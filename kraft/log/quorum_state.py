"""The quorum-state file: the election state a voter must not forget across a crash.

One line of JSON, as in Kafka's FileQuorumStateStore:
    {"leaderId":-1,"leaderEpoch":2,"votedId":1,"data_version":1}
Written to `<path>.tmp`, fsynced, renamed over `<path>`, then the directory is fsynced, so a
crash leaves either the old state or the new one, never a mix.
"""

from __future__ import annotations

import json
import os

from kraft.election_state import PRIMORDIAL, ElectionState

DATA_VERSION = 1
# Kafka's v0 file adds clusterId/appliedOffset/currentVoters; the fields we need are the same.
_READABLE_VERSIONS = (0, 1)


class QuorumStateError(Exception):
    """The quorum-state file exists but cannot be used; the message names the file."""


class QuorumStateStore:
    """Reads and durably replaces the quorum-state file at `path`."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = os.fspath(path)
        self._tmp_path = self._path + ".tmp"

    @property
    def path(self) -> str:
        """The quorum-state file."""
        return self._path

    def read(self) -> ElectionState:
        """The stored state; PRIMORDIAL when the file does not exist. A leftover `.tmp` file
        (a crash during write) is ignored: the rename never happened."""
        try:
            with open(self._path, "rb") as file:
                content = file.read()
        except FileNotFoundError:
            return PRIMORDIAL
        return parse_quorum_state(content, self._path)

    def write(self, state: ElectionState) -> None:
        """Replace the stored state atomically and durably."""
        line = format_quorum_state(state)
        fd = os.open(self._tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        with open(fd, "w", encoding="utf-8") as file:
            file.write(line)
            file.flush()
            os.fsync(file.fileno())
        os.replace(self._tmp_path, self._path)
        directory = os.path.dirname(os.path.abspath(self._path))
        dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def format_quorum_state(state: ElectionState) -> str:
    """The file's one line (with a trailing newline)."""
    data = {
        "leaderId": state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": state.voted_id,
        "data_version": DATA_VERSION,
    }
    return json.dumps(data, separators=(",", ":")) + "\n"


def parse_quorum_state(content: bytes, path: str) -> ElectionState:
    """Parse the file's content; QuorumStateError naming `path` when it is not valid."""
    try:
        data = json.loads(content.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise QuorumStateError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise QuorumStateError(f"{path}: expected a JSON object, got {type(data).__name__}")
    fields = {}
    for key in ("data_version", "leaderEpoch", "leaderId", "votedId"):
        value = data.get(key)
        if type(value) is not int:  # bool is an int subclass; a bool here is a bad file
            raise QuorumStateError(f"{path}: field {key!r} must be an integer, got {value!r}")
        fields[key] = value
    if fields["data_version"] not in _READABLE_VERSIONS:
        raise QuorumStateError(
            f"{path}: unknown data_version {fields['data_version']} "
            f"(this version reads {', '.join(map(str, _READABLE_VERSIONS))})"
        )
    try:
        return ElectionState(
            epoch=fields["leaderEpoch"], leader_id=fields["leaderId"], voted_id=fields["votedId"]
        )
    except ValueError as exc:
        raise QuorumStateError(f"{path}: {exc}") from None


class MemoryQuorumStateStore:
    """The simulator's store: keeps the last written state; `writes` counts writes."""

    def __init__(self, initial: ElectionState = PRIMORDIAL) -> None:
        self._state = initial
        self.writes = 0

    def read(self) -> ElectionState:
        """The last written state (PRIMORDIAL before any write)."""
        return self._state

    def write(self, state: ElectionState) -> None:
        """Store `state`; durable at once, as the file store is when write returns."""
        self._state = state
        self.writes += 1

    def wipe(self) -> None:
        """Lose the disk: back to PRIMORDIAL."""
        self._state = PRIMORDIAL
