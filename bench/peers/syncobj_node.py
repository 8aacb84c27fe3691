"""One PySyncObj node for the peer benchmark: `python -m bench.peers.syncobj_node TICK_S SELF_PORT
HTTP_PORT JOURNAL PARTNER_PORT...`; TICK_S 0 keeps PySyncObj's defaults, otherwise it sets
both autoTickPeriod and appendEntriesPeriod.

A replicated dict (one `set(key, value)` per write) with a journal file, plus a tiny asyncio
HTTP front-end so the benchmark's one load generator can drive it like etcd:
`POST /put {"key", "value"}` answers 200 once the write is applied on this node (committed),
`POST /status {}` returns the node's view, `POST /transfer {}` asks a leader to hand over
(PySyncObj's `transferLeadership`, Raft's TimeoutNow)."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated

WRITE_TIMEOUT_S = 10.0


class Store(SyncObj):
    def __init__(self, self_addr: str, partners: list[str], conf: SyncObjConf) -> None:
        super().__init__(self_addr, partners, conf)
        self.data: dict[str, str] = {}

    @replicated
    def set(self, key: str, value: str) -> None:
        self.data[key] = value


class Front:
    def __init__(self, store: Store) -> None:
        self.store = store

    async def call(self, method: Any, *args: Any) -> Any:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future = loop.create_future()

        def done(result: Any, error: Any) -> None:
            loop.call_soon_threadsafe(lambda: fut.done() or fut.set_result(error))

        method(*args, callback=done)
        try:
            return await asyncio.wait_for(fut, WRITE_TIMEOUT_S)
        except TimeoutError:
            return None

    async def handle(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/put":
            error = await self.call(self.store.set, body["key"], body["value"])
            return (200, {"ok": True}) if error == FAIL_REASON.SUCCESS else \
                (503, {"error": str(error)})
        if path == "/status":
            status = self.store.getStatus()
            return 200, {"self": str(status["self"]), "state": int(status["state"]),
                         "leader": str(status["leader"]) if status["leader"] else None,
                         "term": int(status["raft_term"]),
                         "commit_idx": int(status["commit_idx"])}
        if path == "/transfer":
            error = await self.call(self.store.transferLeadership)
            return (200, {"ok": True}) if error == FAIL_REASON.SUCCESS else \
                (503, {"error": str(error)})
        return 404, {"error": path}

    async def connection(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await reader.readline()
                if not request:
                    break
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b"\n", b""):
                    name, _, value = line.decode("latin-1").partition(":")
                    if name.strip().lower() == "content-length":
                        length = int(value)
                body = json.loads(await reader.readexactly(length) or b"{}")
                code, reply = await self.handle(request.split()[1].decode(), body)
                data = json.dumps(reply).encode()
                writer.write(f"HTTP/1.1 {code} X\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(data)}\r\n\r\n".encode() + data)
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()


async def serve(http_port: int, store: Store) -> None:
    server = await asyncio.start_server(Front(store).connection, "127.0.0.1", http_port)
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    tick, self_port, http_port, journal, *partners = argv
    if float(tick) > 0:  # tuned: tick and append-entries period both TICK_S
        conf = SyncObjConf(journalFile=journal, autoTickPeriod=float(tick),
                           appendEntriesPeriod=float(tick))
    else:  # PySyncObj's defaults (tick 0.05 s, append-entries period 0.1 s)
        conf = SyncObjConf(journalFile=journal)
    store = Store(f"127.0.0.1:{self_port}", [f"127.0.0.1:{p}" for p in partners], conf)
    asyncio.run(serve(int(http_port), store))


if __name__ == "__main__":
    main(sys.argv[1:])
