"""What a client may hold on the Kafka listener (broker/kafka/connection_limits.py and the
server's per-connection deadlines): max.connections (the acceptor waits; the inter-broker
listener is exempt), max.connections.per.ip (+ overrides), queued.max.request.bytes, the body
deadline that reaps half-sent requests, and log lines for bad input limited per interval."""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from broker.kafka.connection_limits import (
    ConnectionQuotas,
    RateLimitedLog,
    RequestMemoryPool,
    TooManyConnections,
    ip_key,
    resolve_overrides,
)
from broker.kafka.server import KafkaServer, _CloseConnection, _read_in_chunks
from tests.unit.test_kafka_server import ScriptedHandler, api_versions_frame, read_answers

# ---- ConnectionQuotas ----


def test_per_ip_limit_and_overrides() -> None:
    quotas = ConnectionQuotas(max_per_ip=2, per_ip_overrides={"10.0.0.5": 0, "::1": 3})
    quotas.register("127.0.0.1")
    quotas.register("::ffff:127.0.0.1")  # the same address, IPv4-mapped
    with pytest.raises(TooManyConnections, match=r"127.0.0.1 already has 2 connection\(s\) "
                       r"\(max.connections.per.ip 2\)"):
        quotas.register("127.0.0.1")
    with pytest.raises(TooManyConnections, match="overrides 0"):
        quotas.register("10.0.0.5")
    for _ in range(3):
        quotas.register("0:0:0:0:0:0:0:1")
    assert quotas.count("::1") == 3 and quotas.total == 5
    quotas.release("127.0.0.1")
    quotas.register("127.0.0.1")  # room again
    assert quotas.count("127.0.0.1") == 2


def test_ip_keys() -> None:
    assert ip_key("::ffff:10.1.2.3") == "10.1.2.3"
    assert ip_key("0:0:0:0:0:0:0:1") == "::1"
    assert ip_key("fe80::1%eth0") == "fe80::1%eth0"


def test_override_hosts_resolve_once() -> None:
    assert dict(resolve_overrides({"127.0.0.1": 5, "localhost": 7}))["127.0.0.1"] == 7
    with pytest.raises(ValueError, match=r"no-such-host\.invalid, which does not resolve"):
        resolve_overrides({"no-such-host.invalid": 1})


def test_the_acceptor_waits_at_max_connections_but_not_for_the_protected_listener() -> None:
    async def main() -> None:
        quotas = ConnectionQuotas(max_connections=1, protected_listeners=("REPLICATION",))
        await quotas.wait_for_slot("CLIENT")
        quotas.register("1.1.1.1")
        waiting = asyncio.ensure_future(quotas.wait_for_slot("CLIENT"))
        await quotas.wait_for_slot("REPLICATION")  # exempt: returns at once
        await asyncio.sleep(0)
        assert not waiting.done()
        quotas.release("1.1.1.1")
        await asyncio.wait_for(waiting, 1)

    asyncio.run(main())


# ---- RequestMemoryPool ----


def test_memory_pool_is_non_strict_first_come_first_served_and_unlimited_at_zero() -> None:
    async def main() -> None:
        pool = RequestMemoryPool(100)
        await pool.allocate(150)  # bigger than the budget, admitted while any is left
        assert pool.available == -50
        first = asyncio.ensure_future(pool.allocate(10))
        second = asyncio.ensure_future(pool.allocate(10))
        gone = asyncio.ensure_future(pool.allocate(10))
        await asyncio.sleep(0)
        assert pool.waiting == 3
        gone.cancel()
        pool.release(60)  # 10 left: the first waiter only
        await asyncio.sleep(0)
        assert first.done() and not second.done()
        pool.release(100)
        await asyncio.wait_for(second, 1)
        assert pool.available == 100 - 10 - 10 - 150 + 160 and pool.waiting == 0
        unlimited = RequestMemoryPool(0)
        await unlimited.allocate(10**12)
        assert unlimited.unlimited

    asyncio.run(main())


# ---- RateLimitedLog ----


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_flood_is_one_line_with_a_count_per_interval(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    limited = RateLimitedLog(logging.getLogger("t"), logging.WARNING, "closed", 10, clock)
    with caplog.at_level(logging.WARNING, logger="t"):
        for i in range(300):
            clock.now = i * 0.01
            limited.log(f"peer-{i}", "bad frame")
        limited.flush()  # the interval's end
        for i in range(300):
            clock.now = 5 + i * 0.01  # the next interval: counted from the first event
            limited.log(f"peer-{i}", "bad frame")
        limited.flush()
        clock.now = 100
        limited.log("late", "bad frame")  # after a quiet interval: logged at once
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "closed: peer-0: bad frame",
        "closed: 299 more in the last 10 s (the last: peer-299: bad frame)",
        "closed: 300 more in the last 10 s (the last: peer-299: bad frame)",
        "closed: late: bad frame",
    ]
    assert limited.events == 601


