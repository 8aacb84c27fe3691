"""The core's own exceptions, carrying Kafka's error names (kraft/errors.py)."""

from __future__ import annotations

from kraft.errors import Errors as Errors  # the one table; the core's users import it here


class RaftError(Exception):
    """An expected refusal of a local command, carrying Kafka's error name."""

    def __init__(self, error: Errors, message: str) -> None:
        self.error = error
        super().__init__(f"{error.name}: {message}")


class NotLeaderError(RaftError):
    def __init__(self, message: str) -> None:
        super().__init__(Errors.NOT_LEADER_OR_FOLLOWER, message)


class RaftInvariantError(Exception):
    """A broken safety invariant: the node must stop loudly rather than continue."""
