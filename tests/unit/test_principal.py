"""One principal name for a certificate (kraft/security/principal.py, principal_mapping.py):
the subject DN exactly as Java's X500Principal.getName() prints it (RFC 2253 with its
escaping), `ssl.principal.mapping.rules` as Kafka's SslPrincipalMapper parses and applies them
(its own test cases), and the gRPC and Kafka listeners naming one certificate alike."""

from __future__ import annotations

import asyncio
import datetime
import struct
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from broker.api import Request
from broker.kafka.api_versions_api import handle_api_versions
from broker.kafka.codec import DecodedRequest
from broker.kafka.reply import Reply
from broker.kafka.server import KafkaServer
from broker.kafka.tls import client_ssl_context, server_ssl_context
from kraft.security.certs import make_test_certs
from kraft.security.principal import (
    ANONYMOUS,
    AuthenticatingInterceptor,
    PrincipalError,
    certificate_subject,
    peer_principal,
    rfc2253,
    tls_peer_principal,
)
from kraft.security.principal_mapping import (
    DEFAULT_MAPPER,
    MappingRule,
    NoMatchingRule,
    PrincipalMapper,
    parse_mapping_rules,
)
from kraft.security.tls import TlsConfig
from server.config import ConfigError, load_config
from tests.unit.test_kafka_server import api_versions_frame

# -- certificates -----------------------------------------------------------------------------


