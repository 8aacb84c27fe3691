"""`kraft-admin configs describe|alter`: dynamic topic and broker configs, printed as
kafka-configs prints them (--json: every field, synonyms included)."""

from __future__ import annotations

import argparse
import json
import re
from typing import Any

from metadata.rpc import admin_pb2 as pb
from server.admin_client import AdminClient, CommandError, failure_text

_SOURCES = {s: n.removeprefix("CONFIG_SOURCE_") for n, s in pb.ConfigSource.items()}
_CONFIG_TYPES = {t: n.removeprefix("CONFIG_TYPE_") for n, t in pb.ConfigType.items()}
_RESOURCE_TYPES = {"topics": pb.CONFIG_RESOURCE_TYPE_TOPIC,
                   "brokers": pb.CONFIG_RESOURCE_TYPE_BROKER}
_DYNAMIC_SOURCE = {"topics": pb.CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG,
                   "brokers": pb.CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG}
# kafka-configs' --add-config: commas inside [...] belong to a list value.
_CONFIG_SPLIT = re.compile(r",(?=[^\]]*(?:\[|$))")


def config_value(entry: Any) -> str:
    return entry.value if entry.HasField("value") else "null"


def parse_add_config(text: str) -> list[tuple[str, str]]:
    pairs = []
    for item in _CONFIG_SPLIT.split(text):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise CommandError('Invalid entity config: all configs to be added must be in the '
                               'format "key=val".')
        value = value.strip()
        if value.startswith("[") and value.endswith("]"):
            value = value[1:-1]
        pairs.append((key.strip(), value))
    return pairs


def _entity_name(args: argparse.Namespace) -> str:
    if args.entity_default:
        if args.entity_type != "brokers":
            raise CommandError("--entity-default is only allowed with --entity-type brokers")
        return ""
    return str(args.entity_name)


def configs_describe(client: AdminClient, args: argparse.Namespace) -> str:
    rtype = _RESOURCE_TYPES[args.entity_type]
    if args.entity_default or args.entity_name is not None:
        names = [_entity_name(args)]
    elif args.entity_type == "topics":
        names = [t.name for t in client.call("ListTopics", pb.ListTopicsRequest()).topics]
    else:
        brokers = client.call("ListBrokers", pb.ListBrokersRequest()).brokers
        names = [str(b.broker_id) for b in brokers] + [""]
    request = pb.DescribeConfigsRequest(resources=[
        pb.DescribeConfigsResource(resource_type=rtype, resource_name=n) for n in names])
    results = client.call("DescribeConfigs", request).results
    for r in results:
        if r.error_code:
            raise CommandError(failure_text(r.error_code, r.error_message))
    shown = {}
    for r in results:
        source = (pb.CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG if not r.resource_name
                  and rtype == pb.CONFIG_RESOURCE_TYPE_BROKER
                  else _DYNAMIC_SOURCE[args.entity_type])
        shown[r.resource_name] = [c for c in r.configs if args.all or c.source == source]
    if args.json:
        return json.dumps([{"entityType": args.entity_type, "entityName": name, "configs": [
            {"name": c.name, "value": c.value if c.HasField("value") else None,
             "source": _SOURCES.get(c.source, str(c.source)),
             "isDefault": c.source == pb.CONFIG_SOURCE_DEFAULT_CONFIG,
             "isSensitive": c.is_sensitive, "readOnly": c.read_only,
             "type": _CONFIG_TYPES.get(c.config_type, str(c.config_type)),
             "synonyms": [{"name": s.name, "value": s.value if s.HasField("value") else None,
                           "source": _SOURCES.get(s.source, str(s.source))}
                          for s in c.synonyms]} for c in configs]}
            for name, configs in shown.items()])
    lines = []
    singular = args.entity_type[:-1]
    for name, configs in shown.items():
        if name == "" and args.entity_type == "brokers":
            lines.append(f"Default configs for {args.entity_type} in the cluster are:")
        else:
            lines.append(f"{'All' if args.all else 'Dynamic'} configs for {singular} {name} are:")
        for c in configs:
            synonyms = ", ".join(
                f"{_SOURCES.get(s.source, s.source)}:{s.name}="
                f"{s.value if s.HasField('value') else 'null'}" for s in c.synonyms)
            lines.append(f"  {c.name}={config_value(c)} sensitive="
                         f"{str(c.is_sensitive).lower()} synonyms={{{synonyms}}}")
    return "\n".join(lines)


def configs_alter(client: AdminClient, args: argparse.Namespace) -> str:
    if args.add_config is None and args.delete_config is None:
        raise CommandError("give --add-config and/or --delete-config")
    name = _entity_name(args)
    changes = [pb.AlterableConfig(name=k, op=pb.ALTER_CONFIG_OP_SET, value=v)
               for k, v in parse_add_config(args.add_config or "")] if args.add_config else []
    changes += [pb.AlterableConfig(name=k.strip(), op=pb.ALTER_CONFIG_OP_DELETE)
                for k in (args.delete_config or "").split(",") if k.strip()]
    request = pb.IncrementalAlterConfigsRequest(resources=[pb.AlterConfigsResource(
        resource_type=_RESOURCE_TYPES[args.entity_type], resource_name=name, configs=changes)])
    [result] = client.call("IncrementalAlterConfigs", request).results
    if result.error_code:
        raise CommandError(failure_text(result.error_code, result.error_message))
    if args.json:
        return json.dumps({"entityType": args.entity_type, "entityName": name, "error": None})
    if name == "":
        return f"Completed updating default config for {args.entity_type} in the cluster."
    return f"Completed updating config for {args.entity_type[:-1]} {name}."