# ---- over sockets ----

Scenario = Callable[[KafkaServer, int], Awaitable[None]]


def run(scenario: Scenario, **options: Any) -> None:
    async def main() -> None:
        server = KafkaServer(ScriptedHandler(), "127.0.0.1", 0, **options)
        port = await server.start()
        try:
            await asyncio.wait_for(scenario(server, port), 20)
        finally:
            await server.close()

    asyncio.run(main())


async def connect(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", port)


async def ask(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cid: int) -> int:
    writer.write(api_versions_frame(cid, "x"))
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return int(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])


def test_max_connections_makes_the_acceptor_wait() -> None:
    async def scenario(server: KafkaServer, port: int) -> None:
        first = await connect(port)
        second = await connect(port)
        assert await ask(*first, 1) == 1 and await ask(*second, 2) == 2
        third = await connect(port)  # the kernel completes it; the broker does not accept
        third[1].write(api_versions_frame(3, "x"))
        answer = asyncio.ensure_future(third[0].readexactly(4))
        await asyncio.sleep(0.2)  # the subject: no answer while two connections are open
        assert not answer.done() and server.quotas.total == 2
        first[1].close()
        await asyncio.wait_for(answer, 5)
        assert server.quotas.total == 2
        for _, writer in (second, third):
            writer.close()

    run(scenario, quotas=ConnectionQuotas(max_connections=2))


def test_the_protected_listener_is_exempt_from_max_connections() -> None:
    async def scenario(server: KafkaServer, port: int) -> None:
        connections = [await connect(port) for _ in range(3)]
        for i, connection in enumerate(connections):
            assert await ask(*connection, i) == i
        for _, writer in connections:
            writer.close()

    run(scenario, listener="REPLICATION",
        quotas=ConnectionQuotas(max_connections=1, protected_listeners=("REPLICATION",)))


