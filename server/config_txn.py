"""The node config's keys of the transaction coordinator (broker/txn, docs/transactions.md),
Kafka's names and defaults. server/config_keys.py registers them with the rest (TXN_KEYS);
`txn_config` is the coordinator's settings from a loaded config."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.txn.config import TxnConfig
from metadata.config_def import INT_MAX, ConfigDef, ConfigKey, ConfigType, integer

if TYPE_CHECKING:
    from server.config import NodeConfig

TXN_KEYS = ConfigDef()


def _define_int(name: str, default: int, lo: int, doc: str, *,
                hi: int = INT_MAX) -> ConfigKey[int]:
    description, parse = integer(lo, hi, "")
    return TXN_KEYS.define(name, ConfigType.INT, str(default), parse, doc,
                           valid_values=description)


STATE_LOG_NUM_PARTITIONS = _define_int(
    "transaction.state.log.num.partitions", 50, 1,
    "Partitions of __transaction_state, fixed when the topic is created on first use: a "
    "transactional id lives on partition abs(hash(transactional.id)) % this, so it must never "
    "change.",
)
STATE_LOG_REPLICATION_FACTOR = _define_int(
    "transaction.state.log.replication.factor", 3, 1,
    "Replication factor of __transaction_state. Not capped, as offsets.topic.replication."
    "factor: while fewer brokers are registered and unfenced the topic cannot be created "
    "and transactional producers see COORDINATOR_NOT_AVAILABLE (set 1 for one broker).",
    hi=32767,
)
STATE_LOG_MIN_ISR = _define_int(
    "transaction.state.log.min.isr", 2, 1,
    "min.insync.replicas of __transaction_state (a topic config set when it is created).",
)
STATE_LOG_SEGMENT_BYTES = _define_int(
    "transaction.state.log.segment.bytes", 104857600, 14,
    "Segment size of __transaction_state (a topic config set when it is created).",
)
MAX_TIMEOUT_MS = _define_int(
    "transaction.max.timeout.ms", 900000, 1,
    "Longest transaction.timeout.ms a producer may ask for; a longer one gets "
    "INVALID_TRANSACTION_TIMEOUT from InitProducerId.",
)
ID_EXPIRATION_MS = _define_int(
    "transactional.id.expiration.ms", 604800000, 1,
    "A transactional id with no transaction open and no update for this long is removed "
    "(a tombstone in __transaction_state); its next InitProducerId starts it afresh.",
)
ABORT_TIMED_OUT_INTERVAL_MS = _define_int(
    "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10000, 1,
    "How often the coordinator aborts transactions open longer than their timeout (fencing "
    "their producer with a bumped epoch).",
)
REMOVE_EXPIRED_INTERVAL_MS = _define_int(
    "transaction.remove.expired.transaction.cleanup.interval.ms", 3600000, 1,
    "How often the coordinator looks for transactional ids past transactional.id."
    "expiration.ms.",
)


def txn_config(config: NodeConfig) -> TxnConfig:
    values = config.values
    return TxnConfig(
        state_log_num_partitions=values[STATE_LOG_NUM_PARTITIONS.name],
        state_log_replication_factor=values[STATE_LOG_REPLICATION_FACTOR.name],
        state_log_min_isr=values[STATE_LOG_MIN_ISR.name],
        state_log_segment_bytes=values[STATE_LOG_SEGMENT_BYTES.name],
        max_timeout_ms=values[MAX_TIMEOUT_MS.name],
        id_expiration_ms=values[ID_EXPIRATION_MS.name],
        abort_timed_out_interval_ms=values[ABORT_TIMED_OUT_INTERVAL_MS.name],
        remove_expired_interval_ms=values[REMOVE_EXPIRED_INTERVAL_MS.name])
