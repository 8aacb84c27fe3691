"""Why Fetch is a stream: the round trip of a unary grpc.aio call against one message on an
open bidirectional stream, Python to Python on loopback.

    python -m bench.grpc_rtt_bench [--calls 3000] [--bytes 200] [--json PATH]

The server runs in a child process (its own interpreter and GIL, like a real peer); each
mode is warmed up with 200 calls, then timed call by call.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import time
from collections.abc import AsyncIterator

import grpc
from grpc import aio

SERVICE = "bench.Echo"


def _same(data: bytes) -> bytes:
    return data


def _handlers() -> grpc.GenericRpcHandler:
    async def unary(request: bytes, context: aio.ServicerContext) -> bytes:
        return request

    async def stream(
        requests: AsyncIterator[bytes], context: aio.ServicerContext
    ) -> AsyncIterator[bytes]:
        async for request in requests:
            yield request

    return grpc.method_handlers_generic_handler(SERVICE, {
        "Unary": grpc.unary_unary_rpc_method_handler(unary, _same, _same),
        "Stream": grpc.stream_stream_rpc_method_handler(stream, _same, _same),
    })


def _serve(ports: multiprocessing.Queue) -> None:
    async def main() -> None:
        server = aio.server()
        server.add_generic_rpc_handlers((_handlers(),))
        ports.put(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        await server.wait_for_termination()

    asyncio.run(main())


def _percentiles(samples: list[float]) -> dict[str, float]:
    samples.sort()
    return {"p50_ms": samples[len(samples) // 2] * 1e3,
            "p99_ms": samples[int(len(samples) * 0.99)] * 1e3}


async def _measure(port: int, calls: int, size: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    payload = b"x" * size
    async with aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        unary = channel.unary_unary(f"/{SERVICE}/Unary", _same, _same)
        samples = []
        for i in range(200 + calls):
            started = time.perf_counter()
            await unary(payload, timeout=5)
            if i >= 200:
                samples.append(time.perf_counter() - started)
        results["unary_call"] = _percentiles(samples)
        call = channel.stream_stream(f"/{SERVICE}/Stream", _same, _same)()
        samples = []
        for i in range(200 + calls):
            started = time.perf_counter()
            await call.write(payload)
            await call.read()
            if i >= 200:
                samples.append(time.perf_counter() - started)
        await call.done_writing()
        results["stream_message"] = _percentiles(samples)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--bytes", type=int, default=200)
    parser.add_argument("--json", help="write the numbers here too")
    args = parser.parse_args(argv)
    if args.calls < 1 or args.bytes < 0:
        parser.error("--calls must be >= 1 and --bytes >= 0")
    ports: multiprocessing.Queue = multiprocessing.Queue()
    server = multiprocessing.Process(target=_serve, args=(ports,), daemon=True)
    server.start()
    try:
        results = asyncio.run(_measure(ports.get(timeout=30), args.calls, args.bytes))
    finally:
        server.kill()
        server.join()
    for name, numbers in results.items():
        print(f"{name:15} p50 {numbers['p50_ms']:.3f} ms, p99 {numbers['p99_ms']:.3f} ms")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump({"calls": args.calls, "bytes": args.bytes, **results}, out, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