def certificate(subject: x509.Name) -> bytes:
    """A self-signed DER certificate with this subject."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def client_keystore(certs: Path, file: str, subject: x509.Name) -> Path:
    """A client keystore (key + certificate + CA) signed by the CA make_test_certs wrote."""
    ca_cert = x509.load_pem_x509_certificate((certs / "ca.pem").read_bytes())
    ca_key = serialization.load_pem_private_key((certs / "ca-key.pem").read_bytes(), None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=5)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(ca_key, hashes.SHA256()))
    path = certs / file
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                          serialization.NoEncryption())
        + cert.public_bytes(serialization.Encoding.PEM) + (certs / "ca.pem").read_bytes())
    path.chmod(0o600)
    return path


def cn(value: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, value)])


# -- DER by hand, where the test needs exact control of the encoding --------------------------


def tlv(tag: int, content: bytes) -> bytes:
    assert len(content) < 128
    return bytes([tag, len(content)]) + content


def ava(oid: bytes, tag: int, value: bytes) -> bytes:
    return tlv(0x30, tlv(0x06, oid) + tlv(tag, value))


CN_OID, O_OID = bytes([0x55, 0x04, 0x03]), bytes([0x55, 0x04, 0x0A])
UID_OID = bytes([0x09, 0x92, 0x26, 0x89, 0x93, 0xF2, 0x2C, 0x64, 0x01, 0x01])
UTF8, PRINTABLE = 0x0C, 0x13

# -- RFC 2253 as Java prints it ---------------------------------------------------------------


@pytest.mark.parametrize(("common_name", "printed"), [
    ("admin", "CN=admin"),
    # The comma attack: a CN that reads as two RDNs unless its comma is escaped.
    ("admin,O=kraft-test", "CN=admin\\,O\\=kraft-test"),
    ("a+b", "CN=a\\+b"),
    ('say "hi"', 'CN=say \\"hi\\"'),
    ("back\\slash", "CN=back\\\\slash"),
    ("<a>;b", "CN=\\<a\\>\\;b"),
    ("#tag", "CN=\\#tag"),
    ("a#b=c", "CN=a\\#b\\=c"),  # Java escapes every # and =, not only a leading #
    (" lead", "CN=\\ lead"),
    ("trail ", "CN=trail\\ "),
    ("  two  ", "CN=\\ \\ two\\ \\ "),
    ("  ", "CN=\\ \\ "),
    ("in side", "CN=in side"),
    ("a\0b", "CN=a\\00b"),
    ("Zoë 日本", "CN=Zoë 日本"),  # non-ASCII stays as it is
])
def test_values_are_escaped_as_java_prints_them(common_name: str, printed: str) -> None:
    assert certificate_subject(certificate(cn(common_name))) == printed


def test_rdns_are_printed_last_first_with_the_rfc_2253_keywords() -> None:
    subject = x509.Name([
        x509.NameAttribute(NameOID.DOMAIN_COMPONENT, "org"),
        x509.NameAttribute(NameOID.COUNTRY_NAME, "US"),
        x509.NameAttribute(NameOID.STATE_OR_PROVINCE_NAME, "MD"),
        x509.NameAttribute(NameOID.LOCALITY_NAME, "Fulton"),
        x509.NameAttribute(NameOID.STREET_ADDRESS, "1 Main St"),
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Org"),
        x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, "svc"),
        x509.NameAttribute(NameOID.USER_ID, "u1"),
        x509.NameAttribute(NameOID.COMMON_NAME, "App1"),
    ])
    assert certificate_subject(certificate(subject)) == (
        "CN=App1,UID=u1,OU=svc,O=Org,STREET=1 Main St,L=Fulton,ST=MD,C=US,DC=org")


def test_other_attributes_are_their_oid_and_the_hex_of_their_der() -> None:
    subject = x509.Name([
        x509.NameAttribute(NameOID.SERIAL_NUMBER, "12"),
        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b"),
        x509.NameAttribute(NameOID.COMMON_NAME, "x"),
    ])
    assert certificate_subject(certificate(subject)) == (
        "CN=x,1.2.840.113549.1.9.1=#1603614062,2.5.4.5=#13023132")
    # A keyword attribute whose value is no string type Java prints as text (NumericString).
    assert rfc2253(tlv(0x31, ava(CN_OID, 0x12, b"1"))) == "CN=#120131"


def test_a_multi_valued_rdn_joins_its_values_with_plus_in_encoded_order() -> None:
    name = (tlv(0x31, ava(O_OID, UTF8, b"x"))
            + tlv(0x31, ava(UID_OID, UTF8, b"b") + ava(CN_OID, PRINTABLE, b"a")))
    assert rfc2253(name) == "UID=b+CN=a,O=x"
    subject = x509.Name([
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "x")]),
        x509.RelativeDistinguishedName([x509.NameAttribute(NameOID.COMMON_NAME, "a+b"),
                                        x509.NameAttribute(NameOID.USER_ID, "c,d")]),
    ])
    printed = certificate_subject(certificate(subject))
    assert printed in ("CN=a\\+b+UID=c\\,d,O=x", "UID=c\\,d+CN=a\\+b,O=x")


def test_a_bmp_string_is_read_as_utf8_bytes_as_java_does() -> None:
    # Java's AVA.toRFC2253String decodes every string type's bytes as UTF-8, so the UTF-16
    # "ab" prints with the NULs of its high bytes escaped. The name must match Kafka's.
    assert rfc2253(tlv(0x31, ava(CN_OID, 0x1E, b"\0a\0b"))) == "CN=\\00a\\00b"


def test_bytes_that_are_no_certificate_are_refused() -> None:
    for garbage in (b"\x30", b"\x04\x01x", b"\x30\x03\x02\x01\x01", b"not a cert"):
        with pytest.raises(PrincipalError):
            tls_peer_principal(garbage)


# -- the principal: User: + mapped DN ---------------------------------------------------------


def test_the_principal_is_user_and_the_mapped_dn() -> None:
    der = certificate(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kraft-test"),
                                 x509.NameAttribute(NameOID.COMMON_NAME, "App1")]))
    assert tls_peer_principal(der) == "User:CN=App1,O=kraft-test"
    mapper = parse_mapping_rules("RULE:^CN=([^,]+),O=kraft-test$/$1/L")
    assert tls_peer_principal(der, mapper) == "User:app1"
    assert tls_peer_principal(None, mapper) == ANONYMOUS  # ANONYMOUS is never mapped
    assert tls_peer_principal(b"", mapper) == ANONYMOUS
    with pytest.raises(PrincipalError, match=r"no ssl\.principal\.mapping\.rules rule matches"):
        tls_peer_principal(certificate(cn("admin,O=kraft-test")), mapper)


# -- ssl.principal.mapping.rules: Kafka's SslPrincipalMapperTest cases --------------------------


def shown(mapper: PrincipalMapper) -> str:
    """Kafka's SslPrincipalMapper.toString() of the parsed rules."""
    def one(rule: MappingRule) -> str:
        if rule.pattern is None:
            return "DEFAULT"
        return (f"RULE:{rule.pattern.pattern}/{rule.replacement_text}"
                + (f"/{rule.case}" if rule.case else ""))
    return "[" + ", ".join(one(rule) for rule in mapper.rules) + "]"


