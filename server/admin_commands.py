"""`kraft-admin` command groups for the Admin service (metadata/rpc/admin.proto).

  kraft-admin --bootstrap-server H:P topics create --topic T [--partitions N]
      [--replication-factor R | --replica-assignment 1:2,2:3] [--config K=V ...]
  kraft-admin --bootstrap-server H:P topics delete|describe --topic T
  kraft-admin --bootstrap-server H:P topics list
  kraft-admin --bootstrap-server H:P partitions add --topic T --partitions N
  kraft-admin --bootstrap-server H:P brokers list | describe|unregister --broker-id N
  kraft-admin --bootstrap-server H:P leaders elect --election-type preferred|unclean
      (--topic T [--partition P] | --all-topic-partitions)
  kraft-admin --bootstrap-server H:P reassign execute|cancel (--reassignment-json-file F |
      --topic T --partition P [--replicas 1,2,3]) | reassign list [--topic T]
  kraft-admin --bootstrap-server H:P configs describe|alter --entity-type topics|brokers
      (--entity-name N | --entity-default) [--add-config K=V,...] [--delete-config K,...]
  kraft-admin --bootstrap-server H:P cluster describe | features describe

Any controller may be asked (a list `H:P,H:P` is tried in turn). Writes are forwarded to the
active controller by the node; NOT_CONTROLLER and unreachable nodes are retried (bounded).
Output follows Kafka's tools (kafka-topics, kafka-configs, kafka-leader-election,
kafka-reassign-partitions, kafka-cluster, kafka-features); `--json` prints machine-readable
output (docs/admin.md). A refusal is one line, `ERROR_NAME: message`, and a non-zero exit.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Sequence
from typing import Any

from kraft.core.voters import SUPPORTED_KRAFT_VERSIONS
from kraft.errors import Errors, error_name
from metadata.configs import feature_level_name
from metadata.rpc import admin_pb2 as pb
from server.admin_client import RETRY_FOR_S, AdminClient, CommandError, failure_text, parse_servers
from server.config_commands import config_value, configs_alter, configs_describe
from server.quorum_client import QuorumError, describe_quorum

GROUPS = frozenset({"topics", "partitions", "brokers", "leaders", "reassign", "configs",
                    "cluster", "features"})
_RECOVERY_STATES = {0: "RECOVERED", 1: "RECOVERING"}
KRAFT_VERSION = "kraft.version"


# ---- rendering helpers ----

def _ids(values: Sequence[int]) -> str:
    return ",".join(str(v) for v in values)


def _endpoint(e: pb.BrokerEndpoint) -> str:
    host = f"[{e.host}]" if ":" in e.host else e.host
    return f"{e.name}://{host}:{e.port}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Kafka's prettyPrintTable: cells padded to their column, each followed by a tab."""
    table = [list(header), *[list(r) for r in rows]]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join("".join(cell.ljust(w) + "\t" for cell, w in zip(row, widths, strict=True))
                     for row in table)


def _labelled(rows: Sequence[tuple[str, object]]) -> str:
    return "\n".join(f"{label + ':':<24}{value}" for label, value in rows)


def _broker_json(b: pb.BrokerDescription) -> dict[str, Any]:
    return {"id": b.broker_id, "epoch": b.epoch, "fenced": b.fenced,
            "inControlledShutdown": b.in_controlled_shutdown,
            "rack": b.rack if b.HasField("rack") else None,
            "endpoints": [_endpoint(e) for e in b.endpoints]}


def _broker_state(b: pb.BrokerDescription) -> str:
    if b.fenced:
        return "fenced"
    return "controlled-shutdown" if b.in_controlled_shutdown else "unfenced"


def _item_error(item: Any) -> dict[str, Any]:
    return {"error": error_name(item.error_code) if item.error_code else None,
            "message": item.error_message or None}


def _fail_after(output: str, failures: list[str], what: str) -> CommandError:
    """Several items, some failed: show every result, then a one-line summary (exit 1)."""
    if output:
        print(output)
    return CommandError(f"{len(failures)} {what} failed; first: {failures[0]}")


# ---- argument parsing ----

def _bootstrap(parser: argparse.ArgumentParser) -> None:
    # SUPPRESS keeps `kraft-admin --bootstrap-server X topics list` working as well.
    parser.add_argument("--bootstrap-server", default=argparse.SUPPRESS,
                        help="HOST:PORT[,HOST:PORT...] of any controller")
    parser.add_argument("--json", action="store_true", help="machine-readable output")


