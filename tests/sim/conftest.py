"""The simulator's tests run thousands of protocol steps: keep the protocol's own log quiet."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def quiet_protocol_logs() -> Iterator[None]:
    logger = logging.getLogger("kraft")
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)
