"""The handlers and output of `kraft-admin transactions` (server/txn_commands.py parses the
command line): kafka-transactions.sh's columns (its prettyPrintTable: each column as wide as
its widest cell, tab-separated), messages and rules over server/txn_client.py.

find-hanging is Kafka's FindHangingTransactionsCommand: the open transactions of the
partitions searched (DescribeProducers) whose producer last wrote longer ago than
--max-transaction-timeout are candidates; a candidate hangs when no coordinator lists its
producer id (ListTransactions), when its transactional id's coordinator no longer knows the id,
or when the id's current transaction (DescribeTransactions) does not include the partition:
then no coordinator will ever send that partition its marker."""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from server.admin_client import CommandError
from server.group_client import GroupCommandError
from server.kafka_tool import run_command
from server.txn_client import ProducerState, TopicPartition, TxnAdmin, TxnDescription

NONE = "None"  # what Kafka's tool prints for an absent value
MINUTE_MS = 60_000


def now_ms() -> int:
    return int(time.time() * 1000)


def run(args: argparse.Namespace) -> str:
    return run_command(args, TxnAdmin, HANDLERS)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Kafka's prettyPrintTable (its trailing tab and padding left off)."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    return "\n".join("\t".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in [headers, *rows])


def _tp(tp: TopicPartition) -> str:
    return f"{tp[0]}-{tp[1]}"  # Kafka's TopicPartition.toString


def _failed(what: str, exc: GroupCommandError) -> CommandError:
    return CommandError(f"{what}: {exc}")


# ---- list ----

async def _list(admin: TxnAdmin, args: argparse.Namespace) -> str:
    duration = -1 if args.duration_filter is None else args.duration_filter
    try:
        listings = await admin.list_transactions(duration_ms=duration)
    except GroupCommandError as exc:
        raise _failed("Failed to list transactions", exc) from None
    if args.json:
        return json.dumps([{"transactionalId": t.transactional_id, "coordinator": t.coordinator,
                            "producerId": t.producer_id, "state": t.state} for t in listings])
    return table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"],
                 [[t.transactional_id, str(t.coordinator), str(t.producer_id), t.state]
                  for t in listings])


# ---- describe ----

def description_facts(d: TxnDescription, now: int) -> dict[str, Any]:
    started = d.start_ms >= 0
    return {"coordinatorId": d.coordinator, "transactionalId": d.transactional_id,
            "producerId": d.producer_id, "producerEpoch": d.producer_epoch, "state": d.state,
            "transactionTimeoutMs": d.timeout_ms,
            "currentTransactionStartTimeMs": d.start_ms if started else None,
            "transactionDurationMs": now - d.start_ms if started else None,
            "topicPartitions": [{"topic": t, "partition": p} for t, p in d.partitions]}


async def _describe(admin: TxnAdmin, args: argparse.Namespace) -> str:
    what = f"Failed to describe transaction state of transactional-id `{args.transactional_id}`"
    try:
        found = await admin.describe_transaction(args.transactional_id)
    except GroupCommandError as exc:
        raise _failed(what, exc) from None
    if found is None:
        raise CommandError(f"{what}: TRANSACTIONAL_ID_NOT_FOUND")
    facts = description_facts(found, now_ms())
    if args.json:
        return json.dumps(facts)

    def shown(value: object) -> str:
        return NONE if value is None else str(value)

    return table(
        ["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
         "TopicPartitions"],
        [[str(found.coordinator), found.transactional_id, str(found.producer_id),
          str(found.producer_epoch), found.state, str(found.timeout_ms),
          shown(facts["currentTransactionStartTimeMs"]), shown(facts["transactionDurationMs"]),
          ",".join(_tp(tp) for tp in found.partitions)]])


# ---- describe-producers ----

def producer_facts(p: ProducerState) -> dict[str, Any]:
    return {"producerId": p.producer_id, "producerEpoch": p.producer_epoch,
            "latestCoordinatorEpoch": p.coordinator_epoch, "lastSequence": p.last_sequence,
            "lastTimestamp": p.last_timestamp,
            "currentTransactionStartOffset": p.txn_start_offset if p.txn_start_offset >= 0
            else None}


async def _describe_producers(admin: TxnAdmin, args: argparse.Namespace) -> str:
    tp = (args.topic, args.partition)
    where = "leader" if args.broker_id is None else f"broker {args.broker_id}"
    try:
        producers = (await admin.describe_producers([tp], args.broker_id))[tp]
    except GroupCommandError as exc:
        raise _failed(f"Failed to describe producers for partition {_tp(tp)} on {where}",
                      exc) from None
    if args.json:
        return json.dumps([producer_facts(p) for p in producers])
    return table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence",
                  "LastTimestamp", "CurrentTransactionStartOffset"],
                 [[str(p.producer_id), str(p.producer_epoch), str(p.coordinator_epoch),
                   str(p.last_sequence), str(p.last_timestamp),
                   str(p.txn_start_offset) if p.txn_start_offset >= 0 else NONE]
                  for p in producers])


# ---- abort ----

