"""TLS for every gRPC listener and client, configured the way Kafka configures SSL listeners:
PEM files (`ssl.keystore.type=PEM`): a keystore with the node's private key and certificate
chain, a truststore with the cluster CA's certificates, and `ssl.client.auth` (none,
requested, required) for mutual TLS. One `TlsConfig` serves a node's listeners and the
clients it opens to its peers; `kraft-admin --command-config FILE` reads the same keys.

Hosts are verified against the certificates' subject alternative names as usual, so
certificates for loopback clusters carry `IP:127.0.0.1` and `DNS:localhost`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

import grpc

CLIENT_AUTH_VALUES = ("none", "requested", "required")
# gRPC's default 4 MiB cap is below what the project sends in one message (a Fetch answer or a
# snapshot chunk of up to 8 MiB, every topic of a large cluster in one Admin answer): every
# channel and server takes these options.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
MESSAGE_SIZE_OPTIONS: list[tuple[str, object]] = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.max_send_message_length", MAX_MESSAGE_BYTES),
]
# gRPC servers set SO_REUSEPORT by default: a second process binding a node's port succeeds and
# the kernel splits new connections between the two, so clients of the node silently reach
# another process (on a shared machine, another cluster's node that was handed the port while
# this node was down). A node's listener must own its port, as Kafka's does: binding fails.
SERVER_OPTIONS: list[tuple[str, object]] = [*MESSAGE_SIZE_OPTIONS, ("grpc.so_reuseport", 0)]
_KEY = re.compile(rb"-----BEGIN (?:RSA |EC |ENCRYPTED )?PRIVATE KEY-----.*?-----END "
                  rb"(?:RSA |EC |ENCRYPTED )?PRIVATE KEY-----\s*", re.S)
_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\s*", re.S)


class TlsConfigError(ValueError):
    """A TLS file that is missing or does not hold what it must; the message names it."""


@dataclass(frozen=True)
class TlsConfig:
    keystore: str  # PEM: the private key and the certificate chain, in one file
    truststore: str  # PEM: the CA certificates peers' certificates must chain to
    client_auth: str = "required"

    def __post_init__(self) -> None:
        if self.client_auth not in CLIENT_AUTH_VALUES:
            raise TlsConfigError(
                f"ssl.client.auth={self.client_auth}: must be one of "
                f"{', '.join(CLIENT_AUTH_VALUES)}"
            )

    def key_and_chain(self) -> tuple[bytes, bytes]:
        data = _read(self.keystore, "ssl.keystore.location")
        keys = _KEY.findall(data)
        chain = b"".join(_CERT.findall(data))
        if not keys or not chain:
            raise TlsConfigError(
                f"ssl.keystore.location={self.keystore} must hold a PEM private key and its "
                "certificate chain (ssl.keystore.type=PEM)"
            )
        if b"ENCRYPTED" in keys[0]:
            raise TlsConfigError(
                f"the private key in {self.keystore} is encrypted; ssl.key.password is not "
                "supported: store it unencrypted with permissions 0600 (openssl pkey -in KEY)"
            )
        return keys[0], chain

    def trusted(self) -> bytes:
        data = _read(self.truststore, "ssl.truststore.location")
        certs = b"".join(_CERT.findall(data))
        if not certs:
            raise TlsConfigError(
                f"ssl.truststore.location={self.truststore} holds no PEM certificate"
            )
        return certs

    def server_credentials(self) -> grpc.ServerCredentials:
        key, chain = self.key_and_chain()
        return grpc.ssl_server_credentials(
            [(key, chain)],
            root_certificates=self.trusted() if self.client_auth != "none" else None,
            require_client_auth=self.client_auth == "required",
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        key, chain = self.key_and_chain()
        return grpc.ssl_channel_credentials(self.trusted(), key, chain)


def _read(path: str, key: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError as exc:
        raise TlsConfigError(f"{key}={path}: {exc.strerror or exc}") from None


def aio_channel(
    target: str, tls: TlsConfig | None, options: list[tuple[str, object]] | None = None
) -> grpc.aio.Channel:
    """The one way this project opens an asyncio channel: TLS when configured."""
    if tls is None:
        return grpc.aio.insecure_channel(target, options=options)
    return grpc.aio.secure_channel(target, tls.channel_credentials(), options=options)


def sync_channel(
    target: str, tls: TlsConfig | None, options: list[tuple[str, object]] | None = None
) -> grpc.Channel:
    """The blocking twin of aio_channel, for the CLI."""
    if tls is None:
        return grpc.insecure_channel(target, options=options)
    return grpc.secure_channel(target, tls.channel_credentials(), options=options)


def new_server(interceptors: list[grpc.aio.ServerInterceptor[Any, Any]]) -> grpc.aio.Server:
    """A node's gRPC server: SERVER_OPTIONS (large messages, its port its own)."""
    return grpc.aio.server(options=SERVER_OPTIONS, interceptors=interceptors)


def add_port(server: grpc.aio.Server, address: str, tls: TlsConfig | None) -> int:
    if tls is None:
        return server.add_insecure_port(address)
    return server.add_secure_port(address, tls.server_credentials())


def key_file_is_private(path: str) -> bool:
    """Whether only the owner may read the keystore (a warning otherwise)."""
    try:
        return os.stat(path).st_mode & 0o077 == 0
    except OSError:
        return True
