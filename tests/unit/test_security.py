"""The authorizer's rules, the ACL file, the client command config and TLS file checks."""

from __future__ import annotations

import json
import re
import ssl
from pathlib import Path

import pytest

from kraft.security.authorizer import (
    METHOD_OPERATIONS,
    AclFileError,
    Authorizer,
    load_acl_file,
    parse_super_users,
)
from kraft.security.certs import make_test_certs, principal_of
from kraft.security.client_config import load_client_tls
from kraft.security.principal import tls_peer_principal
from kraft.security.tls import TlsConfig, TlsConfigError

ADMIN = "User:CN=admin,O=x"
OPS = "User:CN=ops,O=x"


def test_super_users_may_do_everything_and_others_what_they_are_granted() -> None:
    authorizer = Authorizer(parse_super_users(f" {ADMIN} ; User:CN=c1,O=x;"),
                            {OPS: frozenset({"AlterConfigs"})})
    assert authorizer.super_users == {ADMIN, "User:CN=c1,O=x"}
    assert authorizer.allows(ADMIN, "Create")
    assert authorizer.allows(ADMIN, None)  # even a call nobody classified
    assert authorizer.allows(OPS, "AlterConfigs")
    assert not authorizer.allows(OPS, "Create")
    assert not authorizer.allows(OPS, "Describe")  # reads closed by default
    assert not authorizer.allows(OPS, None)
    assert not authorizer.allows("User:ANONYMOUS", "ClusterAction")


def test_open_reads_open_only_reads() -> None:
    authorizer = Authorizer(frozenset(), {}, reads_open=True)
    assert authorizer.allows("User:ANONYMOUS", "Describe")
    assert authorizer.allows("User:ANONYMOUS", "DescribeConfigs")
    for write in ("Create", "Delete", "Alter", "AlterConfigs", "ClusterAction"):
        assert not authorizer.allows("User:ANONYMOUS", write)


def test_a_wildcard_grant_covers_every_principal() -> None:
    authorizer = Authorizer(frozenset(), {"User:*": frozenset({"Describe"})})
    assert authorizer.allows("User:CN=anyone", "Describe")
    assert not authorizer.allows("User:CN=anyone", "Create")


def test_every_rpc_of_every_service_is_classified() -> None:
    from google.protobuf import descriptor_pool

    from broker.rpc import broker_metadata_pb2  # noqa: F401
    from kraft.rpc import raft_pb2  # noqa: F401
    from metadata.rpc import admin_pb2, broker_pb2  # noqa: F401

    pool = descriptor_pool.Default()
    unclassified = []
    for service in ("kraft.admin.v1.Admin", "kraft.raft.v1.Raft", "kraft.raft.v1.Quorum",
                    "kraft.broker.v1.BrokerLifecycle",
                    "kraft.brokermetadata.v1.BrokerMetadata"):
        for method in pool.FindServiceByName(service).methods:
            if f"/{service}/{method.name}" not in METHOD_OPERATIONS:
                unclassified.append(f"{service}/{method.name}")
    assert unclassified == []


def test_acl_file(tmp_path: Path) -> None:
    path = tmp_path / "acls.json"
    path.write_text(json.dumps({"acls": [
        {"principal": OPS, "operations": ["Create"]},
        {"principal": OPS, "operations": ["Delete"]},
        {"principal": ADMIN, "operations": ["All"]},
    ]}))
    grants = load_acl_file(str(path))
    assert grants[OPS] == {"Create", "Delete"}
    assert "ClusterAction" in grants[ADMIN]


@pytest.mark.parametrize(("content", "message"), [
    ("not json", "Expecting value"),
    ('{"acl": []}', 'expected {"acls": [...]}'),
    ('{"acls": [{"principal": "CN=x", "operations": ["Create"]}]}', "needs a principal"),
    ('{"acls": [{"principal": "User:x", "operations": []}]}', "lists no operations"),
    ('{"acls": [{"principal": "User:x", "operations": ["Write"]}]}', "unknown operation 'Write'"),
])
def test_bad_acl_files_are_named(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "acls.json"
    path.write_text(content)
    with pytest.raises(AclFileError, match=re.escape(str(path))) as caught:
        load_acl_file(str(path))
    assert message in str(caught.value)


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
