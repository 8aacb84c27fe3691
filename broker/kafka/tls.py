"""ssl.SSLContexts for the Kafka listener and the inter-broker client, from the same PEM
files (kraft.security.tls.TlsConfig) that secure the project's gRPC listeners."""

from __future__ import annotations

import ssl

from kraft.security.tls import TlsConfig, TlsConfigError

_VERIFY = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}


def server_ssl_context(tls: TlsConfig) -> ssl.SSLContext:
    """A listener's context: its key and chain, and clients verified per ssl.client.auth."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    _load(context, tls)
    context.verify_mode = _VERIFY[tls.client_auth]
    return context


def client_ssl_context(tls: TlsConfig) -> ssl.SSLContext:
    """A client's context: the server verified against the truststore (host names
    included), its own certificate offered for mutual TLS."""
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    _load(context, tls)
    return context


def _load(context: ssl.SSLContext, tls: TlsConfig) -> None:
    tls.key_and_chain()  # the project's one-line messages for a bad keystore
    context.load_verify_locations(cadata=tls.trusted().decode("ascii"))
    try:
        # The keystore holds the key and the chain in one PEM file.
        context.load_cert_chain(tls.keystore)
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"ssl.keystore.location={tls.keystore}: {exc}") from None
