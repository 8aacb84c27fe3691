"""What SegmentedLog needs to know of the batches it stores: how to find their frames in a
buffer, with each CRC verified, and whether a bad frame at the end looks like an interrupted
write. The Raft log stores kraft's own batches (kraft/log/codec.py, the default); a broker's
partition log stores Kafka's magic-2 record batches (broker/records.py) with the same segment,
group-commit and recovery machinery.

A format yields `BatchHeader` tuples: base offset, leader epoch, the number of offsets the
batch spans (`record_count`), its byte position and size, the control flag and the CRC.
"""

from __future__ import annotations

from typing import Protocol

from kraft.log.base import CorruptRecordError
from kraft.log.codec import BatchHeader, ByteSource, is_torn_tail, scan_prefix


class BatchFormat(Protocol):
    """A batch framing a SegmentedLog can store. Implementations are stateless."""

    @property
    def name(self) -> str:
        """Short name for messages (`kraft`, `kafka-v2`)."""

    def scan_prefix(
        self, data: ByteSource, path: str | None = None, base_position: int = 0
    ) -> tuple[list[BatchHeader], int, CorruptRecordError | None]:
        """Valid frames from the start of `data`, CRC checked, up to the first bad one:
        (headers, where scanning stopped, the error there or None). Positions in headers and
        errors are offsets in `data` plus `base_position`."""

    def is_torn_tail(self, data: ByteSource, position: int) -> bool:
        """Whether a bad frame at `position` looks like an interrupted write at the end of
        `data` (runs past the end, is the last frame, or only zeros follow)."""


class KraftBatchFormat:
    """The Raft log's own batches (kraft/log/codec.py)."""

    name = "kraft"

    def scan_prefix(
        self, data: ByteSource, path: str | None = None, base_position: int = 0
    ) -> tuple[list[BatchHeader], int, CorruptRecordError | None]:
        return scan_prefix(data, path, base_position)

    def is_torn_tail(self, data: ByteSource, position: int) -> bool:
        return is_torn_tail(data, position)


KRAFT_FORMAT: BatchFormat = KraftBatchFormat()


def scan_all(
    batch_format: BatchFormat, data: ByteSource, path: str | None = None, base_position: int = 0
) -> list[BatchHeader]:
    """Every frame of `data` in `batch_format`; CorruptRecordError at the first bad one."""
    headers, _, error = batch_format.scan_prefix(data, path, base_position)
    if error is not None:
        raise error
    return headers
