"""A SASL listener end to end over sockets (broker/kafka/server.py with broker/kafka/sasl):
the authenticated user is the principal the APIs see, nothing reaches them before, a failed
login is answered and closed only after connection.failed.authentication.delay.ms, raw v0
tokens, SASL_SSL, and the SASL APIs on a listener without SASL."""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from kafka.net.sasl.scram import ScramClient  # type: ignore[import-untyped]
from kio.schema.errors import ErrorCode

from broker.api import Request
from broker.kafka.api_versions_api import handle_api_versions
from broker.kafka.codec import DecodedRequest, decode_response
from broker.kafka.reply import Reply
from broker.kafka.sasl.settings import SaslSettings
from broker.kafka.server import KafkaServer
from broker.kafka.tls import client_ssl_context, server_ssl_context
from kraft.security.certs import make_test_certs
from kraft.security.tls import TlsConfig
from metadata.scram import ScramMechanism, credential_from_password
from tests.unit.test_sasl_authenticator import (
    api_versions,
    authenticate,
    handshake,
    lookup,
    metadata,
)

SETTINGS = SaslSettings(("SCRAM-SHA-512", "PLAIN"), {"alice": "alice-pw"}, lookup,
                        failed_authentication_delay_ms=300)


class Recorder:
    """Answers everything with an ApiVersions v0 body, recording who asked."""

    def __init__(self) -> None:
        self.principals: list[str] = []

    async def handle(self, request: DecodedRequest, context: Request) -> Reply:
        self.principals.append(context.principal)
        return handle_api_versions(0, None)


def sized(frame: bytes) -> bytes:
    return struct.pack(">i", len(frame)) + frame


async def answer(reader: asyncio.StreamReader, api_key: int, version: int) -> object:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    return decode_response(api_key, version, await reader.readexactly(size))[1]


async def closed(reader: asyncio.StreamReader) -> bool:
    try:
        return await reader.read(1) == b""
    except ConnectionError:
        return True


Scenario = Callable[[KafkaServer, Recorder, int], Awaitable[None]]


def run(scenario: Scenario, sasl: SaslSettings | None = SETTINGS,
        ssl_context: ssl.SSLContext | None = None) -> None:
    async def main() -> None:
        recorder = Recorder()
        server = KafkaServer(recorder, "127.0.0.1", 0, listener="CLIENT", sasl=sasl,
                             ssl_context=ssl_context)
        port = await server.start()
        try:
            await asyncio.wait_for(scenario(server, recorder, port), 20)
        finally:
            await server.close()

    asyncio.run(main())


async def plain_login(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                      password: str = "alice-pw") -> object:
    writer.write(sized(api_versions()) + sized(handshake("PLAIN")))
    await answer(reader, 18, 3)
    await answer(reader, 17, 1)
    writer.write(sized(authenticate(f"\0alice\0{password}".encode())))
    return await answer(reader, 36, 2)


