"""The replicated log: batch codec, epoch cache, the file and in-memory logs, quorum state."""

from kraft.log.base import (
    Batch,
    CorruptRecordError,
    DurableLog,
    FlushJob,
    LogAppendError,
    OffsetAndEpoch,
    ReplicatedLog,
)
from kraft.log.codec import (
    LEADER_CHANGE,
    SNAPSHOT_FOOTER,
    SNAPSHOT_HEADER,
    BatchHeader,
    decode_batches,
    decode_control_record,
    encode_batch,
    encode_control_record,
    is_torn_tail,
    scan_batches,
)
from kraft.log.epoch_cache import EpochCache
from kraft.log.memory import MemoryFlushJob, MemoryLog
from kraft.log.quorum_state import MemoryQuorumStateStore, QuorumStateError, QuorumStateStore
from kraft.log.segmented import SegmentedLog, SegmentFlushJob, list_segments

__all__ = [
    "LEADER_CHANGE",
    "SNAPSHOT_FOOTER",
    "SNAPSHOT_HEADER",
    "Batch",
    "BatchHeader",
    "CorruptRecordError",
    "DurableLog",
    "EpochCache",
    "FlushJob",
    "LogAppendError",
    "MemoryFlushJob",
    "MemoryLog",
    "MemoryQuorumStateStore",
    "OffsetAndEpoch",
    "QuorumStateError",
    "QuorumStateStore",
    "ReplicatedLog",
    "SegmentFlushJob",
    "SegmentedLog",
    "decode_batches",
    "decode_control_record",
    "encode_batch",
    "encode_control_record",
    "is_torn_tail",
    "list_segments",
    "scan_batches",
]