def _command(commands: Any, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = commands.add_parser(name, help=help_text)
    _bootstrap(parser)
    return parser


def add_commands(groups: Any) -> None:
    """Register the command groups on kraft-admin's top-level subparsers."""
    topics = groups.add_parser("topics", help="create, delete, list and describe topics")
    commands = topics.add_subparsers(dest="command", required=True)
    create = _command(commands, "create", "create a topic")
    create.add_argument("--topic", required=True)
    create.add_argument("--partitions", type=int)
    create.add_argument("--replication-factor", type=int)
    create.add_argument("--replica-assignment",
                        help="per partition, brokers separated by ':', partitions by ','")
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    create.add_argument("--if-not-exists", action="store_true")
    delete = _command(commands, "delete", "delete a topic")
    delete.add_argument("--topic", required=True)
    delete.add_argument("--if-exists", action="store_true")
    _command(commands, "list", "list topic names")
    describe = _command(commands, "describe", "partitions, leaders and ISRs of topics")
    describe.add_argument("--topic", help="one topic (default: all)")

    partitions = groups.add_parser("partitions", help="add partitions to a topic")
    commands = partitions.add_subparsers(dest="command", required=True)
    add = _command(commands, "add", "raise a topic's partition count")
    add.add_argument("--topic", required=True)
    add.add_argument("--partitions", type=int, required=True, help="the new total")
    add.add_argument("--replica-assignment", help="for the new partitions only")

    brokers = groups.add_parser("brokers", help="registered brokers")
    commands = brokers.add_subparsers(dest="command", required=True)
    _command(commands, "list", "every registered broker")
    for name, text in (("describe", "one broker"), ("unregister", "remove a registration")):
        _command(commands, name, text).add_argument("--broker-id", type=int, required=True)

    leaders = groups.add_parser("leaders", help="leader elections")
    commands = leaders.add_subparsers(dest="command", required=True)
    elect = _command(commands, "elect", "elect preferred or unclean leaders")
    elect.add_argument("--election-type", required=True, type=str.lower,
                       choices=["preferred", "unclean"])
    which = elect.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic")
    which.add_argument("--all-topic-partitions", action="store_true")
    elect.add_argument("--partition", type=int)

    reassign = groups.add_parser("reassign", help="partition reassignments")
    commands = reassign.add_subparsers(dest="command", required=True)
    for name, text in (("execute", "start reassignments"), ("cancel", "cancel reassignments")):
        command = _command(commands, name, text)
        command.add_argument("--reassignment-json-file",
                             help='{"version":1,"partitions":[{"topic","partition","replicas"}]}')
        command.add_argument("--topic")
        command.add_argument("--partition", type=int)
        if name == "execute":
            command.add_argument("--replicas", help="the target, e.g. 1,2,3")
    _command(commands, "list", "reassignments in progress").add_argument("--topic")

    configs = groups.add_parser("configs", help="dynamic topic and broker configs")
    commands = configs.add_subparsers(dest="command", required=True)
    for name, text in (("describe", "show configs"), ("alter", "set or delete configs")):
        command = _command(commands, name, text)
        command.add_argument("--entity-type", required=True, choices=["topics", "brokers"])
        entity = command.add_mutually_exclusive_group(required=name == "alter")
        entity.add_argument("--entity-name")
        entity.add_argument("--entity-default", action="store_true",
                            help="the cluster-wide broker default")
        if name == "describe":
            command.add_argument("--all", action="store_true", help="defaults included")
        else:
            command.add_argument("--add-config", help="K=V,K2=[A,B]")
            command.add_argument("--delete-config", help="K,K2")

    cluster = groups.add_parser("cluster", help="the cluster")
    commands = cluster.add_subparsers(dest="command", required=True)
    _command(commands, "describe", "cluster id, controllers and brokers")
    features = groups.add_parser("features", help="finalized feature levels")
    commands = features.add_subparsers(dest="command", required=True)
    _command(commands, "describe", "supported and finalized features")


def run(args: argparse.Namespace) -> str:
    client = AdminClient(parse_servers(getattr(args, "bootstrap_server", None)),
                         getattr(args, "tls", None))
    handler = _HANDLERS[(args.group, args.command)]
    return handler(client, args)


def _broker_list(text: str, what: str) -> list[int]:
    try:
        return [int(b) for b in text.split(",") if b.strip()]
    except ValueError:
        raise CommandError(f"invalid {what} {text!r}: expected broker ids like 1,2,3") from None


def _assignment(text: str) -> list[list[int]]:
    try:
        return [[int(b) for b in part.split(":")] for part in text.split(",")]
    except ValueError:
        raise CommandError(f"invalid --replica-assignment {text!r}: expected e.g. "
                           "1:2,2:3 (brokers by ':', partitions by ',')") from None


def _key_values(items: Sequence[str]) -> list[tuple[str, str]]:
    pairs = []
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"invalid config {item!r}: expected KEY=VALUE")
        pairs.append((key.strip(), value.strip()))
    return pairs