@pytest.mark.parametrize("rules", [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
])
def test_valid_rules(rules: str) -> None:
    assert parse_mapping_rules(rules).rules


@pytest.mark.parametrize("rules", [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
    # Beyond Kafka's list: refused at load here rather than at every login there.
    "RULE:^CN=(.*$/$1/",  # not a regex
    "RULE:^CN=(.*)$/$x/",  # $ without a group number
])
def test_invalid_rules(rules: str) -> None:
    with pytest.raises(ValueError, match="rule"):
        parse_mapping_rules(rules)


def test_kafka_mapper_cases() -> None:
    mapper = parse_mapping_rules(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT",
    ]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    dn = "OU=JavaSoft,O=Sun Microsystems,C=US"
    assert mapper.name(dn) == dn


@pytest.mark.parametrize(("expected", "rules"), [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
     "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    # empty rules are ignored
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    # escape sequences
    ("[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]", "RULE:\\/\\\\\\(\\)\\n\\t/\\/\\//"),
    ("[RULE:\\**\\/+/*/L, RULE:\\/*\\**/**]", "RULE:\\**\\/+/*/L,RULE:\\/*\\**/**/"),
    # rules rule
    ("[RULE:,RULE:,/,RULE:,\\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, "
     "/DEFAULT, DEFAULT]",
     "RULE:,RULE:,/,RULE:,\\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, "
     "/DEFAULT/,DEFAULT"),
])
def test_rules_splitting(expected: str, rules: str) -> None:
    assert shown(parse_mapping_rules(rules)) == expected


