"""The image as a file tree, like kafka-metadata-shell's:

    /provenance                      offset, epoch and time of the last record applied
    /features/<name>                 finalized level
    /cluster/brokers/<id>            broker registration
    /topics/<name>/id                topic id
    /topics/<name>/<partition>       partition registration
    /configs/<TYPE>[:<name>]/<key>   value (`BROKER` alone is the cluster-wide default)
    /acls/<id>                       ACL binding (kafka-metadata-shell's /image/acls/<id>)
    /scram/<mechanism>/<user>        SCRAM iterations, never salts or keys
    /clientQuotas/<entity>/<key>     client quota value (snapshots/security_view.py)

Directories list their children lazily, so `cat` of one partition of a million-partition image
does not build a million nodes.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from metadata.image import MetadataImage, TopicImage
from snapshots import acls, render, security_view


@dataclass(frozen=True, slots=True)
class Leaf:
    value: Any  # JSON-able
    text: str


@dataclass(frozen=True, slots=True)
class Directory:
    children: Callable[[], Mapping[str, Node]]


Node = Leaf | Directory


def _sort_key(name: str) -> tuple[int, int, str]:
    # Partitions and broker ids in numeric order, everything else by name.
    return (0, int(name), "") if name.isdigit() else (1, 0, name)


def sorted_names(names: Iterable[str]) -> list[str]:
    return sorted(names, key=_sort_key)


def image_tree(image: MetadataImage) -> Directory:
    return Directory(lambda: {
        "provenance": Leaf(render.provenance_json(image.provenance),
                           render.provenance_text(image.provenance)),
        "features": Directory(lambda: {
            name: Leaf(level, str(level)) for name, level in image.features.items()
        }),
        "cluster": Directory(lambda: {"brokers": Directory(lambda: {
            str(b.id): Leaf(render.broker_json(b), render.broker_text(b))
            for b in image.cluster.brokers.values()
        })}),
        "topics": Directory(lambda: {
            name: _topic_node(topic) for name, topic in image.topics.by_name.items()
        }),
        "configs": Directory(lambda: {
            render.config_resource_name(resource): _config_node(values)
            for resource, values in image.configs.items()
        }),
        "acls": Directory(lambda: {
            acl_id: Leaf(acls.binding_json(acl_id, b), acls.binding_text(b))
            for acl_id, b in image.acls.items()
        }),
        "scram": _two_levels(lambda: security_view.scram_leaves(image)),
        "clientQuotas": _two_levels(lambda: security_view.quota_leaves(image)),
    })


def _two_levels(leaves: Callable[[], security_view.Leaves]) -> Directory:
    def leaf_directory(inner: dict[str, tuple[Any, str]]) -> Directory:
        return Directory(lambda: {k: Leaf(*v) for k, v in inner.items()})

    return Directory(lambda: {name: leaf_directory(inner) for name, inner in leaves().items()})


def _config_node(values: Mapping[str, str]) -> Directory:
    return Directory(lambda: {k: Leaf(v, v) for k, v in values.items()})


def _topic_node(topic: TopicImage) -> Directory:
    def children() -> dict[str, Node]:
        nodes: dict[str, Node] = {"id": Leaf(topic.topic_id, topic.topic_id)}
        for partition_id, p in topic.partitions.items():
            nodes[str(partition_id)] = Leaf(render.partition_json(p), render.partition_text(p))
        return nodes

    return Directory(children)


class PathNotFound(Exception):
    pass


def normalize(path: str) -> list[str]:
    """Path components, with `.` and `..` resolved; relative paths start at the root."""
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if parts:
                parts.pop()
        else:
            parts.append(part)
    return parts


def join(parts: list[str]) -> str:
    return "/" + "/".join(parts)


def resolve(root: Directory, path: str) -> list[tuple[str, Node]]:
    """Every node matching `path`, whose components may be globs (`*`, `?`, `[...]`), in
    sorted order. PathNotFound when none does."""
    found: list[tuple[list[str], Node]] = [([], root)]
    for part in normalize(path):
        glob = any(c in part for c in "*?[")
        next_found: list[tuple[list[str], Node]] = []
        for parts, node in found:
            if not isinstance(node, Directory):
                continue
            children = node.children()
            if glob:
                for name in sorted_names(fnmatch.filter(children, part)):
                    next_found.append(([*parts, name], children[name]))
            elif part in children:
                next_found.append(([*parts, part], children[part]))
        found = next_found
    if not found:
        raise PathNotFound(path)
    return [(join(parts), node) for parts, node in found]


def walk(path: str, node: Node) -> Iterator[tuple[str, Node]]:
    """`node` and everything below it, depth first, children sorted."""
    yield path, node
    if isinstance(node, Directory):
        children = node.children()
        prefix = path.rstrip("/")
        for name in sorted_names(children):
            yield from walk(f"{prefix}/{name}", children[name])


def to_json(node: Node) -> Any:
    """A directory as a nested object, a leaf as its value."""
    if isinstance(node, Leaf):
        return node.value
    children = node.children()
    return {name: to_json(children[name]) for name in sorted_names(children)}


def print_tree(name: str, node: Node, out: Callable[[str], None], depth: int = 0) -> None:
    """kafka-metadata-shell's layout: `name:` for a directory, `name: text` for a leaf, two
    spaces per level."""
    indent = "  " * depth
    if isinstance(node, Leaf):
        out(f"{indent}{name}: {node.text}")
        return
    out(f"{indent}{name}:")
    children = node.children()
    for child in sorted_names(children):
        print_tree(child, children[child], out, depth + 1)
