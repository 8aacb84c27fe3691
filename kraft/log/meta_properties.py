"""`meta.properties`: the file `kraft-storage format` leaves in every log directory.

Kafka's v1 (KRaft) layout: `version=1`, `cluster.id`, `node.id` and `directory.id`, written
the way `Properties.store` writes it (a `#` line and a date line first). The file is replaced
atomically: written to `meta.properties.tmp`, fsynced, renamed, and the directory fsynced.

A node refuses to start on an unformatted directory instead of formatting it itself: if a
majority of controllers could start empty, they could elect a leader that lacks committed data.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import os
import re
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from kraft.properties import PropertiesError, format_properties, load_properties

META_PROPERTIES_FILE = "meta.properties"
META_PROPERTIES_VERSION = 1
STORAGE_COMMAND = "kraft-storage"
_ZERO_UUID = bytes(16)
_ONE_UUID = bytes(15) + b"\x01"  # Kafka's METADATA_TOPIC_ID; reserved like ZERO
_UUID_TEXT = re.compile(r"[A-Za-z0-9_-]{22}")
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class StorageError(Exception):
    """A log directory cannot be used (or formatted). str() is one line naming the directory
    or file and what to do."""

    def __init__(self, message: str) -> None:
        super().__init__(message.replace("\r", " ").replace("\n", " "))


# -- Kafka Uuids -----------------------------------------------------------------------------


def _encode_uuid(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def _decode_uuid(text: str) -> bytes | None:
    if not _UUID_TEXT.fullmatch(text):
        return None
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == 16 else None


def random_uuid() -> str:
    """A Kafka-style Uuid: 16 random bytes as 22 characters of unpadded URL-safe base64.
    Like Kafka's `Uuid.randomUuid`, never the reserved ZERO/ONE ids and never one starting
    with '-' (it would read as an option on a command line)."""
    while True:
        raw = uuid.uuid4().bytes
        text = _encode_uuid(raw)
        if raw not in (_ZERO_UUID, _ONE_UUID) and not text.startswith("-"):
            return text


def is_valid_uuid(text: str) -> bool:
    """True for 22 characters of URL-safe base64 that decode to 16 bytes."""
    return _decode_uuid(text) is not None


def validate_cluster_id(cluster_id: str) -> str:
    """The cluster id unchanged, or StorageError saying how to get a valid one."""
    if not is_valid_uuid(cluster_id):
        raise StorageError(
            f'The cluster id "{cluster_id}" is not valid: it must be 22 characters of URL-safe '
            f'base64 encoding 16 bytes; generate one with "{STORAGE_COMMAND} random-uuid".'
        )
    return cluster_id


# -- the file --------------------------------------------------------------------------------


@dataclass(frozen=True)
class MetaProperties:
    """The contents of one directory's meta.properties (v1)."""

    cluster_id: str
    node_id: int
    directory_id: str | None = None
    version: int = META_PROPERTIES_VERSION

    def to_properties(self) -> dict[str, str]:
        """The file's keys, sorted as `kafka-storage info` prints them."""
        props = {
            "cluster.id": self.cluster_id,
            "directory.id": self.directory_id,
            "node.id": str(self.node_id),
            "version": str(self.version),
        }
        return {key: value for key, value in props.items() if value is not None}

    def __str__(self) -> str:
        items = ", ".join(f"{key}={value}" for key, value in self.to_properties().items())
        return "{" + items + "}"

    @classmethod
    def from_properties(cls, props: Mapping[str, str], path: str) -> MetaProperties:
        """Validate a parsed file; `path` names it in errors."""
        version_text = props.get("version", "0").strip()
        if version_text == "0":
            raise StorageError(
                f"{path} is formatted for a legacy ZooKeeper-mode cluster (version 0); this "
                "implementation runs only in KRaft mode: use a new, empty log directory."
            )
        if version_text != str(META_PROPERTIES_VERSION):
            raise StorageError(
                f"{path} has unsupported version {version_text!r}; only version "
                f"{META_PROPERTIES_VERSION} is supported."
            )
        cluster_id = props.get("cluster.id", "").strip()
        if not cluster_id:
            raise StorageError(f"Invalid {path}: cluster.id was not found.")
        node_text = props.get("node.id")
        if node_text is None:
            raise StorageError(f"Invalid {path}: node.id was not found.")
        node_text = node_text.strip()
        if not node_text.isascii() or not node_text.isdigit():
            raise StorageError(f"Invalid {path}: node.id {node_text!r} is not an integer >= 0.")
        directory_id = props.get("directory.id")
        if directory_id is not None:
            directory_id = directory_id.strip()
            raw = _decode_uuid(directory_id)
            if raw is None or raw in (_ZERO_UUID, _ONE_UUID):
                raise StorageError(
                    f"Invalid {path}: directory.id {directory_id!r} is not a valid Uuid; remove "
                    "the line and a new one is generated at the next start."
                )
        return cls(cluster_id, int(node_text), directory_id)


def meta_properties_path(directory: str) -> str:
    return os.path.join(directory, META_PROPERTIES_FILE)


def read_meta_properties(directory: str) -> MetaProperties | None:
    """The directory's meta.properties, or None when the file (or directory) does not exist.
    A leftover `meta.properties.tmp` (a crash mid-write) is ignored: the rename never ran."""
    path = meta_properties_path(directory)
    try:
        props = load_properties(path)
    except FileNotFoundError:
        return None
    except PropertiesError as err:
        raise StorageError(f"Cannot parse {path}: line {err.line}: {err.reason}.") from None
    except OSError as err:
        raise StorageError(f"Cannot read {path}: {err.strerror}.") from None
    return MetaProperties.from_properties(props, path)


def _java_date(now: float) -> str:
    """`java.util.Date.toString()` in UTC, the second header line `Properties.store` writes."""
    t = time.gmtime(now)
    return (
        f"{_DAYS[t.tm_wday]} {_MONTHS[t.tm_mon - 1]} {t.tm_mday:02d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d} UTC {t.tm_year}"
    )


def write_meta_properties(
    directory: str, meta: MetaProperties, *, now: float | None = None
) -> None:
    """Durably replace the directory's meta.properties (the directory must exist)."""
    date = _java_date(time.time() if now is None else now)
    text = format_properties(meta.to_properties(), comments=("", date))
    _write_atomically(meta_properties_path(directory), text.encode("ascii"))


def _write_atomically(path: str, data: bytes) -> None:
    """tmp + fsync + rename + directory fsync: a crash leaves the old file or the new one."""
    tmp_path = path + ".tmp"
    fd = os.open(tmp_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        with open(fd, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
    except BaseException:
        _remove_quietly(tmp_path)
        raise
    os.replace(tmp_path, path)
    dir_fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def _remove_quietly(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
