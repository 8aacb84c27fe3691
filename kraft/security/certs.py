"""A throwaway certificate authority for demos and tests (`kraft-storage make-test-certs`):
one CA, and per name a PEM keystore (private key + certificate + CA certificate) usable both
as a server and as a client certificate, for `127.0.0.1`, `localhost` and any extra hosts.
Never for production: the CA key sits next to the certificates it signed."""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

ORGANIZATION = "kraft-test"
VALID_DAYS = 365


def _name(common_name: str) -> x509.Name:
    # Most significant first (O, then CN), so RFC 2253 prints "CN=...,O=...".
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _write(path: Path, data: bytes, private: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as file:
        file.write(data)


def make_test_certs(
    out: str | os.PathLike[str], names: Iterable[str], hosts: Iterable[str] = ()
) -> dict[str, Path]:
    """Write `ca.pem` (the truststore), `ca-key.pem`, and `<name>.pem` keystores into `out`;
    returns name -> keystore path (and "ca" -> truststore)."""
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(_name("kraft-test-ca")).issuer_name(_name("kraft-test-ca"))
        .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(
            digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
            key_encipherment=False, data_encipherment=False, key_agreement=False,
            encipher_only=False, decipher_only=False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    _write(directory / "ca.pem", ca_pem, private=False)
    _write(directory / "ca-key.pem", _key_pem(ca_key), private=True)
    alt_names: list[x509.GeneralName] = [x509.DNSName("localhost"),
                                         x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    for host in hosts:
        try:
            alt_names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            alt_names.append(x509.DNSName(host))
    paths: dict[str, Path] = {"ca": directory / "ca.pem"}
    for name in names:
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(name)).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        keystore = directory / f"{name}.pem"
        _write(keystore, _key_pem(key) + cert.public_bytes(serialization.Encoding.PEM) + ca_pem,
               private=True)
        paths[name] = keystore
    return paths


def principal_of(name: str) -> str:
    """The principal a certificate made here authenticates as (Kafka's default SSL
    principal: the subject DN as RFC 2253 prints it)."""
    return f"User:CN={name},O={ORGANIZATION}"