def test_comma_with_whitespace() -> None:
    mapper = parse_mapping_rules("RULE:^CN=((\\\\, *|\\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name("CN=Tkac\\, Adam,OU=ITZ,DC=geodis,DC=cz") == "Tkac\\, Adam"


def test_replacements_follow_java() -> None:
    def name(rule: str, dn: str) -> str:
        return parse_mapping_rules(rule).name(dn)
    assert name("RULE:^CN=(a)$/$12/", "CN=a") == "a2"  # digits taken while a group exists
    assert name("RULE:^CN=(a)$/$5-$0/", "CN=a") == "$5-CN=a"  # no group 5: literal
    assert name("RULE:^CN=(a)$/\\$1 \\/ x/", "CN=a") == "$1 / x"  # \c is c
    assert name("RULE:^CN=(.*)$/\\/$1/", "CN=a/b") == "/a/b"
    assert name("RULE:[a-z]*/X/", "abc") == "XX"  # every match replaced, as replaceAll
    assert name("RULE:^CN=(.*)$/$1/U", "CN=straße") == "STRASSE"


def test_the_first_matching_rule_wins_and_none_matching_refuses() -> None:
    mapper = parse_mapping_rules("RULE:^CN=(.*),O=a$/$1/, RULE:^CN=(.*),O=.*$/other-$1/")
    assert mapper.name("CN=x,O=a") == "x"
    assert mapper.name("CN=x,O=b") == "other-x"
    assert mapper.can_refuse
    with pytest.raises(NoMatchingRule):
        mapper.name("OU=x")
    with pytest.raises(NoMatchingRule):  # the regex must match the whole DN, not a part
        parse_mapping_rules("RULE:CN=(\\w+)/$1/").name("CN=x,O=a")
    assert not DEFAULT_MAPPER.can_refuse
    assert not parse_mapping_rules("RULE:^CN=(.*)$/$1/,DEFAULT").can_refuse


def test_the_config_key_parses_and_a_bad_rule_stops_the_node(tmp_path: Path) -> None:
    base = ("process.roles=controller\nnode.id=1\ncontroller.quorum.voters=1@127.0.0.1:9093\n"
            "listeners=CONTROLLER://127.0.0.1:9093\ncontroller.listener.names=CONTROLLER\n"
            f"log.dirs={tmp_path / 'data'}\n")
    path = tmp_path / "node.properties"
    path.write_text(base)
    assert load_config(path).ssl_principal_mapping_rules == DEFAULT_MAPPER
    path.write_text(base + "ssl.principal.mapping.rules=RULE:^CN=(.*?),O=x$/$1/L,DEFAULT\n")
    assert load_config(path).ssl_principal_mapping_rules.name("CN=Ab,O=x") == "ab"
    path.write_text(base + "ssl.principal.mapping.rules=RULE:^CN=(.*?),O=x$/$1/L/U\n")
    with pytest.raises(ConfigError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message
    assert "ssl.principal.mapping.rules" in message and "'/U' is too much" in message


# -- one name on every listener ---------------------------------------------------------------


class PrincipalRecorder:
    """A Kafka request handler that notes the principal of each request."""

    def __init__(self) -> None:
        self.principals: list[str] = []

    async def handle(self, request: DecodedRequest, context: Request) -> Reply:
        self.principals.append(context.principal)
        return handle_api_versions(request.api_version, request.body)


async def kafka_name(tls: TlsConfig, client: TlsConfig, mapper: PrincipalMapper) -> str | None:
    """The principal the Kafka listener gives `client`; None when it refuses the connection."""
    recorder = PrincipalRecorder()
    server = KafkaServer(recorder, "127.0.0.1", 0, ssl_context=server_ssl_context(tls),
                         principal_mapper=mapper)
    port = await server.start()
    try:
        reader, writer = await asyncio.open_connection(
            "127.0.0.1", port, ssl=client_ssl_context(client), server_hostname="127.0.0.1")
        writer.write(api_versions_frame(1, "probe"))
        try:
            size = struct.unpack(">i", await reader.readexactly(4))[0]
            await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            assert recorder.principals == []
            return None
        finally:
            writer.close()
        return recorder.principals[0]
    finally:
        await server.close()


async def grpc_name(tls: TlsConfig, client: TlsConfig, mapper: PrincipalMapper) -> str | None:
    """The principal a gRPC service gives `client` (with the refusing interceptor the nodes
    install); None when the call is refused UNAUTHENTICATED."""
    async def whoami(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        return peer_principal(context, mapper).encode()

    handler = grpc.method_handlers_generic_handler(
        "test.Who", {"Am": grpc.unary_unary_rpc_method_handler(whoami)})
    server = grpc.aio.server(interceptors=[AuthenticatingInterceptor(mapper)])
    server.add_generic_rpc_handlers((handler,))
    port = server.add_secure_port("127.0.0.1:0", tls.server_credentials())
    await server.start()
    try:
        async with grpc.aio.secure_channel(f"127.0.0.1:{port}",
                                           client.channel_credentials()) as channel:
            call = channel.unary_unary("/test.Who/Am")
            try:
                reply: bytes = await call(b"", timeout=10)
            except grpc.aio.AioRpcError as exc:
                assert exc.code() == grpc.StatusCode.UNAUTHENTICATED, exc
                assert "no ssl.principal.mapping.rules rule matches" in (exc.details() or "")
                return None
            return reply.decode()
    finally:
        await server.stop(None)


def test_grpc_and_the_kafka_listener_name_a_certificate_alike(tmp_path: Path) -> None:
    certs = tmp_path / "certs"
    make_test_certs(certs, ["server"])
    tls = TlsConfig(str(certs / "server.pem"), str(certs / "ca.pem"), "required")
    subjects = {
        "attacker.pem": cn("admin,O=kraft-test"),
        "plain.pem": x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kraft-test"),
                                x509.NameAttribute(NameOID.COMMON_NAME, "App1")]),
        "odd.pem": x509.Name([x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b"),
                              x509.NameAttribute(NameOID.COMMON_NAME, ' #x+y;"z" ')]),
    }
    clients = {f: TlsConfig(str(client_keystore(certs, f, s)), str(certs / "ca.pem"))
               for f, s in subjects.items()}
    mapped = parse_mapping_rules("RULE:^CN=([A-Za-z0-9]+),O=kraft-test$/$1/L")
    expected = {
        ("attacker.pem", DEFAULT_MAPPER): "User:CN=admin\\,O\\=kraft-test",
        ("plain.pem", DEFAULT_MAPPER): "User:CN=App1,O=kraft-test",
        ("odd.pem", DEFAULT_MAPPER): 'User:CN=\\ \\#x\\+y\\;\\"z\\"\\ ,'
                                     "1.2.840.113549.1.9.1=#1603614062",
        ("attacker.pem", mapped): None,
        ("plain.pem", mapped): "User:app1",
        ("odd.pem", mapped): None,
    }

    async def main() -> None:
        for (file, mapper), name in expected.items():
            assert await kafka_name(tls, clients[file], mapper) == name, (file, "Kafka")
            assert await grpc_name(tls, clients[file], mapper) == name, (file, "gRPC")

    asyncio.run(main())