# ---- topics ----

def _topics_create(client: AdminClient, args: argparse.Namespace) -> str:
    topic = pb.CreatableTopic(name=args.topic, num_partitions=-1, replication_factor=-1,
                              configs=[pb.ConfigValue(name=k, value=v)
                                       for k, v in _key_values(args.config)])
    if args.replica_assignment is not None:
        if args.partitions is not None or args.replication_factor is not None:
            raise CommandError("--replica-assignment cannot be combined with --partitions or "
                               "--replication-factor")
        topic.assignments.extend(pb.ReplicaAssignment(partition_index=i, broker_ids=ids)
                                 for i, ids in enumerate(_assignment(args.replica_assignment)))
    else:
        topic.num_partitions = -1 if args.partitions is None else args.partitions
        topic.replication_factor = (-1 if args.replication_factor is None
                                    else args.replication_factor)
    [result] = client.call("CreateTopics", pb.CreateTopicsRequest(topics=[topic])).topics
    if result.error_code == Errors.TOPIC_ALREADY_EXISTS and args.if_not_exists:
        return json.dumps({"name": args.topic, "created": False}) if args.json else ""
    if result.error_code:
        raise CommandError(failure_text(result.error_code, result.error_message))
    if args.json:
        return json.dumps({"name": result.name, "topicId": result.topic_id, "created": True,
                           "partitions": result.num_partitions,
                           "replicationFactor": result.replication_factor})
    return f"Created topic {result.name}."


def _topics_delete(client: AdminClient, args: argparse.Namespace) -> str:
    request = pb.DeleteTopicsRequest(topics=[pb.TopicRef(name=args.topic)])
    [result] = client.call("DeleteTopics", request).topics
    if result.error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION and args.if_exists:
        return json.dumps({"name": args.topic, "deleted": False}) if args.json else ""
    if result.error_code:
        raise CommandError(failure_text(result.error_code, result.error_message))
    if args.json:
        return json.dumps({"name": result.name, "topicId": result.topic_id, "deleted": True})
    return f"Deleted topic {result.name}."


def _topics_list(client: AdminClient, args: argparse.Namespace) -> str:
    topics = client.call("ListTopics", pb.ListTopicsRequest()).topics
    if args.json:
        return json.dumps([{"name": t.name, "topicId": t.topic_id,
                            "partitionCount": t.partition_count,
                            "replicationFactor": t.replication_factor} for t in topics])
    return "\n".join(t.name for t in topics)


def _topic_json(t: pb.TopicDescription) -> dict[str, Any]:
    return {
        "name": t.name, "topicId": t.topic_id,
        "configs": {c.name: c.value if c.HasField("value") else None for c in t.configs},
        "partitions": [{"partition": p.partition_index, "leader": p.leader,
                        "replicas": list(p.replicas), "isr": list(p.isr),
                        "leaderEpoch": p.leader_epoch, "partitionEpoch": p.partition_epoch,
                        "leaderRecoveryState": _RECOVERY_STATES.get(
                            p.leader_recovery_state, str(p.leader_recovery_state))}
                       for p in t.partitions],
    }


def _topic_text(t: pb.TopicDescription) -> str:
    """kafka-topics --describe (spec §4.4); ELR is not modelled, so N/A as Kafka prints it."""
    factor = len(t.partitions[0].replicas) - len(t.partitions[0].adding_replicas) \
        if t.partitions else 0
    configs = ",".join(f"{c.name}={config_value(c)}" for c in t.configs)
    lines = [f"Topic: {t.name}\tTopicId: {t.topic_id}\tPartitionCount: {len(t.partitions)}"
             f"\tReplicationFactor: {factor}\tConfigs: {configs}"]
    for p in t.partitions:
        line = (f"\tTopic: {t.name}\tPartition: {p.partition_index}"
                f"\tLeader: {p.leader if p.leader >= 0 else 'none'}"
                f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}")
        if p.adding_replicas or p.removing_replicas:
            line += (f"\tAdding Replicas: {_ids(p.adding_replicas)}"
                     f"\tRemoving Replicas: {_ids(p.removing_replicas)}")
        lines.append(line + "\tElr: N/A\tLastKnownElr: N/A")
    return "\n".join(lines)


