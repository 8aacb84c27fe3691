"""Topic ids between the metadata image (Kafka's 22-character url-safe base64 strings) and
the wire (16 bytes, a UUID in kio)."""

from __future__ import annotations

import base64
import binascii
import uuid

ZERO_UUID = uuid.UUID(int=0)


def to_wire(topic_id: str) -> uuid.UUID:
    """The wire form of an image id (the zero UUID for one that is not base64 of 16 bytes)."""
    try:
        raw = base64.urlsafe_b64decode(topic_id + "==")
    except (binascii.Error, ValueError):
        return ZERO_UUID
    return uuid.UUID(bytes=raw) if len(raw) == 16 else ZERO_UUID


def from_wire(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode("ascii")