def test_over_max_connections_per_ip_is_closed_at_once(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(server: KafkaServer, port: int) -> None:
        kept = await connect(port)
        assert await ask(*kept, 1) == 1
        refused_reader, refused = await connect(port)
        refused.write(api_versions_frame(2, "x"))
        assert await read_answers(refused_reader) == []  # closed by the broker, unanswered
        assert await ask(*kept, 3) == 3
        kept[1].close()
        refused.close()

    with caplog.at_level(logging.WARNING, logger="broker.kafka"):
        run(scenario, quotas=ConnectionQuotas(max_per_ip=1))
    assert "refusing" in caplog.text and "max.connections.per.ip 1" in caplog.text


def test_a_half_sent_body_is_reaped_at_its_deadline(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(server: KafkaServer, port: int) -> None:
        reader, writer = await connect(port)
        writer.write(struct.pack(">i", 1000) + b"x" * 10)  # and then nothing
        started = asyncio.get_running_loop().time()
        assert await read_answers(reader) == []
        assert asyncio.get_running_loop().time() - started < 2
        writer.close()

    with caplog.at_level(logging.WARNING, logger="broker.kafka.server"):
        run(scenario, request_body_timeout_ms=300)
    assert "a 1000-byte request body did not arrive within 300 ms" in caplog.text


def test_queued_max_request_bytes_stops_reading_until_budget_returns() -> None:
    async def scenario(server: KafkaServer, port: int) -> None:
        hog_reader, hog = await connect(port)
        hog.write(struct.pack(">i", 5000) + b"x" * 100)  # admitted (non-strict), never ends
        while server.memory.available > 0:
            await asyncio.sleep(0.01)  # until the server has read the hog's size
        reader, writer = await connect(port)
        writer.write(api_versions_frame(1, "x"))
        while not server.memory.waiting:
            await asyncio.sleep(0.01)  # the small request waits for budget, unread
        # The hog is reaped at its deadline; its bytes come back and the small one is served.
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        assert size > 0 and await read_answers(hog_reader) == []
        assert server.memory.available == 1000
        writer.close()
        hog.close()

    run(scenario, memory=RequestMemoryPool(1000), request_body_timeout_ms=500)


def test_300_bad_frames_make_two_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(server: KafkaServer, port: int) -> None:
        for _ in range(300):
            reader, writer = await connect(port)
            writer.write(struct.pack(">i", -1))
            await read_answers(reader)
            writer.close()
        while server.connections_closed_for_bad_input < 300:
            await asyncio.sleep(0.01)

    with caplog.at_level(logging.WARNING, logger="broker.kafka.server"):
        run(scenario)  # within one 10 s interval; close() logs the count
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2, lines
    assert "closed for bad input" in lines[0] and "request size -1" in lines[0]
    assert "299 more in the last 10 s" in lines[1]


def test_a_large_body_is_read_in_chunks_whole_or_not_at_all() -> None:
    async def main() -> None:
        body = bytes(range(256)) * (3 * 4096 + 7)  # > 3 MiB
        reader = asyncio.StreamReader(limit=2**16)
        for at in range(0, len(body), 70001):
            reader.feed_data(body[at:at + 70001])
        assert await _read_in_chunks(reader, len(body)) == body
        short = asyncio.StreamReader()
        short.feed_data(b"x" * 1000)
        short.feed_eof()
        with pytest.raises(_CloseConnection, match="truncated frame: 1000 of 2000000 bytes"):
            await _read_in_chunks(short, 2_000_000)

    asyncio.run(main())


def test_at_most_16_connections_are_being_established_at_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A SASL listener accepts 16 connections that have not logged in, then waits: for a
    login to finish, or ESTABLISH_SLOT_S to pass (a silent client cannot hold its slot for
    good). A listener without SASL gives the slot back as soon as the connection is
    accepted."""
    from broker.kafka import connection_limits
    from broker.kafka.connection_limits import ESTABLISHING
    from broker.kafka.sasl.settings import SaslSettings
    from tests.unit.test_sasl_authenticator import authenticate, handshake

    async def accepted(server: KafkaServer, count: int) -> None:
        while server.quotas.total < count:
            await asyncio.sleep(0.01)

    async def login_frees_a_slot(server: KafkaServer, port: int) -> None:
        first = await connect(port)
        others = [await connect(port) for _ in range(ESTABLISHING)]
        await accepted(server, ESTABLISHING)
        await asyncio.sleep(0.3)  # the subject: the 17th waits while 16 are logging in
        assert server.quotas.total == ESTABLISHING
        reader, writer = first
        for frame in (handshake("PLAIN"), authenticate(b"\0u\0p")):
            writer.write(struct.pack(">i", len(frame)) + frame)
            await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
        await accepted(server, ESTABLISHING + 1)  # the login gave its slot back
        for _, other in [first, *others]:
            other.close()

    async def silence_times_out(server: KafkaServer, port: int) -> None:
        silent = [await connect(port) for _ in range(ESTABLISHING + 4)]
        await accepted(server, ESTABLISHING + 4)  # after the silent ones' slots expire
        for _, writer in silent:
            writer.close()

    async def without_sasl(server: KafkaServer, port: int) -> None:
        silent = [await connect(port) for _ in range(ESTABLISHING + 4)]
        await accepted(server, ESTABLISHING + 4)
        for _, writer in silent:
            writer.close()

    settings = SaslSettings(("PLAIN",), {"u": "p"})
    monkeypatch.setattr(connection_limits, "ESTABLISH_SLOT_S", 60)
    run(login_frees_a_slot, sasl=settings)
    run(without_sasl)
    monkeypatch.setattr(connection_limits, "ESTABLISH_SLOT_S", 0.2)
    run(silence_times_out, sasl=settings)


def test_failed_accepts_give_their_establishment_slot_back(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """EMFILE and the like: the acceptor waits and retries, and the slot it held is free
    again (with them kept, 16 failed accepts would stop the listener for good)."""
    import errno

    from broker.kafka import connection_limits

    monkeypatch.setattr(connection_limits, "_ACCEPT_RETRY_S", 0)
    failures = [OSError(errno.EMFILE, "Too many open files")] * 20

    async def scenario(server: KafkaServer, port: int) -> None:
        assert await ask(*(await connect(port)), 1) == 1

    async def main() -> None:
        loop = asyncio.get_running_loop()
        real = loop.sock_accept

        async def flaky(sock: Any) -> Any:
            if failures:
                raise failures.pop()
            return await real(sock)

        monkeypatch.setattr(loop, "sock_accept", flaky)
        server = KafkaServer(ScriptedHandler(), "127.0.0.1", 0)
        port = await server.start()
        try:
            await asyncio.wait_for(scenario(server, port), 10)
        finally:
            await server.close()

    asyncio.run(main())
    assert failures == []