def test_the_authenticated_user_is_the_principal_the_apis_see() -> None:
    async def scenario(_: KafkaServer, recorder: Recorder, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        response = await plain_login(reader, writer)
        assert response.error_code == ErrorCode.none  # type: ignore[attr-defined]
        assert recorder.principals == []  # ApiVersions and the SASL APIs never reach the APIs
        writer.write(sized(metadata()))
        await answer(reader, 18, 0)  # the recorder's answer
        assert recorder.principals == ["User:alice"]
        writer.close()

    run(scenario)


def test_scram_sha_512_over_the_socket() -> None:
    async def scenario(_: KafkaServer, recorder: Recorder, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = ScramClient("bob", "bob-pw", "SCRAM-SHA-512")
        writer.write(sized(handshake("SCRAM-SHA-512")) + sized(authenticate(
            client.first_message())))
        assert (await answer(reader, 17, 1)).mechanisms == ("SCRAM-SHA-512", "PLAIN")  # type: ignore[attr-defined]
        client.process_server_first_message((await answer(reader, 36, 2)).auth_bytes)  # type: ignore[attr-defined]
        writer.write(sized(authenticate(client.final_message())))
        client.process_server_final_message((await answer(reader, 36, 2)).auth_bytes)  # type: ignore[attr-defined]
        writer.write(sized(metadata()))
        await answer(reader, 18, 0)
        assert recorder.principals == ["User:bob"]
        writer.close()

    run(scenario)


def test_nothing_but_api_versions_and_handshake_before_authentication(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(server: KafkaServer, recorder: Recorder, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sized(metadata()))
        assert await closed(reader)
        assert recorder.principals == []
        writer.close()

    with caplog.at_level(logging.WARNING, logger="broker.kafka.server"):
        run(scenario)
    assert "unexpected Kafka request of type METADATA" in caplog.text


def test_a_failed_login_is_answered_and_closed_after_the_delay(
        caplog: pytest.LogCaptureFixture) -> None:
    async def scenario(server: KafkaServer, recorder: Recorder, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        loop = asyncio.get_running_loop()
        started = loop.time()
        response = await plain_login(reader, writer, "wrong")
        assert loop.time() - started >= 0.3  # connection.failed.authentication.delay.ms
        assert response.error_code == ErrorCode.sasl_authentication_failed  # type: ignore[attr-defined]
        assert response.error_message == "Authentication failed: Invalid username or password"  # type: ignore[attr-defined]
        # The broker lets the client close first (a TLS client may otherwise miss the
        # answer), for at most a second, and answers nothing more.
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(reader.read(1), 0.3)
        writer.write(sized(metadata()))
        assert await closed(reader)
        assert recorder.principals == [] and server.failed_authentications == 1
        writer.close()

    with caplog.at_level(logging.INFO, logger="broker.kafka.server"):
        run(scenario)
    assert "failed authentication" in caplog.text and "Invalid username or password" \
        in caplog.text


def test_raw_tokens_after_handshake_v0() -> None:
    async def scenario(_: KafkaServer, recorder: Recorder, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sized(handshake("PLAIN", version=0)) + sized(b"\0alice\0alice-pw"))
        assert (await answer(reader, 17, 0)).error_code == ErrorCode.none  # type: ignore[attr-defined]
        assert await reader.readexactly(4) == b"\0\0\0\0"  # PLAIN's empty challenge, raw
        writer.write(sized(metadata()))
        await answer(reader, 18, 0)
        assert recorder.principals == ["User:alice"]
        writer.close()

    run(scenario)


def test_a_frame_over_sasl_server_max_receive_size_before_authentication_closes() -> None:
    async def scenario(server: KafkaServer, _: Recorder, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(struct.pack(">i", 524289))
        assert await closed(reader)
        assert server.failed_authentications == 1
        writer.close()

    run(scenario)


def test_sasl_ssl_uses_the_sasl_identity_not_the_certificate(tmp_path: Path) -> None:
    certs = make_test_certs(tmp_path, ["broker", "client"])
    server_context = server_ssl_context(TlsConfig(str(certs["broker"]), str(certs["ca"]),
                                                  "required"))
    client_context = client_ssl_context(TlsConfig(str(certs["client"]), str(certs["ca"])))

    async def scenario(_: KafkaServer, recorder: Recorder, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context,
                                                       server_hostname="localhost")
        assert (await plain_login(reader, writer)).error_code == ErrorCode.none  # type: ignore[attr-defined]
        writer.write(sized(metadata()))
        await answer(reader, 18, 0)
        assert recorder.principals == ["User:alice"]
        writer.close()

    run(scenario, ssl_context=server_context)


def test_sasl_apis_on_a_listener_without_sasl_answer_illegal_state() -> None:
    async def scenario(_: KafkaServer, recorder: Recorder, port: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(sized(handshake("PLAIN")) + sized(authenticate(b"\0a\0b")))
        response = await answer(reader, 17, 1)
        assert response.error_code == ErrorCode.illegal_sasl_state  # type: ignore[attr-defined]
        assert (await answer(reader, 36, 2)).error_code == ErrorCode.illegal_sasl_state  # type: ignore[attr-defined]
        writer.write(sized(metadata()))
        await answer(reader, 18, 0)
        assert recorder.principals == ["User:ANONYMOUS"]
        writer.close()

    run(scenario, sasl=None)


def test_scram_credentials_are_looked_up_at_login_time() -> None:
    """A user added to the image after the listener started can log in (no cached copy)."""
    store: dict[str, object] = {}
    settings = SaslSettings(("SCRAM-SHA-256",),
                            scram_credentials=lambda user, _: store.get(user))  # type: ignore[arg-type,return-value]

    async def scenario(_: KafkaServer, recorder: Recorder, port: int) -> None:
        store["carol"] = credential_from_password(ScramMechanism.SCRAM_SHA_256, "pw", b"s", 4096)
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        client = ScramClient("carol", "pw", "SCRAM-SHA-256")
        writer.write(sized(handshake("SCRAM-SHA-256")) + sized(authenticate(
            client.first_message())))
        await answer(reader, 17, 1)
        client.process_server_first_message((await answer(reader, 36, 2)).auth_bytes)  # type: ignore[attr-defined]
        writer.write(sized(authenticate(client.final_message())))
        assert (await answer(reader, 36, 2)).error_code == ErrorCode.none  # type: ignore[attr-defined]
        writer.close()

    run(scenario, sasl=settings)
