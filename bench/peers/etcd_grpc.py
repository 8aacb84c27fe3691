"""etcd's own gRPC API from a grpc.aio client: `etcdserverpb.KV/Put`, the call etcdctl and
the Go client make (no JSON gateway in between).

The two messages are encoded by hand from etcd's api/etcdserverpb/rpc.proto (PutRequest:
`bytes key = 1; bytes value = 2;` — the other fields keep their defaults; PutResponse:
`ResponseHeader header = 1;`), which spares a generated module for two fields. A reply
counts as a committed put when it carries its header (etcd answers a put only after its
Raft entry committed and applied, with the WAL fsynced)."""

from __future__ import annotations

from typing import Any

import grpc

from bench._cluster import CLIENT_OPTIONS, _reraise_cancellation
from bench.peers.etcd import EtcdCluster
from bench.peers.load import Target, Write

PUT = "/etcdserverpb.KV/Put"


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def put_request(key: bytes, value: bytes) -> bytes:
    """A serialized PutRequest{key, value}."""
    return (b"\x0a" + _varint(len(key)) + key) + (b"\x12" + _varint(len(value)) + value)


def is_put_response(reply: bytes) -> bool:
    """A PutResponse whose first field is its header (field 1, length-delimited)."""
    return reply[:1] == b"\x0a"


def _identity(data: bytes) -> bytes:
    return data


def grpc_target(etcd: EtcdCluster, leader: str, name: str = "etcd put (gRPC)") -> Target:
    """Writers on etcd's leader, each on its own grpc.aio channel (as this project's)."""
    endpoint = f"127.0.0.1:{etcd.client_port[leader]}"
    channels: dict[int, list[Any]] = {}

    def writer(channel: grpc.aio.Channel, index: int) -> Write:
        call = channel.unary_unary(PUT, request_serializer=_identity,
                                   response_deserializer=_identity)
        request = put_request(f"bench/g{index}".encode(), etcd.value)

        async def write() -> bool:
            try:
                reply = await call(request, timeout=5)
            except grpc.aio.AioRpcError:
                _reraise_cancellation()
                return False
            return is_put_response(reply)
        return write

    async def make(count: int) -> list[Write]:
        opened = [grpc.aio.insecure_channel(endpoint, options=CLIENT_OPTIONS)
                  for _ in range(count)]
        channels[count] = opened
        return [writer(c, i) for i, c in enumerate(opened)]

    async def close(writers: list[Write]) -> None:
        for channel in channels.pop(len(writers)):
            await channel.close()

    return Target(name, make, close, etcd.cpu_seconds)
