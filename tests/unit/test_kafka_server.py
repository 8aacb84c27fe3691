"""KafkaServer (broker/kafka/server.py): framing limits, pipelined requests answered in
order with handlers started in arrival order, the in-flight bound, and bad input or a
failing handler closing only its own connection."""

from __future__ import annotations

import asyncio
import logging
import socket
import struct
from collections.abc import Awaitable, Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.api import Request
from broker.kafka.api_versions_api import handle_api_versions
from broker.kafka.codec import DecodedRequest, encode_request
from broker.kafka.reply import Reply
from broker.kafka.server import KafkaServer
from tests.unit.test_kafka_codec import VALID


class ScriptedHandler:
    """Answers ApiVersions; the client id of each request says how to behave:
    'sleep:<s>' waits, 'fail' raises, 'silent' answers nothing, 'close' asks to close."""

    def __init__(self) -> None:
        self.started: list[int] = []
        self.running = 0
        self.most_running = 0

    async def handle(self, request: DecodedRequest, context: Request) -> Reply:
        self.started.append(request.correlation_id)
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            action = request.client_id or ""
            if action.startswith("sleep:"):
                await asyncio.sleep(float(action[6:]))
            if action == "fail":
                raise RuntimeError("handler bug")
            if action == "silent":
                return Reply(None)
            if action == "close":
                return Reply(None, close=True)
            return handle_api_versions(request.api_version, request.body)
        finally:
            self.running -= 1


def api_versions_frame(correlation_id: int, client_id: str) -> bytes:
    frame = VALID[0]  # ApiVersions v0, correlation id 9, client "fuzz"
    body = frame[8 + 2 + len("fuzz"):]
    raw = client_id.encode()
    inner = struct.pack(">hhih", 18, 0, correlation_id, len(raw)) + raw + body
    return struct.pack(">i", len(inner)) + inner


async def read_answers(reader: asyncio.StreamReader) -> list[int]:
    """Correlation ids of the answers until the server closes the connection."""
    ids = []
    while True:
        try:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            ids.append(struct.unpack(">i", (await reader.readexactly(size))[:4])[0])
        except (asyncio.IncompleteReadError, ConnectionError):
            return ids


Scenario = Callable[[KafkaServer, ScriptedHandler, int], Awaitable[None]]


def run(scenario: Scenario, max_request_bytes: int = 1 << 20, max_in_flight: int = 64,
        max_idle_ms: int = 600000) -> None:
    async def main() -> None:
        handler = ScriptedHandler()
        server = KafkaServer(handler, "127.0.0.1", 0, max_request_bytes=max_request_bytes,
                             max_in_flight=max_in_flight, connections_max_idle_ms=max_idle_ms)
        port = await server.start()
        try:
            await asyncio.wait_for(scenario(server, handler, port), 20)
        finally:
            await server.close()

    asyncio.run(main())