def _topics_describe(client: AdminClient, args: argparse.Namespace) -> str:
    names = [args.topic] if args.topic is not None else []
    topics = client.call("DescribeTopics", pb.DescribeTopicsRequest(names=names)).topics
    for t in topics:
        if t.error_code:
            raise CommandError(failure_text(t.error_code, t.error_message))
    if args.json:
        described = [_topic_json(t) for t in topics]
        return json.dumps(described[0] if args.topic is not None else described)
    return "\n".join(_topic_text(t) for t in topics)


def _partitions_add(client: AdminClient, args: argparse.Namespace) -> str:
    topic = pb.CreatePartitionsTopic(name=args.topic, count=args.partitions)
    if args.replica_assignment is not None:
        topic.assignments.extend(pb.CreatePartitionsAssignment(broker_ids=ids)
                                 for ids in _assignment(args.replica_assignment))
    [result] = client.call("CreatePartitions",
                           pb.CreatePartitionsRequest(topics=[topic])).topics
    if result.error_code:
        raise CommandError(failure_text(result.error_code, result.error_message))
    if args.json:
        return json.dumps({"name": args.topic, "partitions": args.partitions})
    return f"Topic {args.topic} now has {args.partitions} partition(s)."


# ---- brokers ----

def _brokers_list(client: AdminClient, args: argparse.Namespace) -> str:
    brokers = client.call("ListBrokers", pb.ListBrokersRequest()).brokers
    if args.json:
        return json.dumps([_broker_json(b) for b in brokers])
    return _table(["Id", "Epoch", "State", "Rack", "Endpoints"], [
        [str(b.broker_id), str(b.epoch), _broker_state(b), b.rack if b.HasField("rack") else "-",
         ",".join(_endpoint(e) for e in b.endpoints)] for b in brokers])


def _brokers_describe(client: AdminClient, args: argparse.Namespace) -> str:
    r = client.call("DescribeBroker", pb.DescribeBrokerRequest(broker_id=args.broker_id))
    b = r.broker
    configs = {c.name: c.value if c.HasField("value") else None for c in r.configs}
    if args.json:
        return json.dumps(_broker_json(b) | {"incarnationId": b.incarnation_id,
                                             "leaderCount": r.leader_count,
                                             "isrCount": r.isr_count, "configs": configs})
    return _labelled([
        ("BrokerId", b.broker_id), ("Epoch", b.epoch), ("IncarnationId", b.incarnation_id),
        ("State", _broker_state(b)), ("Rack", b.rack if b.HasField("rack") else "-"),
        ("Endpoints", ",".join(_endpoint(e) for e in b.endpoints)),
        ("LeaderCount", r.leader_count), ("IsrCount", r.isr_count),
        ("Configs", ",".join(f"{k}={v}" for k, v in configs.items())),
    ])


def _brokers_unregister(client: AdminClient, args: argparse.Namespace) -> str:
    client.call("UnregisterBroker", pb.UnregisterBrokerRequest(broker_id=args.broker_id))
    if args.json:
        return json.dumps({"id": args.broker_id, "unregistered": True})
    return f"Broker {args.broker_id} is no longer registered."


# ---- leaders ----

def _leaders_elect(client: AdminClient, args: argparse.Namespace) -> str:
    if args.partition is not None and args.topic is None:
        raise CommandError("--partition is only allowed with --topic")
    election = (pb.ELECTION_TYPE_PREFERRED if args.election_type == "preferred"
                else pb.ELECTION_TYPE_UNCLEAN)
    request = pb.ElectLeadersRequest(election_type=election,
                                     all_partitions=args.all_topic_partitions)
    if args.topic is not None:
        partitions = [args.partition] if args.partition is not None else _partitions_of(
            client, args.topic)
        request.topic_partitions.append(pb.TopicPartitions(topic=args.topic,
                                                           partitions=partitions))
    results = client.call("ElectLeaders", request).results
    kind = args.election_type.upper()
    failed = [r for r in results if r.error_code not in (0, Errors.ELECTION_NOT_NEEDED)]
    failures = [f"{r.topic}-{r.partition}: {failure_text(r.error_code, r.error_message)}"
                for r in failed]
    if args.json:
        output = json.dumps([{"topic": r.topic, "partition": r.partition} | _item_error(r)
                             for r in results])
    else:
        done = [f"{r.topic}-{r.partition}" for r in results if not r.error_code]
        not_needed = [f"{r.topic}-{r.partition}" for r in results
                      if r.error_code == Errors.ELECTION_NOT_NEEDED]
        lines = []
        if done:
            lines.append(f"Successfully completed leader election ({kind}) for partitions "
                         + ", ".join(done))
        if not_needed:
            lines.append("Valid replica already elected for partitions " + ", ".join(not_needed))
        lines.extend(f"Error completing leader election ({kind}) for partition: {f}"
                     for f in failures)
        output = "\n".join(lines) or "No partition needed a leader election."
    if failures:
        raise _fail_after(output, failures, "replica election(s)")
    return output


