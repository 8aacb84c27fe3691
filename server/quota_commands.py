"""`kraft-admin quotas`: client quotas (KIP-546) through the Admin service, with
kafka-configs.sh's options, value syntax and output for quota entities.

  kraft-admin --bootstrap-server H:P quotas --describe
      [--entity-type users|clients|ips (--entity-name N | --entity-default)] ... [--json]
  kraft-admin --bootstrap-server H:P quotas --alter
      --entity-type users|clients|ips (--entity-name N | --entity-default) ...
      [--add-config producer_byte_rate=1048576,consumer_byte_rate=2097152]
      [--delete-config request_percentage] [--json]

Each --entity-type takes the --entity-name or --entity-default that follows it, so
`--entity-type users --entity-name alice --entity-type clients --entity-default` is alice's
quota on every client id without its own. `--describe` lists the entities with exactly the
named parts (kafka-configs.sh's containsOnly filter; an --entity-type without a name matches
any name), or every quota when no entity is given. Values print as Java prints a double.
"""

from __future__ import annotations

import argparse
import json
from decimal import Decimal
from typing import Any

from metadata.quotas import MatchType
from metadata.rpc import admin_pb2 as pb
from server.admin_client import AdminClient, CommandError, failure_text, parse_servers

GROUP = "quotas"
ENTITY_TYPES = {"users": "user", "clients": "client-id", "ips": "ip"}
_DISPLAY = {"user": "user-principal", "client-id": "client-id", "ip": "ip"}
_UNNAMED = object()  # an --entity-type not yet followed by a name or --entity-default


class _EntityType(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        entities = list(getattr(namespace, "entities", None) or [])
        entities.append([values, _UNNAMED])
        namespace.entities = entities


class _EntityName(argparse.Action):
    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        entities = getattr(namespace, "entities", None) or []
        if not entities or entities[-1][1] is not _UNNAMED:
            parser.error(f"{option_string} must follow its --entity-type")
        entities[-1][1] = None if self.const == "default" else values


def add_commands(groups: Any) -> None:
    """Register `quotas` on kraft-admin's top-level subparsers."""
    quotas = groups.add_parser(GROUP, help="client quotas (kafka-configs.sh --entity-type "
                                           "users|clients|ips)")
    quotas.set_defaults(command=GROUP, entities=[])
    action = quotas.add_mutually_exclusive_group(required=True)
    action.add_argument("--describe", action="store_true", help="show quotas")
    action.add_argument("--alter", action="store_true", help="set or delete quotas")
    quotas.add_argument("--entity-type", action=_EntityType, choices=list(ENTITY_TYPES),
                        help="users, clients or ips; repeat for users and clients")
    quotas.add_argument("--entity-name", action=_EntityName, help="the entity of that name")
    quotas.add_argument("--entity-default", action=_EntityName, nargs=0, const="default",
                        help="the default entity of that type")
    quotas.add_argument("--add-config", metavar="K=V,...",
                        help="producer_byte_rate, consumer_byte_rate, request_percentage, "
                             "controller_mutation_rate; ips: connection_creation_rate")
    quotas.add_argument("--delete-config", metavar="K,...")
    quotas.add_argument("--json", action="store_true")


def run(args: argparse.Namespace) -> str:
    client = AdminClient(parse_servers(getattr(args, "bootstrap_server", None)),
                         getattr(args, "tls", None))
    if args.describe:
        return _describe(client, args)
    return _alter(client, args)


def java_double(value: float) -> str:
    """Java's Double.toString: plain from 10^-3 up to 10^7, else d.dddE<n>."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr(value)]
    magnitude = abs(value)
    if value == 0 or 1e-3 <= magnitude < 1e7:
        return repr(value)
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    text = "".join(map(str, digits))
    assert isinstance(exponent, int)
    power = exponent + len(text) - 1
    mantissa = text[0] + "." + (text[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{power}"


def entity_text(entity: dict[str, str | None]) -> str:
    """kafka-configs.sh's "user-principal 'alice', client-id 'app'" / "the default ip"."""
    parts = []
    for kind in ("user", "client-id", "ip"):
        if kind in entity:
            name = entity[kind]
            parts.append(f"{_DISPLAY[kind]} '{name}'" if name is not None
                         else f"the default {_DISPLAY[kind]}")
    return ", ".join(parts)


def _entities(args: argparse.Namespace) -> list[tuple[str, Any]]:
    entities = [(ENTITY_TYPES[kind], name) for kind, name in args.entities]
    kinds = [kind for kind, _ in entities]
    if len(set(kinds)) != len(kinds):
        raise CommandError("each --entity-type may be given once")
    return entities


def _parse_values(text: str) -> list[tuple[str, float]]:
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, equals, value = item.partition("=")
        if not equals or not key.strip():
            raise CommandError('Invalid entity config: all configs to be added must be in the '
                               'format "key=val".')
        try:
            pairs.append((key.strip(), float(value)))
        except ValueError:
            raise CommandError(f"Invalid value {value.strip()!r} for {key.strip()}: expected a "
                               "number") from None
    return pairs


def _alter(client: AdminClient, args: argparse.Namespace) -> str:
    entities = _entities(args)
    if not entities or any(name is _UNNAMED for _, name in entities):
        raise CommandError("--alter needs --entity-type with --entity-name or "
                           "--entity-default")
    if args.add_config is None and args.delete_config is None:
        raise CommandError("give --add-config and/or --delete-config")
    ops = [pb.QuotaOp(key=key, value=value) for key, value in _parse_values(
        args.add_config or "")]
    ops += [pb.QuotaOp(key=key.strip(), remove=True)
            for key in (args.delete_config or "").split(",") if key.strip()]
    entry = pb.QuotaAlteration(entity=[pb.QuotaEntityPart(entity_type=kind, entity_name=name)
                                       for kind, name in entities], ops=ops)
    response = client.call("AlterClientQuotas", pb.AlterClientQuotasRequest(entries=[entry]))
    for result in response.results:
        if result.error_code:
            raise CommandError(failure_text(result.error_code, result.error_message))
    kind, name = args.entities[0]
    if args.json:
        return json.dumps({"entity": dict(entities), "error": None})
    if name is None:
        return f"Completed updating default config for {kind} in the cluster."
    return f"Completed updating config for {kind[:-1]} {name}."


def _describe(client: AdminClient, args: argparse.Namespace) -> str:
    entities = _entities(args)
    components = []
    for kind, name in entities:
        if name is _UNNAMED:
            components.append(pb.QuotaFilterComponent(entity_type=kind,
                                                       match_type=MatchType.SPECIFIED))
        elif name is None:
            components.append(pb.QuotaFilterComponent(entity_type=kind,
                                                      match_type=MatchType.DEFAULT))
        else:
            components.append(pb.QuotaFilterComponent(entity_type=kind, match=name,
                                                      match_type=MatchType.EXACT))
    response = client.call("DescribeClientQuotas", pb.DescribeClientQuotasRequest(
        components=components, strict=bool(components)))
    shown = [({p.entity_type: p.entity_name if p.HasField("entity_name") else None
               for p in e.entity}, {v.key: v.value for v in e.values})
             for e in response.entries]
    if args.json:
        return json.dumps([{"entity": entity, "quotas": values} for entity, values in shown])
    return "\n".join(
        f"Quota configs for {entity_text(entity)} are "
        + ", ".join(f"{key}={java_double(value)}" for key, value in values.items())
        for entity, values in shown)