def test_pipelined_answers_go_back_in_request_order_and_handlers_start_in_order() -> None:
    async def scenario(_: KafkaServer, handler: ScriptedHandler, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        # The first request is the slowest: the later ones finish first but wait their turn.
        for i in range(10):
            writer.write(api_versions_frame(i, f"sleep:{(10 - i) / 50}"))
        writer.write_eof()
        assert await read_answers(reader) == list(range(10))
        assert handler.started == list(range(10))
        assert handler.most_running == 10  # handled concurrently
        writer.close()

    run(scenario)


def test_in_flight_requests_per_connection_are_bounded() -> None:
    async def scenario(_: KafkaServer, handler: ScriptedHandler, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i in range(12):
            writer.write(api_versions_frame(i, "sleep:0.05"))
        writer.write_eof()
        assert await read_answers(reader) == list(range(12))
        assert handler.most_running == 3
        writer.close()

    run(scenario, max_in_flight=3)


def test_a_request_without_response_is_skipped_in_the_order() -> None:
    async def scenario(_: KafkaServer, __: ScriptedHandler, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for i, client in enumerate(["x", "silent", "x"]):
            writer.write(api_versions_frame(i, client))
        writer.write_eof()
        assert await read_answers(reader) == [0, 2]
        writer.close()

    run(scenario)


@pytest.mark.parametrize("client", ["close", "fail"])
def test_a_close_reply_or_a_failing_handler_closes_only_that_connection(
    client: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(server: KafkaServer, _: ScriptedHandler, port: int) -> None:
        bystander_reader, bystander = await asyncio.open_connection("127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions_frame(1, "x") + api_versions_frame(2, client)
                     + api_versions_frame(3, "x"))
        assert await read_answers(reader) == [1]  # answered up to the failure, then closed
        bystander.write(api_versions_frame(7, "x"))
        bystander.write_eof()
        assert await read_answers(bystander_reader) == [7]
        writer.close()
        bystander.close()

    with caplog.at_level(logging.WARNING, logger="broker.kafka.server"):
        run(scenario)
    (line,) = caplog.records
    assert ("handler of correlation id 2 failed" if client == "fail" else "acks=0") \
        in line.getMessage()


def test_a_client_gone_before_its_answer_ends_the_connection_quietly() -> None:
    """The client half-closes after its request, then resets the connection before the
    answer: writing the answer fails, and that is the end of one connection, not an error
    that escapes the listener (seen in a chaos run as 'Unhandled exception in
    client_connected_cb')."""
    unhandled: list[dict[str, object]] = []

    async def scenario(server: KafkaServer, handler: ScriptedHandler, port: int) -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _, ctx: unhandled.append(ctx))
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions_frame(1, "sleep:0.2"))
        writer.write_eof()
        while not handler.started:
            await asyncio.sleep(0.01)
        sock = writer.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        writer.transport.abort()  # RST: the answer's write fails
        while server.open_connections:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0)  # the finished task's done callbacks

    run(scenario)
    assert unhandled == []


@pytest.mark.parametrize("payload, reason", [
    (struct.pack(">i", 1001), "outside 0..1000"),
    (struct.pack(">i", -1), "outside 0..1000"),
    (struct.pack(">i", 100) + b"short", "truncated frame: 5 of 100"),
    (b"\0\0", "truncated frame size"),
    (struct.pack(">i", 3) + b"abc", "shorter than a request header"),
    (struct.pack(">i", 10) + struct.pack(">hhih", 1, 3, 1, -1), "unsupported api key 1 version 3"),
    (struct.pack(">i", 10) + struct.pack(">hhih", 3, 1, 1, -1), "does not parse"),
])
def test_bad_frames_close_the_connection_with_one_log_line(
    payload: bytes, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def scenario(server: KafkaServer, _: ScriptedHandler, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(payload)
        writer.write_eof()
        assert await read_answers(reader) == []
        writer.close()
        for _attempt in range(100):
            if server.connections_closed_for_bad_input:
                break
            await asyncio.sleep(0.01)
        assert server.connections_closed_for_bad_input == 1

    with caplog.at_level(logging.WARNING, logger="broker.kafka.server"):
        run(scenario, max_request_bytes=1000)
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 1 and reason in lines[0], lines


def test_api_versions_with_an_unsupported_version_is_answered_not_closed() -> None:
    async def scenario(_: KafkaServer, __: ScriptedHandler, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        frame = struct.pack(">hhih", 18, 5, 77, -1)
        writer.write(struct.pack(">i", len(frame)) + frame + api_versions_frame(78, "x"))
        writer.write_eof()
        assert await read_answers(reader) == [77, 78]
        writer.close()

    run(scenario)


@settings(max_examples=60, deadline=None)
@given(frame=st.sampled_from(VALID), cut=st.integers(0, 200), junk=st.binary(max_size=40))
def test_fuzz_damaged_frames_never_stop_the_server(frame: bytes, cut: int, junk: bytes) -> None:
    async def scenario(_: KafkaServer, __: ScriptedHandler, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        damaged = frame[:cut] + junk
        writer.write(struct.pack(">i", len(damaged)) + damaged)
        writer.write_eof()
        await read_answers(reader)
        writer.close()
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions_frame(5, "x"))
        writer.write_eof()
        assert await read_answers(reader) == [5]
        writer.close()

    run(scenario)


def test_an_idle_connection_is_closed_but_not_one_waiting_for_an_answer() -> None:
    async def scenario(_: KafkaServer, __: ScriptedHandler, port: int) -> None:
        idle_reader, idle = await asyncio.open_connection("127.0.0.1", port)
        busy_reader, busy = await asyncio.open_connection("127.0.0.1", port)
        busy.write(api_versions_frame(1, "sleep:0.6"))  # longer than the idle limit
        loop = asyncio.get_running_loop()
        started = loop.time()
        assert await read_answers(idle_reader) == []  # closed by the server after ~0.2 s
        assert loop.time() - started < 0.5
        await asyncio.sleep(0.2)  # the subject: the busy connection outlives the idle limit
        busy.write(api_versions_frame(2, "x"))
        busy.write_eof()
        assert await read_answers(busy_reader) == [1, 2]
        idle.close()
        busy.close()

    run(scenario, max_idle_ms=200)


def test_close_ends_open_connections() -> None:
    async def scenario(server: KafkaServer, handler: ScriptedHandler, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(api_versions_frame(1, "sleep:30"))
        async with asyncio.timeout(5):  # until the request is being handled
            while not handler.started:
                await asyncio.sleep(0.001)
        await server.close()
        assert await read_answers(reader) == []
        writer.close()

    run(scenario)


def test_request_helper_frames_match_the_codec() -> None:
    # The hand-made frames above are what the codec itself would write.
    from broker.kafka.codec import build, request_module
    body = build(request_module(18, 0), "ApiVersionsRequest")
    assert api_versions_frame(4, "abc") == encode_request(4, "abc", body)


def test_a_listener_bound_but_not_accepting_holds_clients_until_accept() -> None:
    """A broker binds its ports at start and serves once caught up with the metadata (Kafka's
    enableRequestProcessing): a client meanwhile connects (the kernel's backlog) and is
    answered only after accept(), never refused."""
    async def main() -> None:
        handler = ScriptedHandler()
        server = KafkaServer(handler, "127.0.0.1", 0)
        port = await server.start(accepting=False)
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(api_versions_frame(1, "early"))
            await writer.drain()
            waiting = asyncio.ensure_future(reader.readexactly(4))
            done, _ = await asyncio.wait({waiting}, timeout=0.3)
            assert not done and handler.started == []  # not served before accept()
            server.accept()
            server.accept()  # idempotent
            size = struct.unpack(">i", await asyncio.wait_for(waiting, 5))[0]
            assert struct.unpack(">i", (await reader.readexactly(size))[:4])[0] == 1
            assert handler.started == [1]
            writer.close()
        finally:
            await server.close()

    asyncio.run(main())
