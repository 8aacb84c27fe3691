"""Refusals as the controller's rules return them (with Kafka's codes from kraft.errors), and
the result of a rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Generic, TypeVar

from kraft.errors import DEFAULT_MESSAGES, Errors
from metadata.records import Record

T = TypeVar("T")

# Kafka's MAX_RECORDS_PER_USER_OP: a user operation that needs more records is refused.
MAX_RECORDS_PER_USER_OP = 10_000


class ControllerApiError(Exception):
    """A refusal with Kafka's error name and message. Raised when a whole request fails;
    also carried as a value in per-topic and per-partition results."""

    def __init__(self, error: Errors, message: str | None = None) -> None:
        self.error = error
        self.message = message if message is not None else DEFAULT_MESSAGES.get(error, "")
        super().__init__(f"{error.name}: {self.message}")

    @property
    def error_name(self) -> str:
        return self.error.name

    @property
    def code(self) -> int:
        return int(self.error)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ControllerApiError)
            and (self.error, self.message) == (other.error, other.message)
        )

    def __hash__(self) -> int:
        return hash((self.error, self.message))

    def __repr__(self) -> str:
        return f"ControllerApiError({self.error.name}, {self.message!r})"


@dataclass(frozen=True, slots=True)
class ControllerResult(Generic[T]):
    """What a rule produces: the records to append and the response to send once they commit.
    `atomic` (Kafka's atomicOf) asks for all records in one batch; otherwise the controller may
    split them across batches."""

    records: tuple[Record, ...]
    response: T
    atomic: bool = True


def check_user_op_size(records: list[Record]) -> None:
    """Kafka's BoundedList on user operations: refuse rather than write a huge batch."""
    if len(records) > MAX_RECORDS_PER_USER_OP:
        raise ControllerApiError(
            Errors.POLICY_VIOLATION, "Unable to perform excessively large batch operation."
        )