def _partitions_of(client: AdminClient, topic: str) -> list[int]:
    [t] = client.call("DescribeTopics", pb.DescribeTopicsRequest(names=[topic])).topics
    if t.error_code:
        raise CommandError(failure_text(t.error_code, t.error_message))
    return [p.partition_index for p in t.partitions]


# ---- reassignments ----

def _reassignments(args: argparse.Namespace, cancel: bool) -> list[pb.ReassignablePartition]:
    if args.reassignment_json_file is not None:
        if args.topic is not None or args.partition is not None:
            raise CommandError("--reassignment-json-file cannot be combined with --topic")
        return _reassignment_file(args.reassignment_json_file, cancel)
    if args.topic is None or args.partition is None:
        raise CommandError("give --reassignment-json-file, or --topic and --partition")
    if cancel:
        return [pb.ReassignablePartition(topic=args.topic, partition=args.partition,
                                         cancel=True)]
    if not args.replicas:
        raise CommandError("--replicas is required with --topic and --partition")
    return [pb.ReassignablePartition(topic=args.topic, partition=args.partition,
                                     replicas=_broker_list(args.replicas, "--replicas"))]


def _reassignment_file(path: str, cancel: bool) -> list[pb.ReassignablePartition]:
    """kafka-reassign-partitions' format; `log_dirs` is accepted and ignored."""
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        entries = data["partitions"]
        partitions = [pb.ReassignablePartition(
            topic=str(e["topic"]), partition=int(e["partition"]), cancel=cancel,
            replicas=[] if cancel else [int(b) for b in e["replicas"]]) for e in entries]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise CommandError(f"cannot read reassignment file {path}: {exc}") from exc
    if not partitions:
        raise CommandError(f"reassignment file {path} names no partitions")
    return partitions


def _reassign_alter(client: AdminClient, args: argparse.Namespace, cancel: bool) -> str:
    partitions = _reassignments(args, cancel)
    results = client.call("AlterPartitionReassignments",
                          pb.AlterPartitionReassignmentsRequest(partitions=partitions)).results
    failures = [f"{r.topic}-{r.partition}: {failure_text(r.error_code, r.error_message)}"
                for r in results if r.error_code]
    if args.json:
        output = json.dumps([{"topic": r.topic, "partition": r.partition} | _item_error(r)
                             for r in results])
    elif len(results) == 1 and failures:
        raise CommandError(failures[0])
    else:
        ok = [f"{r.topic}-{r.partition}" for r in results if not r.error_code]
        plural = "" if len(ok) == 1 else "s"
        # kafka-reassign-partitions' wording, colon included only for cancel.
        verb = "cancelled partition reassignment" if cancel else "started partition reassignment"
        lines = [f"Successfully {verb}{plural} for{':' if cancel else ''} {','.join(ok)}"
                 ] if ok else []
        output = "\n".join(lines + failures)
    if failures:
        raise _fail_after(output, failures, "partition reassignment(s)")
    return output


def _reassign_list(client: AdminClient, args: argparse.Namespace) -> str:
    request = pb.ListPartitionReassignmentsRequest()
    if args.topic is not None:
        request.topics.append(pb.TopicPartitions(topic=args.topic,
                                                 partitions=_partitions_of(client, args.topic)))
    ongoing = client.call("ListPartitionReassignments", request).reassignments
    if args.json:
        return json.dumps([{"topic": r.topic, "partition": r.partition,
                            "replicas": list(r.replicas),
                            "addingReplicas": list(r.adding_replicas),
                            "removingReplicas": list(r.removing_replicas)} for r in ongoing])
    if not ongoing:
        return "No partition reassignments found."
    lines = ["Current partition reassignments:"]
    for r in ongoing:
        line = f"{r.topic}-{r.partition}: replicas: {_ids(r.replicas)}."
        if r.adding_replicas:
            line += f" adding: {_ids(r.adding_replicas)}."
        if r.removing_replicas:
            line += f" removing: {_ids(r.removing_replicas)}."
        lines.append(line)
    return "\n".join(lines)


