"""The test certificates, the client command config and TLS file checks (the authorizer's
rules: test_grpc_authorization.py, test_kafka_authorization.py and the StandardAuthorizer's)."""

from __future__ import annotations

import re
import ssl
from pathlib import Path

import pytest

from kraft.security.certs import make_test_certs, principal_of
from kraft.security.client_config import load_client_tls
from kraft.security.principal import tls_peer_principal
from kraft.security.tls import TlsConfig, TlsConfigError


def test_test_certificates_and_tls_files(tmp_path: Path) -> None:
    paths = make_test_certs(tmp_path, ["node-1"])
    tls = TlsConfig(str(paths["node-1"]), str(paths["ca"]))
    key, chain = tls.key_and_chain()
    assert b"PRIVATE KEY" in key and chain.count(b"BEGIN CERTIFICATE") == 2
    assert (paths["node-1"].stat().st_mode & 0o077) == 0  # the keystore is private
    assert principal_of("node-1") == "User:CN=node-1,O=kraft-test"
    with pytest.raises(TlsConfigError, match="must hold a PEM private key"):
        TlsConfig(str(paths["ca"]), str(paths["ca"])).key_and_chain()
    with pytest.raises(TlsConfigError, match=re.escape("ssl.truststore.location=/nope")):
        TlsConfig(str(paths["node-1"]), "/nope").trusted()
    with pytest.raises(TlsConfigError, match=re.escape("ssl.client.auth=sometimes")):
        TlsConfig("k", "t", "sometimes")


def test_client_command_config(tmp_path: Path) -> None:
    paths = make_test_certs(tmp_path / "certs", ["admin"])
    config = tmp_path / "client.properties"
    assert load_client_tls(None) is None
    config.write_text("security.protocol=PLAINTEXT\n")
    assert load_client_tls(str(config)) is None
    config.write_text(f"security.protocol=SSL\nssl.keystore.location={paths['admin']}\n"
                      f"ssl.truststore.location={paths['ca']}\n")
    tls = load_client_tls(str(config))
    assert tls is not None and tls.keystore == str(paths["admin"])
    config.write_text("security.protocol=SSL\n")
    with pytest.raises(TlsConfigError, match=re.escape("needs ssl.keystore.location")):
        load_client_tls(str(config))
    config.write_text("security.protocol=SASL_SSL\n")
    with pytest.raises(TlsConfigError, match="use PLAINTEXT or SSL"):
        load_client_tls(str(config))
    config.write_text("sasl.mechanism=PLAIN\n")
    with pytest.raises(TlsConfigError, match=re.escape("unknown key sasl.mechanism")):
        load_client_tls(str(config))


def test_a_kafka_tls_client_is_named_as_grpc_names_it(tmp_path: Path) -> None:
    """The Kafka listener's principal (from the certificate's DER, getpeercert(binary_form=
    True)) is the gRPC one: the subject DN in RFC 2253 order, so one super.users entry covers
    both front ends (tests/unit/test_principal.py checks both listeners over TLS)."""
    certs = make_test_certs(tmp_path, ["reader"])
    pem = re.search(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----\n",
                    certs["reader"].read_text(), re.S)
    assert pem is not None
    assert tls_peer_principal(ssl.PEM_cert_to_DER_cert(pem.group())) == principal_of("reader")
    assert tls_peer_principal(None) == tls_peer_principal(b"") == "User:ANONYMOUS"
