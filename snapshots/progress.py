"""A progress line on stderr for long loads, shown only when stderr is a terminal and only
once a load has taken more than half a second (short loads print nothing)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

_DELAY_S = 0.5
_EVERY_S = 0.1


class Progress:
    def __init__(self, label: str, total: int, stream: TextIO | None = None,
                 enabled: bool | None = None) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = self._stream.isatty() if enabled is None else enabled
        self._label = label
        self._total = max(total, 1)
        self._start = time.monotonic()
        self._last = 0.0
        self._shown = False

    def update(self, done: int, total: int | None = None) -> None:
        if not self._enabled:
            return
        if total is not None:
            self._total = max(total, 1)
        now = time.monotonic()
        if now - self._start < _DELAY_S or now - self._last < _EVERY_S:
            return
        self._last = now
        fraction = min(done / self._total, 1.0)
        bar = "#" * int(fraction * 30)
        self._stream.write(f"\r{self._label} [{bar:<30}] {fraction:6.1%}")
        self._stream.flush()
        self._shown = True

    def close(self) -> None:
        if self._shown:
            self._stream.write("\r" + " " * (len(self._label) + 41) + "\r")
            self._stream.flush()
            self._shown = False
