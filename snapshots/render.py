"""How image parts print: one JSON-able dict per leaf (camelCase, as Kafka's tools print),
and the one-line text `cat` and `tree` show, after kafka-metadata-shell."""

from __future__ import annotations

import datetime
from typing import Any

from metadata.image import (
    BrokerRegistration,
    ConfigResource,
    MetadataProvenance,
    PartitionRegistration,
)
from metadata.records import ConfigResourceType, LeaderRecoveryState


def provenance_json(p: MetadataProvenance) -> dict[str, Any]:
    return {"offset": p.offset, "epoch": p.epoch, "timestampMs": p.timestamp_ms}


def provenance_text(p: MetadataProvenance) -> str:
    if p.timestamp_ms < 0:
        when = "none"
    else:
        when = datetime.datetime.fromtimestamp(p.timestamp_ms / 1000, datetime.UTC).isoformat(
            timespec="milliseconds").replace("+00:00", "Z")
    return f"offset {p.offset}, epoch {p.epoch}, time {when}"


def broker_json(b: BrokerRegistration) -> dict[str, Any]:
    return {
        "id": b.id,
        "epoch": b.epoch,
        "incarnationId": b.incarnation_id,
        "listeners": [{"name": e.name, "host": e.host, "port": e.port} for e in b.endpoints],
        "rack": b.rack,
        "fenced": b.fenced,
        "inControlledShutdown": b.in_controlled_shutdown,
        "registrationOffset": b.registration_offset,
    }


def broker_text(b: BrokerRegistration) -> str:
    listeners = ", ".join(f"Endpoint(listenerName='{e.name}', host='{e.host}', port={e.port})"
                          for e in b.endpoints)
    rack = "Optional.empty" if b.rack is None else f"Optional[{b.rack}]"
    return (f"BrokerRegistration(id={b.id}, epoch={b.epoch}, incarnationId={b.incarnation_id}, "
            f"listeners=[{listeners}], rack={rack}, fenced={_bool(b.fenced)}, "
            f"inControlledShutdown={_bool(b.in_controlled_shutdown)}, "
            f"registrationOffset={b.registration_offset})")


def partition_json(p: PartitionRegistration) -> dict[str, Any]:
    return {
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "removingReplicas": list(p.removing_replicas),
        "addingReplicas": list(p.adding_replicas),
        "leader": p.leader,
        "leaderRecoveryState": LeaderRecoveryState(p.leader_recovery_state).name,
        "leaderEpoch": p.leader_epoch,
        "partitionEpoch": p.partition_epoch,
    }


def partition_text(p: PartitionRegistration) -> str:
    fields = partition_json(p)
    return "PartitionRegistration(" + ", ".join(
        f"{k}={_list(v) if isinstance(v, list) else v}" for k, v in fields.items()) + ")"


def config_resource_name(resource: ConfigResource) -> str:
    """Kafka's shell name: `TOPIC:foo`, `BROKER:1`, and `BROKER` for the cluster default."""
    kind = ConfigResourceType(resource.type).name
    return f"{kind}:{resource.name}" if resource.name else kind


def _bool(value: bool) -> str:
    return "true" if value else "false"


def _list(values: list[int]) -> str:
    return "[" + ", ".join(map(str, values)) + "]"
