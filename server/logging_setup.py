"""Log lines that say which node, in which state and epoch, wrote them."""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable

_status_source: Callable[[], tuple[str, int]] | None = None


class _NodeContext(logging.Filter):
    def __init__(self, node_id: int) -> None:
        super().__init__()
        self.node_id = node_id

    def filter(self, record: logging.LogRecord) -> bool:
        state, epoch = _status_source() if _status_source is not None else ("Starting", -1)
        record.node = self.node_id
        record.raft_state = state
        record.epoch = epoch
        return True


def configure_logging(node_id: int, level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.addFilter(_NodeContext(node_id))
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s [node=%(node)s state=%(raft_state)s epoch=%(epoch)s] "
        "%(name)s: %(message)s"
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def set_status_source(source: Callable[[], tuple[str, int]] | None) -> None:
    """Where log lines read the node's current state and epoch from."""
    global _status_source
    _status_source = source
