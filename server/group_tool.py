"""The handlers and output of `kraft-admin groups` (server/group_commands.py parses the
command line): kafka-consumer-groups.sh's columns, messages and rules over
server/group_client.py."""

from __future__ import annotations

import argparse
import datetime
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from server.admin_client import CommandError
from server.group_client import (
    EARLIEST,
    LATEST,
    GroupAdmin,
    GroupDescription,
    TopicPartition,
    error_text,
)
from server.kafka_tool import run_command

MISSING = "-"
INACTIVE = ("Empty", "Dead")
# Kafka's tool warns that these are rebalancing (the last two: a consumer-protocol group's).
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")
_DURATION = re.compile(r"^P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$")


def run(args: argparse.Namespace) -> str:
    return run_command(args, GroupAdmin, _HANDLERS)


def _warn(text: str) -> None:
    print(text, file=sys.stderr)


def parse_topic(spec: str) -> tuple[str, list[int] | None]:
    """`T` (every partition) or `T:0,1,2`."""
    topic, sep, parts = spec.partition(":")
    if not topic:
        raise CommandError(f"invalid --topic {spec!r}: expected TOPIC or TOPIC:P,P")
    if not sep:
        return topic, None
    try:
        return topic, sorted({int(p) for p in parts.split(",") if p.strip()})
    except ValueError:
        raise CommandError(f"invalid --topic {spec!r}: partitions are numbers") from None


