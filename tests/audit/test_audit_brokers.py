"""Broker registrations in the audit's cluster replay: a registration re-sent by the same
incarnation keeps its epoch (Kafka's rule, seen in a chaos run across a controller failover);
a new incarnation must register with a higher epoch."""

from __future__ import annotations

from audit.replay import cluster_history

SCHEMA = (
    "node_id int, offset bigint, record_index bigint, timestamp_ms bigint, record_type string, "
    "broker_id int, broker_epoch bigint, incarnation_id string, fenced boolean, "
    "in_controlled_shutdown boolean, topic_id string, topic_name string, "
    "config_resource_type int, config_resource_name string, config_key string, "
    "acl_id string, scram_user string, scram_mechanism int"
)


def register(offset: int, epoch: int, incarnation: str) -> tuple:
    return (1, offset, 0, offset, "REGISTER_BROKER_RECORD", 4, epoch, incarnation, True, False,
            None, None, None, None, None, None, None, None)


def test_resent_registrations_keep_their_epoch_and_new_incarnations_need_a_higher_one(
    spark,  # type: ignore[no-untyped-def]
) -> None:
    rows = spark.createDataFrame([
        register(10, 10, "A"),
        register(12, 10, "A"),  # the same incarnation again: its answer was lost
        register(20, 10, "B"),  # a new process with the old epoch: stale
        register(30, 30, "C"),
    ], SCHEMA)
    history = cluster_history(rows, complete=True)
    stale = [(f.check, f.offset) for f in history.findings]
    assert stale == [("stale-broker-epoch", 20)]
