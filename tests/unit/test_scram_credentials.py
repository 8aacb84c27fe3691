"""SCRAM credentials (KIP-554): RFC 7677's key derivation and the image lookup SASL servers use."""

from __future__ import annotations

import base64
import hashlib
import hmac
from types import MappingProxyType

from metadata.image import EMPTY_IMAGE, MetadataImage
from metadata.scram import (
    ScramCredential,
    ScramMechanism,
    credential_from_password,
    scram_credential,
)

# RFC 7677 section 3's SCRAM-SHA-256 exchange (user "user", password "pencil").
SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
AUTH_MESSAGE = (
    b"n=user,r=rOprNGfwEbeRWgbNEkqO,"
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096,"
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
PROOF = base64.b64decode("dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
SERVER_SIGNATURE = base64.b64decode("6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")


def test_keys_derived_as_rfc_7677_accept_its_proof_and_sign_as_it_does() -> None:
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_256, "pencil", SALT, 4096)
    signature = hmac.digest(credential.stored_key, AUTH_MESSAGE, "sha256")
    client_key = bytes(a ^ b for a, b in zip(PROOF, signature, strict=True))
    assert hashlib.sha256(client_key).digest() == credential.stored_key
    assert hmac.digest(credential.server_key, AUTH_MESSAGE, "sha256") == SERVER_SIGNATURE
    assert "redacted" in repr(credential) and credential.stored_key.hex() not in repr(credential)


def test_sha_512_keys_are_64_bytes() -> None:
    credential = credential_from_password(ScramMechanism.SCRAM_SHA_512, "pw", b"salt", 4096)
    assert len(credential.stored_key) == len(credential.server_key) == 64


def test_mechanism_names_and_codes_are_kafkas() -> None:
    assert ScramMechanism.from_name("SCRAM-SHA-512") is ScramMechanism.SCRAM_SHA_512
    assert ScramMechanism.from_name("SCRAM-SHA-1") is ScramMechanism.UNKNOWN
    assert ScramMechanism.SCRAM_SHA_256.mechanism_name == "SCRAM-SHA-256"
    assert ScramMechanism.of_code(2) is ScramMechanism.SCRAM_SHA_512
    assert ScramMechanism.of_code(9) is ScramMechanism.UNKNOWN


def test_the_lookup_answers_per_user_and_mechanism() -> None:
    credential = ScramCredential(b"s", b"k" * 32, b"v" * 32, 8192)
    image = MetadataImage(scram=MappingProxyType({"alice": MappingProxyType({1: credential})}))
    assert scram_credential(image, "alice", ScramMechanism.SCRAM_SHA_256) is credential
    assert scram_credential(image, "alice", ScramMechanism.SCRAM_SHA_512) is None
    assert scram_credential(image, "bob", 1) is None
    assert scram_credential(EMPTY_IMAGE, "alice", 1) is None