def parse_duration_ms(text: str) -> int:
    match = _DURATION.match(text.strip())
    if not match or not any(match.groups()):
        raise CommandError(f"invalid --by-duration {text!r}: expected e.g. P1DT2H30M or PT15M")
    days, hours, minutes, seconds = (float(g) if g else 0.0 for g in match.groups())
    return int((((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 1000)


def parse_datetime_ms(text: str) -> int:
    """Kafka's formats: with or without a zone (local time), with or without millis."""
    try:
        moment = datetime.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise CommandError(f"invalid --to-datetime {text!r}: expected "
                           "YYYY-MM-DDTHH:mm:SS.sss, optionally with +HH:MM") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka reads a zoneless value
    return int(moment.timestamp() * 1000)


# ---- list ----

async def _list(admin: GroupAdmin, args: argparse.Namespace) -> str:
    groups = await admin.list_groups()
    if args.state:
        wanted = {s.strip().lower() for s in args.state.split(",") if s.strip()}
        groups = [g for g in groups if g.state.lower() in wanted]
    if args.json:
        return json.dumps([{"group": g.group_id, "state": g.state,
                            "type": g.group_type or "unknown", "protocolType": g.protocol_type}
                           for g in groups])
    if args.state is None and not args.type:
        return "\n".join(g.group_id for g in groups)
    header = ["GROUP"] + (["TYPE", "PROTOCOL-TYPE"] if args.type else []) + \
        (["STATE"] if args.state is not None else [])
    # Kafka's GroupType names; a broker before ListGroups v5 does not say (Unknown).
    rows = [[g.group_id] + ([g.group_type.capitalize() or "Unknown", g.protocol_type or MISSING]
                            if args.type else []) + ([g.state] if args.state is not None else [])
            for g in groups]
    return _columns(header, rows)


def _columns(header: list[str], rows: list[list[str]]) -> str:
    """Kafka's `%-Ns` columns: each as wide as its longest cell, one space between."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *rows])


# ---- describe ----

async def _describe_one(admin: GroupAdmin, group_id: str) -> dict[str, Any]:
    description = await admin.describe(group_id)
    committed = await admin.committed(group_id)
    assigned = {tp: m for m in description.members for tp in m.assignment}
    partitions = sorted(set(committed) | set(assigned))
    ends = await admin.list_offsets(partitions, LATEST) if partitions else {}
    node, host, port = description.coordinator
    offsets = []
    for tp in partitions:
        member = assigned.get(tp)
        current, end = committed.get(tp), ends.get(tp)
        offsets.append({
            "topic": tp[0], "partition": tp[1], "currentOffset": current, "logEndOffset": end,
            "lag": end - current if current is not None and end is not None else None,
            "consumerId": member.member_id if member else None,
            "host": member.host if member else None,
            "clientId": member.client_id if member else None})
    return {
        "group": group_id, "state": description.state, "type": description.group_type,
        "coordinator": {"id": node, "host": host, "port": port},
        "protocolType": description.protocol_type,
        "assignmentStrategy": description.protocol,
        "groupEpoch": description.group_epoch,
        "targetAssignmentEpoch": description.assignment_epoch,
        "members": [{"consumerId": m.member_id, "groupInstanceId": m.instance_id,
                     "host": m.host, "clientId": m.client_id,
                     "assignment": _pairs(m.assignment), "memberEpoch": m.member_epoch,
                     "targetAssignment": None if m.target_assignment is None
                     else _pairs(m.target_assignment)}
                    for m in description.members],
        "offsets": offsets,
    }


def _pairs(partitions: tuple[TopicPartition, ...]) -> list[dict[str, Any]]:
    return [{"topic": t, "partition": p} for t, p in partitions]


def _should_print(group: dict[str, Any]) -> bool:
    """Kafka's shouldPrintMemberState: its notes on stderr; nothing more for a dead group."""
    state, name = group["state"], group["group"]
    if state == "Dead":
        _warn(f"\nError: Consumer group '{name}' does not exist.")
        return False
    if state == "Empty":
        _warn(f"\nConsumer group '{name}' has no active members.")
    elif state in REBALANCING:
        _warn(f"\nWarning: Consumer group '{name}' is rebalancing.")
    return True


def _value(value: object) -> str:
    return MISSING if value is None else str(value)


def render_offsets(group: dict[str, Any]) -> str:
    rows = [[group["group"], o["topic"], str(o["partition"]), _value(o["currentOffset"]),
             _value(o["logEndOffset"]), _value(o["lag"]), _value(o["consumerId"]),
             _value(o["host"]), _value(o["clientId"])] for o in group["offsets"]]
    with_partitions = {o["consumerId"] for o in group["offsets"]}
    rows += [[group["group"], MISSING, MISSING, MISSING, MISSING, MISSING, m["consumerId"],
              m["host"], m["clientId"]] for m in group["members"]
             if m["consumerId"] not in with_partitions]
    header = ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID"]
    # Kafka's widths: at least 15 for the names, 10 for PARTITION and 15 for the numbers.
    minimum = [15, 15, 10, 15, 15, 15, 15, 15, 0]
    return "\n" + _padded(header, rows, minimum)


def _padded(header: list[str], rows: list[list[str]], minimum: list[int]) -> str:
    widths = [max([minimum[i]] + [len(r[i]) for r in [header, *rows]])
              for i in range(len(header))]
    return "\n".join(" ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in [header, *rows])


def _assignment_text(assignment: list[dict[str, Any]]) -> str:
    by_topic: dict[str, list[int]] = {}
    for a in assignment:
        by_topic.setdefault(a["topic"], []).append(a["partition"])
    return ",".join(f"{t}({','.join(map(str, sorted(ps)))})"
                    for t, ps in sorted(by_topic.items())) or MISSING


def render_members(group: dict[str, Any], verbose: bool) -> str:
    static = any(m["groupInstanceId"] for m in group["members"])
    # A consumer-protocol group's verbose view is Kafka 4's: each member's epoch and current
    # assignment, the target assignment's epoch and the member's share of it.
    epochs = verbose and group["type"] == "consumer"
    header = ["GROUP", "CONSUMER-ID"] + (["GROUP-INSTANCE-ID"] if static else []) + \
        ["HOST", "CLIENT-ID", "#PARTITIONS"]
    if epochs:
        header += ["CURRENT-EPOCH", "CURRENT-ASSIGNMENT", "TARGET-EPOCH", "TARGET-ASSIGNMENT"]
    elif verbose:
        header.append("ASSIGNMENT")
    rows = []
    for m in group["members"]:
        row = [group["group"], m["consumerId"]] + ([m["groupInstanceId"] or MISSING]
                                                   if static else [])
        row += [m["host"], m["clientId"], str(len(m["assignment"]))]
        if epochs:
            row += [_value(m["memberEpoch"]), _assignment_text(m["assignment"]),
                    _value(group["targetAssignmentEpoch"]),
                    _assignment_text(m["targetAssignment"] or [])]
        elif verbose:
            row.append(_assignment_text(m["assignment"]))
        rows.append(row)
    minimum = [15, 15] + ([17] if static else []) + [15, 15, 15] + \
        ([15, 20, 15, 0] if epochs else [0] if verbose else [])
    return "\n" + _padded(header, rows, minimum)


def render_state(group: dict[str, Any], verbose: bool = False) -> str:
    c = group["coordinator"]
    coordinator = f"{c['host']}:{c['port']} ({c['id']})"
    epochs = verbose and group["type"] == "consumer"  # Kafka 4's verbose view of one
    header = ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE"] + \
        (["GROUP-EPOCH", "TARGET-ASSIGNMENT-EPOCH"] if epochs else []) + ["#MEMBERS"]
    row = [group["group"], coordinator, group["assignmentStrategy"], group["state"]] + \
        ([_value(group["groupEpoch"]), _value(group["targetAssignmentEpoch"])]
         if epochs else []) + [str(len(group["members"]))]
    minimum = [25, 25, 20, 15] + ([15, 25] if epochs else []) + [0]
    return "\n" + _padded(header, [row], minimum)


async def _describe(admin: GroupAdmin, args: argparse.Namespace) -> str:
    names = args.group_ids or [g.group_id for g in await admin.list_groups()]
    described = [await _describe_one(admin, name) for name in names]
    if args.json:
        return json.dumps(described)
    out = []
    for group in described:
        if not _should_print(group):
            continue
        if args.members:
            out.append(render_members(group, args.verbose))
        elif args.state:
            out.append(render_state(group, args.verbose))
        else:
            out.append(render_offsets(group))
    if not out and any(g["state"] == "Dead" for g in described):
        raise CommandError("no such group: " + ", ".join(g["group"] for g in described
                                                        if g["state"] == "Dead"))
    return "\n".join(out)


# ---- reset-offsets ----

async def _partitions(admin: GroupAdmin, args: argparse.Namespace,
                      committed: dict[TopicPartition, int]) -> list[TopicPartition]:
    if args.all_topics:
        return sorted(committed)
    specs = [parse_topic(spec) for spec in args.topic]
    cluster = await admin.metadata(sorted({t for t, _ in specs}))
    out: list[TopicPartition] = []
    for topic, partitions in specs:
        known = cluster.topics.get(topic)
        if known is None:
            raise CommandError(f"UNKNOWN_TOPIC_OR_PARTITION: topic {topic} does not exist")
        for p in partitions if partitions is not None else known:
            if p not in known:
                raise CommandError(f"UNKNOWN_TOPIC_OR_PARTITION: {topic}-{p} does not exist")
            out.append((topic, p))
    return sorted(set(out))


async def plan_reset(admin: GroupAdmin, args: argparse.Namespace,
                     committed: dict[TopicPartition, int],
                     partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    """Each partition's new offset, as Kafka's prepareOffsetsToReset computes it."""
    if args.to_earliest:
        return _complete(await admin.list_offsets(partitions, EARLIEST), partitions)
    if args.to_latest:
        return _complete(await admin.list_offsets(partitions, LATEST), partitions)
    if args.to_datetime is not None or args.by_duration is not None:
        when = (parse_datetime_ms(args.to_datetime) if args.to_datetime is not None else
                int(datetime.datetime.now().timestamp() * 1000)
                - parse_duration_ms(args.by_duration))
        found = await admin.list_offsets(partitions, when)
        latest = await admin.list_offsets([tp for tp in partitions if found.get(tp, -1) < 0],
                                          LATEST)
        # No record at or after the time: the log end, as Kafka does.
        return _complete({tp: found[tp] if found.get(tp, -1) >= 0 else latest.get(tp, -1)
                          for tp in partitions}, partitions)
    if args.shift_by is not None:
        missing = [tp for tp in partitions if tp not in committed]
        if missing:
            t, p = missing[0]
            raise CommandError(f"Cannot shift offset for partition {t}-{p} since there is no "
                               "current committed offset")
        wanted = {tp: committed[tp] + args.shift_by for tp in partitions}
    else:
        wanted = {tp: args.to_offset for tp in partitions}
    starts = await admin.list_offsets(partitions, EARLIEST)
    ends = await admin.list_offsets(partitions, LATEST)
    out = {}
    for tp, offset in wanted.items():
        start, end = starts.get(tp, 0), ends.get(tp, offset)
        if offset > end:
            _warn(f"New offset ({offset}) is higher than latest offset for topic partition "
                  f"{tp[0]}-{tp[1]}. Value will be set to {end}")
            offset = end
        elif offset < start:
            _warn(f"New offset ({offset}) is lower than earliest offset for topic partition "
                  f"{tp[0]}-{tp[1]}. Value will be set to {start}")
            offset = start
        out[tp] = offset
    return out


def _complete(found: dict[TopicPartition, int],
              partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
    missing = [tp for tp in partitions if found.get(tp, -1) < 0]
    if missing:
        t, p = missing[0]
        raise CommandError(f"cannot read the offsets of {t}-{p}: its leader did not answer")
    return {tp: found[tp] for tp in partitions}


async def _reset(admin: GroupAdmin, args: argparse.Namespace) -> str:
    description: GroupDescription = await admin.describe(args.group_id)
    if description.state not in INACTIVE:
        raise CommandError(f"Assignments can only be reset if the group '{args.group_id}' is "
                           f"inactive, but the current state is {description.state}.")
    committed = await admin.committed(args.group_id)
    partitions = await _partitions(admin, args, committed)
    if not partitions:
        raise CommandError(f"group '{args.group_id}' has no offsets to reset")
    plan = await plan_reset(admin, args, committed, partitions)
    if args.execute:
        errors = {tp: code for tp, code in (await admin.commit(args.group_id, plan)).items()
                  if code}
        if errors:
            (t, p), code = next(iter(errors.items()))
            raise CommandError(f"{len(errors)} partition(s) not reset; first: {t}-{p}: "
                               f"{error_text(code)}")
    elif not args.dry_run:
        _warn("WARN: No action will be performed as the --execute option is missing. "
              "In a future major release, the default behavior of this command will be to "
              "prompt the user before executing the reset rather than doing a dry run. You "
              "should add the --dry-run option explicitly if you are scripting this command "
              "and want to keep the current default behavior without prompting.")
    if args.json:
        return json.dumps([{"group": args.group_id, "topic": t, "partition": p,
                            "newOffset": offset, "executed": bool(args.execute)}
                           for (t, p), offset in sorted(plan.items())])
    rows = [[args.group_id, t, str(p), str(offset)] for (t, p), offset in sorted(plan.items())]
    return "\n" + _padded(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"], rows, [30, 30, 10, 15])


# ---- delete and delete-offsets ----

async def _delete(admin: GroupAdmin, args: argparse.Namespace) -> str:
    results = {group: await admin.delete_group(group) for group in args.group_ids}
    failed = {g: code for g, code in results.items() if code}
    if args.json:
        output = json.dumps([{"group": g, "error": error_text(c) if c else None}
                             for g, c in results.items()])
    elif not failed:
        output = ("Deletion of requested consumer groups ("
                  + ", ".join(f"'{g}'" for g in results) + ") was successful.")
    else:
        lines = ["Deletion of some consumer groups failed:"]
        lines += [f"* Group '{g}' could not be deleted due to: {error_text(c)}"
                  for g, c in failed.items()]
        ok = [g for g in results if g not in failed]
        if ok:
            lines.append("\nThese consumer groups were deleted successfully: "
                         + ", ".join(f"'{g}'" for g in ok))
        output = "\n".join(lines)
    if failed:
        print(output)
        raise CommandError(f"{len(failed)} group(s) not deleted")
    return output


_GROUP_ERRORS = {
    24: "'{g}' is not valid.", 69: "'{g}' does not exist.",
    30: "Access to '{g}' is not authorized.",
    68: "Deleting offsets of a consumer group '{g}' is forbidden if the group is not empty.",
}


async def _delete_offsets(admin: GroupAdmin, args: argparse.Namespace) -> str:
    specs = [parse_topic(spec) for spec in args.topic]
    whole = [t for t, parts in specs if parts is None]
    cluster = await admin.metadata(sorted(set(whole))) if whole else None
    partitions: list[TopicPartition] = []
    for topic, parts in specs:
        if parts is None:
            # Kafka's tool sends a topic without partitions as all of them; an unknown topic
            # comes back from the broker as UNKNOWN_TOPIC_OR_PARTITION.
            parts = cluster.topics.get(topic, [0]) if cluster is not None else [0]
        partitions += [(topic, p) for p in parts]
    error, results = await admin.delete_offsets(args.group_id, partitions)
    failed = bool(error) or any(results.values())
    if args.json:
        return json.dumps({"group": args.group_id, "error": error_text(error) if error else None,
                           "partitions": [{"topic": t, "partition": p,
                                           "error": error_text(c) if c else None}
                                          for (t, p), c in sorted(results.items())]})
    if error == 0:
        head = (f"Request succeed for deleting offsets with topic "
                f"{', '.join(t for t, _ in specs)} group {args.group_id}")
        if failed:
            _warn("\nError: Encounter some partition level error, see the follow-up details:")
    else:
        text = _GROUP_ERRORS.get(error, "Encounter some unknown error: {e}")
        raise CommandError(text.format(g=args.group_id, e=error_text(error)))
    rows = [[t, str(p), f"Error: {error_text(c)}" if c else "Successful"]
            for (t, p), c in sorted(results.items())]
    output = head + "\n\n" + _padded(["TOPIC", "PARTITION", "STATUS"], rows, [30, 15, 15])
    if failed:
        print(output)
        raise CommandError("some offsets were not deleted")
    return output


_HANDLERS: dict[str, Callable[[GroupAdmin, argparse.Namespace], Awaitable[str]]] = {
    "list": _list,
    "describe": _describe,
    "reset-offsets": _reset,
    "delete": _delete,
    "delete-offsets": _delete_offsets,
}
