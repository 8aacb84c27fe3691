"""The sockets of `kraft-server --dev`, in modules light enough to load before the node's:
the Kafka ports bound first thing, and the probe that asks a broker whether it serves.

The probe is one Kafka Metadata request (v1, no topics) on a plain socket, as any client would
send it: the broker ids it answers with are the unfenced brokers it knows of. It is
hand-encoded because the supervisor must not start the event loop or threads a Kafka client
would (it forks).
"""

from __future__ import annotations

import errno
import socket
import struct


class DevError(Exception):
    """A one-line reason `kraft-server --dev` cannot start."""


def bind_kafka_ports(ports: list[int], host: str = "127.0.0.1") -> list[socket.socket]:
    """Listening sockets for the brokers' Kafka listeners, bound now; DevError (one line) for
    a port that is taken."""
    bound: list[socket.socket] = []
    try:
        for port in ports:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host, port))
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise DevError(
                        f"cannot listen on {host}:{port}: the port is in use (another Kafka "
                        "or kraft-server --dev?); pick another with --port, or --port 0 for "
                        "free ports") from None
                raise DevError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
            sock.listen(128)
    except DevError:
        for sock in bound:
            sock.close()
        raise
    return bound


METADATA = 3
VERSION = 1
CLIENT_ID = b"kraft-dev-probe"


def metadata_request(correlation_id: int) -> bytes:
    header = struct.pack(">hhih", METADATA, VERSION, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    body = struct.pack(">i", 0)  # no topics (v1: an empty array, not null)
    message = header + body
    return struct.pack(">i", len(message)) + message


def parse_broker_ids(response: bytes, correlation_id: int) -> set[int]:
    """The broker ids of a Metadata v1 response (without its length prefix)."""
    got, count = struct.unpack_from(">ii", response, 0)
    if got != correlation_id:
        raise ValueError(f"correlation id {got}, expected {correlation_id}")
    offset = 8
    ids = set()
    for _ in range(count):
        (node_id, host_length) = struct.unpack_from(">ih", response, offset)
        offset += 6 + host_length + 4  # node id, host, port
        (rack_length,) = struct.unpack_from(">h", response, offset)
        offset += 2 + max(rack_length, 0)
        ids.add(node_id)
    return ids


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return data


def listed_brokers(host: str, port: int, timeout_s: float) -> set[int] | None:
    """The brokers host:port lists, or None if it does not answer within `timeout_s` (a
    broker still starting keeps the connection in its backlog)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(metadata_request(1))
            (size,) = struct.unpack(">i", _read_exactly(sock, 4))
            return parse_broker_ids(_read_exactly(sock, size), 1)
    except (OSError, ValueError, struct.error):
        return None
