"""`--command-config FILE` for the admin CLI, as Kafka's tools take it: a properties file with
`security.protocol` (PLAINTEXT or SSL) and, for SSL, the client's PEM keystore and the CA
truststore (`ssl.keystore.location`, `ssl.truststore.location`)."""

from __future__ import annotations

from kraft.properties import PropertiesError, load_properties
from kraft.security.tls import TlsConfig, TlsConfigError

KNOWN_KEYS = frozenset({
    "security.protocol", "ssl.keystore.location", "ssl.keystore.type",
    "ssl.truststore.location", "ssl.truststore.type",
})


def load_client_tls(path: str | None) -> TlsConfig | None:
    """The TLS settings of a command config file; None for PLAINTEXT or no file."""
    if path is None:
        return None
    try:
        props = load_properties(path)
    except (OSError, PropertiesError) as exc:
        raise TlsConfigError(f"--command-config {path}: {exc}") from None
    unknown = sorted(set(props) - KNOWN_KEYS)
    if unknown:
        raise TlsConfigError(
            f"--command-config {path}: unknown key {unknown[0]}; known keys: "
            f"{', '.join(sorted(KNOWN_KEYS))}"
        )
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    if protocol == "PLAINTEXT":
        return None
    if protocol != "SSL":
        raise TlsConfigError(
            f"--command-config {path}: security.protocol={protocol}: use PLAINTEXT or SSL"
        )
    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if props.get(key, "PEM").strip().upper() != "PEM":
            raise TlsConfigError(f"--command-config {path}: {key} must be PEM")
    for key in ("ssl.keystore.location", "ssl.truststore.location"):
        if not props.get(key, "").strip():
            raise TlsConfigError(f"--command-config {path}: security.protocol=SSL needs {key}")
    tls = TlsConfig(props["ssl.keystore.location"].strip(),
                    props["ssl.truststore.location"].strip())
    tls.key_and_chain()
    tls.trusted()
    return tls