# ---- cluster and features ----

def _cluster_describe(client: AdminClient, args: argparse.Namespace) -> str:
    r = client.call("DescribeCluster", pb.DescribeClusterRequest(include_fenced_brokers=True))
    facts = {
        "clusterId": r.cluster_id, "controllerId": r.controller_id,
        "controllerEndpoint": r.controller_endpoint or None,
        "controllers": [{"id": c.id, "endpoint": c.endpoint} for c in r.controllers],
        "brokers": [_broker_json(b) for b in r.brokers],
        "metadataOffset": r.metadata_offset,
    }
    if args.json:
        return json.dumps(facts)
    controller = (f"{r.controller_id} ({r.controller_endpoint})" if r.controller_id >= 0
                  else "none")
    return _labelled([
        ("ClusterId", r.cluster_id), ("ActiveController", controller),
        ("Controllers", ", ".join(f"{c.id}@{c.endpoint}" for c in r.controllers)),
        ("Brokers", ", ".join(f"{b.broker_id} ({_broker_state(b)})" for b in r.brokers)),
        ("MetadataOffset", r.metadata_offset),
    ])


def _kraft_version(client: AdminClient) -> int:
    """The finalized kraft.version, which the Raft layer keeps (KIP-853): the quorum
    leader's DescribeQuorum, asked where the Admin service answered."""
    server = client.answered or client.servers[0]
    try:
        return describe_quorum(server, RETRY_FOR_S, client.tls).kraft_version
    except QuorumError as exc:
        raise CommandError(f"cannot read {KRAFT_VERSION}: {exc}") from exc


def _features_describe(client: AdminClient, args: argparse.Namespace) -> str:
    r = client.call("DescribeFeatures", pb.DescribeFeaturesRequest())
    supported = {s.name: (s.min_version, s.max_version) for s in r.supported}
    finalized = {f.name: f.level for f in r.finalized}
    if KRAFT_VERSION not in supported:  # as Kafka lists it: supported 0..1, finalized 0|1
        supported[KRAFT_VERSION] = (SUPPORTED_KRAFT_VERSIONS[0], SUPPORTED_KRAFT_VERSIONS[-1])
        finalized[KRAFT_VERSION] = _kraft_version(client)
    epoch = r.finalized_epoch if r.finalized_epoch >= 0 else None
    if args.json:
        return json.dumps({"features": [
            {"name": name, "supportedMinVersion": low, "supportedMaxVersion": high,
             "finalizedVersionLevel": finalized.get(name, 0)}
            for name, (low, high) in sorted(supported.items())],
            "epoch": epoch})
    # Kafka's FeatureCommand line per supported feature, sorted by name.
    return "\n".join(
        f"Feature: {name}\tSupportedMinVersion: {feature_level_name(name, low)}"
        f"\tSupportedMaxVersion: {feature_level_name(name, high)}"
        f"\tFinalizedVersionLevel: {feature_level_name(name, finalized.get(name, 0))}"
        f"\tEpoch: {'-' if epoch is None else epoch}"
        for name, (low, high) in sorted(supported.items()))


_HANDLERS: dict[tuple[str, str], Callable[[AdminClient, argparse.Namespace], str]] = {
    ("topics", "create"): _topics_create,
    ("topics", "delete"): _topics_delete,
    ("topics", "list"): _topics_list,
    ("topics", "describe"): _topics_describe,
    ("partitions", "add"): _partitions_add,
    ("brokers", "list"): _brokers_list,
    ("brokers", "describe"): _brokers_describe,
    ("brokers", "unregister"): _brokers_unregister,
    ("leaders", "elect"): _leaders_elect,
    ("reassign", "execute"): lambda client, args: _reassign_alter(client, args, cancel=False),
    ("reassign", "cancel"): lambda client, args: _reassign_alter(client, args, cancel=True),
    ("reassign", "list"): _reassign_list,
    ("configs", "describe"): configs_describe,
    ("configs", "alter"): configs_alter,
    ("cluster", "describe"): _cluster_describe,
    ("features", "describe"): _features_describe,
}
