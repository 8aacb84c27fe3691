"""tests/integration/eos_app.py's retry: a coordinator moving or loading is retried, as a real
application retries it (consumer.committed() raises NOT_COORDINATOR as librdkafka got it,
not marked retriable; the app used to exit on it), and anything else is raised at once."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, KafkaException

from tests.integration import eos_app


def failing(codes: list[int], retriable: bool = False,
            ) -> tuple[list[int], Callable[[], str]]:
    calls: list[int] = []

    def call() -> str:
        calls.append(1)
        if len(calls) <= len(codes):
            raise KafkaException(KafkaError(codes[len(calls) - 1], retriable=retriable))
        return "done"
    return calls, call


def test_coordinator_errors_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eos_app, "COORDINATOR_RETRY_S", 0)
    calls, call = failing([KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
                           KafkaError.COORDINATOR_NOT_AVAILABLE])
    assert eos_app.retry(call) == "done"
    assert len(calls) == 4


def test_retriable_errors_are_retried_and_others_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eos_app, "COORDINATOR_RETRY_S", 0)
    calls, call = failing([KafkaError._TIMED_OUT], retriable=True)
    assert eos_app.retry(call) == "done"
    calls, call = failing([KafkaError.GROUP_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        eos_app.retry(call)
    assert len(calls) == 1


def test_a_coordinator_that_never_comes_back_is_raised_at_the_deadline(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(eos_app, "COORDINATOR_RETRY_S", 0)
    calls, call = failing([KafkaError.NOT_COORDINATOR] * 1_000_000)
    with pytest.raises(KafkaException):
        eos_app.retry(call, deadline_s=0.05)
    assert len(calls) > 1