async def _abort(admin: TxnAdmin, args: argparse.Namespace) -> str:
    tp = (args.topic, args.partition)
    if args.start_offset is None and args.producer_id is None:
        raise CommandError("The transaction to abort must be identified either with "
                           "--start-offset (for brokers on 3.0 or above) or with --producer-id, "
                           "--producer-epoch, and --coordinator-epoch (for older brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            raise CommandError("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            raise CommandError("Missing required argument --coordinator-epoch")
        producer_id, epoch, coordinator_epoch = \
            args.producer_id, args.producer_epoch, args.coordinator_epoch
    else:
        try:
            producers = (await admin.describe_producers([tp]))[tp]
        except GroupCommandError as exc:
            raise _failed(f"Failed to validate producer state for partition {_tp(tp)}",
                          exc) from None
        found = next((p for p in producers if p.txn_start_offset == args.start_offset), None)
        if found is None:
            raise CommandError(f"Could not find any open transactions starting at offset "
                               f"{args.start_offset} on partition {_tp(tp)}")
        producer_id, epoch, coordinator_epoch = \
            found.producer_id, found.producer_epoch, found.coordinator_epoch
    # A transaction that hung before its producer's first marker has coordinator epoch -1:
    # 0 is at most any leader epoch, as Kafka's tool sends it.
    coordinator_epoch = max(coordinator_epoch, 0)
    spec = (f"AbortTransactionSpec(topicPartition={_tp(tp)}, producerId={producer_id}, "
            f"producerEpoch={epoch}, coordinatorEpoch={coordinator_epoch})")
    try:
        await admin.abort(tp, producer_id, epoch, coordinator_epoch)
    except GroupCommandError as exc:
        raise _failed(f"Failed to abort transaction {spec}", exc) from None
    if args.json:
        return json.dumps({"topic": tp[0], "partition": tp[1], "producerId": producer_id,
                           "producerEpoch": epoch, "coordinatorEpoch": coordinator_epoch,
                           "aborted": True})
    return ""  # Kafka's tool prints nothing when the marker is written


# ---- find-hanging ----

async def _search_scope(admin: TxnAdmin, args: argparse.Namespace) -> list[TopicPartition]:
    if args.topic is not None and args.partition is not None:
        return [(args.topic, args.partition)]
    try:
        partitions = await admin.partitions(None if args.topic is None else [args.topic])
    except GroupCommandError as exc:
        what = "topics" if args.topic is None else f"topic {args.topic}"
        raise _failed(f"Failed to describe {what}", exc) from None
    return [tp for tp, info in sorted(partitions.items())
            if args.broker_id is None or args.broker_id in info.replicas]


async def find_hanging(admin: TxnAdmin, args: argparse.Namespace, now: int
                       ) -> list[tuple[TopicPartition, ProducerState]]:
    scope = await _search_scope(admin, args)
    try:
        producers = await admin.describe_producers(scope, args.broker_id) if scope else {}
    except GroupCommandError as exc:
        raise _failed(f"Failed to describe producers for {len(scope)} partitions on broker "
                      f"{args.broker_id if args.broker_id is not None else 'leaders'}",
                      exc) from None
    limit_ms = args.max_transaction_timeout * MINUTE_MS
    candidates = [(tp, p) for tp, states in sorted(producers.items()) for p in states
                  if p.txn_start_offset >= 0 and now - p.last_timestamp > limit_ms]
    if not candidates:
        return []
    producer_ids = sorted({p.producer_id for _, p in candidates})
    try:
        listings = await admin.list_transactions(producer_ids=producer_ids)
    except GroupCommandError as exc:
        raise _failed(f"Failed to list transactions for {len(producer_ids)} producers",
                      exc) from None
    ids = {t.producer_id: t.transactional_id for t in listings if t.producer_id in producer_ids}
    descriptions: dict[str, TxnDescription | None] = {}
    for txn_id in sorted(set(ids.values())):
        try:
            descriptions[txn_id] = await admin.describe_transaction(txn_id)
        except GroupCommandError as exc:
            raise _failed(f"Failed to describe {len(set(ids.values()))} transactions",
                          exc) from None

    def hangs(tp: TopicPartition, producer: ProducerState) -> bool:
        txn_id = ids.get(producer.producer_id)
        described = descriptions.get(txn_id) if txn_id is not None else None
        return described is None or tp not in described.partitions

    return [(tp, p) for tp, p in candidates if hangs(tp, p)]


async def _find_hanging(admin: TxnAdmin, args: argparse.Namespace) -> str:
    if args.topic is None and args.broker_id is None:
        raise CommandError("The `find-hanging` command requires either --topic or --broker-id "
                           "to limit the scope of the search")
    if args.partition is not None and args.topic is None:
        raise CommandError("The --partition argument requires --topic to be provided")
    now = now_ms()
    hanging = await find_hanging(admin, args, now)
    rows = [{"topic": tp[0], "partition": tp[1], "producerId": p.producer_id,
             "producerEpoch": p.producer_epoch, "coordinatorEpoch": p.coordinator_epoch,
             "startOffset": p.txn_start_offset, "lastTimestamp": p.last_timestamp,
             "durationMinutes": (now - p.last_timestamp) // MINUTE_MS} for tp, p in hanging]
    if args.json:
        return json.dumps(rows)
    return table(["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch",
                  "StartOffset", "LastTimestamp", "Duration(min)"],
                 [[str(v) for v in row.values()] for row in rows])


HANDLERS: dict[str, Callable[[TxnAdmin, argparse.Namespace], Awaitable[str]]] = {
    "list": _list,
    "describe": _describe,
    "describe-producers": _describe_producers,
    "abort": _abort,
    "find-hanging": _find_hanging,
}
