"""What changed between two images: brokers, features, topics, partitions (leader, ISR,
replicas, epochs), configs, ACLs, SCRAM credentials (iterations only) and client quotas.
Also `as_loaded`, the image a snapshot of an image loads as."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any

from metadata.authorizer.model import AclBinding
from metadata.image import ClusterImage, MetadataImage, TopicImage
from snapshots import render, security_view
from snapshots.acls import binding_json
from snapshots.tree import sorted_names


@dataclass(frozen=True, slots=True)
class Change:
    path: str
    kind: str  # "added", "removed" or "changed"
    before: Any  # JSON-able; None when added
    after: Any  # JSON-able; None when removed
    fields: tuple[str, ...] = ()  # for "changed" objects: the keys that differ

    def to_json(self) -> dict[str, Any]:
        result: dict[str, Any] = {"path": self.path, "change": self.kind}
        if self.before is not None:
            result["before"] = self.before
        if self.after is not None:
            result["after"] = self.after
        if self.fields:
            result["fields"] = list(self.fields)
        return result

    def text(self) -> str:
        if self.kind == "added":
            return f"+ {self.path} {_short(self.after)}"
        if self.kind == "removed":
            return f"- {self.path} {_short(self.before)}"
        if self.fields:
            parts = [f"{f} {_short(self.before[f])} -> {_short(self.after[f])}"
                     for f in self.fields]
            return f"~ {self.path} " + ", ".join(parts)
        return f"~ {self.path} {_short(self.before)} -> {_short(self.after)}"


def _short(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ",".join(map(str, value)) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={_short(v)}" for k, v in value.items()) + "}"
    return str(value)


def _diff_maps(
    path: str, before: Mapping[Any, Any], after: Mapping[Any, Any],
    to_json: Callable[[Any], Any], out: list[Change], name: Callable[[Any], str] = str,
) -> None:
    keys = {name(k): k for k in before} | {name(k): k for k in after}
    for label in sorted_names(keys):
        key = keys[label]
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        child = f"{path}/{label}"
        if old is None:
            out.append(Change(child, "added", None, to_json(new)))
        elif new is None:
            out.append(Change(child, "removed", to_json(old), None))
        else:
            a, b = to_json(old), to_json(new)
            fields = tuple(k for k in a if a[k] != b[k]) if isinstance(a, dict) else ()
            out.append(Change(child, "changed", a, b, fields))


def _topic_summary(topic: TopicImage) -> dict[str, Any]:
    return {"id": topic.topic_id, "partitions": len(topic.partitions)}


def diff_images(before: MetadataImage, after: MetadataImage) -> list[Change]:
    """Every difference, in tree order; the provenance is not a difference."""
    out: list[Change] = []
    _diff_maps("/features", before.features, after.features, lambda v: v, out)
    _diff_maps("/cluster/brokers", before.cluster.brokers, after.cluster.brokers,
               render.broker_json, out)
    old_topics, new_topics = before.topics.by_name, after.topics.by_name
    for name in sorted_names(set(old_topics) | set(new_topics)):
        old, new = old_topics.get(name), new_topics.get(name)
        if old is new:
            continue
        path = f"/topics/{name}"
        if old is not None and (new is None or new.topic_id != old.topic_id):
            out.append(Change(path, "removed", _topic_summary(old), None))
            old = None
        if new is None:
            continue
        if old is None:
            out.append(Change(path, "added", None, _topic_summary(new)))
        elif old.partitions != new.partitions:
            _diff_maps(path, old.partitions, new.partitions, render.partition_json, out)
    resources = {render.config_resource_name(r): r for r in (*before.configs, *after.configs)}
    for label in sorted(resources):
        resource = resources[label]
        _diff_maps(f"/configs/{label}", before.configs.get(resource, {}),
                   after.configs.get(resource, {}), lambda v: v, out)
    # An ACL id names one binding for good: a change is always a removal and an addition.
    _diff_maps("/acls", before.acls, after.acls, _acl_summary, out)
    # A new password with the same iterations shows as changed, with nothing secret in it.
    _diff_maps("/scram", security_view.scram_flat(before), security_view.scram_flat(after),
               security_view.credential_json, out)
    _diff_maps("/clientQuotas", security_view.quota_flat(before),
               security_view.quota_flat(after), lambda v: v, out)
    return out


def _acl_summary(binding: AclBinding) -> dict[str, Any]:
    return {k: v for k, v in binding_json("", binding).items() if k != "id"}


def as_loaded(image: MetadataImage, snapshot_end_offset: int) -> MetadataImage:
    """`image` as a snapshot ending at `snapshot_end_offset` and loaded again shows it: every
    record is replayed at the snapshot's last offset (Kafka's rule), so a broker's
    registration offset becomes at least that offset. Everything else is unchanged."""
    last = snapshot_end_offset - 1
    brokers = {
        broker_id: b if b.registration_offset >= last else replace(b, registration_offset=last)
        for broker_id, b in image.cluster.brokers.items()
    }
    return replace(image, cluster=ClusterImage(MappingProxyType(brokers)))
