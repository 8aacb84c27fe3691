"""SCRAM-SHA-256 / SCRAM-SHA-512 servers (RFC 5802, RFC 7677) as Kafka's ScramSaslServer.

Kafka's grammar (ScramMessages): gs2 header `n` only (no channel binding), an optional
authzid equal to the user, an ASCII saslname with `=2C` / `=3D`, extensions (`tokenauth` is
the only one Kafka knows; delegation tokens do not exist here, so it always fails); the
client-final nonce must be the server-first one exactly; AuthMessage is built from the parsed
messages as Kafka rebuilds them. No SASLprep: the password was UTF-8 bytes when the stored
keys were derived (metadata/scram.py). The server only checks the proof against the stored
keys (a few HMACs and one hash), never runs PBKDF2, so a login is cheap enough for the event
loop. Every failure but an authzid mismatch is reported to the client with one generic
message (SaslCredentialsInvalid), so a missing user and a wrong password look the same.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from broker.kafka.sasl.mechanisms import SaslAuthenticationFailed, SaslCredentialsInvalid
from metadata.scram import MIN_ITERATIONS, ScramCredential, ScramMechanism

# (user, mechanism) -> the stored credential, or None: the metadata image's (scram_credential).
CredentialLookup = Callable[[str, ScramMechanism], "ScramCredential | None"]

# Kafka's ScramMessages patterns, character for character (Java's [\x01-\x7F&&[^,]] etc.).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_ALPHA = r"[A-Za-z]+"
_B64 = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64}{{4}})*(?:{_B64}{{3}}=|{_B64}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,{_ALPHA}={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})")
_CLIENT_FINAL = re.compile(
    rf"c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS},p=(?P<proof>{_BASE64})")
_BASE36 = "0123456789abcdefghijklmnopqrstuvwxyz"


def mechanism_of(name: str) -> ScramMechanism:
    return ScramMechanism.from_name(name)


def server_nonce() -> str:
    """130 random bits in base 36, as Kafka's ScramFormatter.secureRandomString."""
    value = secrets.randbits(130)
    digits = []
    while value:
        value, digit = divmod(value, 36)
        digits.append(_BASE36[digit])
    return "".join(reversed(digits)) or "0"


def username_of(saslname: str) -> str:
    """Kafka's ScramFormatter.username: `=2C` is `,`, `=3D` is `=`, any other `=` is bad."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslCredentialsInvalid(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


def _text(token: bytes) -> str:
    # Java decodes with replacement characters, which no pattern accepts.
    return token.decode("utf-8", errors="replace")


@dataclass(frozen=True, slots=True)
class ClientFirst:
    authzid: str
    saslname: str
    nonce: str
    extensions: tuple[tuple[str, str], ...]

    @property
    def bare(self) -> str:
        """client-first-message-bare as Kafka rebuilds it (reserved `m=` dropped)."""
        extensions = ",".join(f"{key}={value}" for key, value in self.extensions)
        return f"n={self.saslname},r={self.nonce}" + (f",{extensions}" if extensions else "")


def parse_client_first(token: bytes) -> ClientFirst:
    match = _CLIENT_FIRST.fullmatch(_text(token))
    if match is None:
        raise SaslCredentialsInvalid("Invalid SCRAM client first message format")
    extensions = []
    for item in match["extensions"].split(",")[1:]:
        key, _, value = item.partition("=")
        extensions.append((key, value))
    return ClientFirst(match["authzid"] or "", match["saslname"], match["nonce"],
                       tuple(extensions))


@dataclass(frozen=True, slots=True)
class ClientFinal:
    channel_binding: bytes
    nonce: str
    proof: bytes

    @property
    def without_proof(self) -> str:
        """client-final-message-without-proof as Kafka rebuilds it (extensions dropped)."""
        return f"c={base64.b64encode(self.channel_binding).decode()},r={self.nonce}"


def parse_client_final(token: bytes) -> ClientFinal:
    match = _CLIENT_FINAL.fullmatch(_text(token))
    if match is None:
        raise SaslCredentialsInvalid("Invalid SCRAM client final message format")
    try:
        return ClientFinal(base64.b64decode(match["channel"]), match["nonce"],
                           base64.b64decode(match["proof"]))
    except binascii.Error:  # the pattern admits only valid base64; kept as a guard
        raise SaslCredentialsInvalid("Invalid SCRAM client final message format") from None


class ScramSaslServer:
    """One SCRAM exchange: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: ScramMechanism, credentials: CredentialLookup,
                 nonce: Callable[[], str] = server_nonce) -> None:
        if mechanism is ScramMechanism.UNKNOWN:
            raise ValueError("a SCRAM server needs SCRAM-SHA-256 or SCRAM-SHA-512")
        self._mechanism = mechanism
        self._hash = mechanism.hash_name
        self._credentials = credentials
        self._nonce = nonce
        self._first: ClientFirst | None = None
        self._server_first = ""
        self._nonce_sent = ""
        self._credential: ScramCredential | None = None
        self._user: str | None = None
        self._done = False
        self._failed = False

    @property
    def mechanism(self) -> str:
        return self._mechanism.mechanism_name

    @property
    def complete(self) -> bool:
        return self._done

    @property
    def authorization_id(self) -> str:
        if not self._done or self._user is None:
            raise RuntimeError("the SCRAM exchange has not completed")
        return self._user

    def evaluate(self, token: bytes) -> bytes:
        if self._done or self._failed:
            raise SaslCredentialsInvalid("a SCRAM token after the exchange ended")
        try:
            if self._first is None:
                return self._receive_first(token)
            return self._receive_final(token)
        except (SaslCredentialsInvalid, SaslAuthenticationFailed):
            self._credential = None  # failed for good: no key kept
            self._failed = True
            raise

    def _receive_first(self, token: bytes) -> bytes:
        first = parse_client_first(token)
        user = username_of(first.saslname)
        tokenauth = dict(first.extensions).get("tokenauth", "")
        if tokenauth.lower() == "true":
            raise SaslCredentialsInvalid(f"Token Authentication failed: Invalid tokenId : {user}")
        credential = self._credentials(user, self._mechanism)
        if credential is None:
            raise SaslCredentialsInvalid("Authentication failed: Invalid user credentials")
        if first.authzid and first.authzid != user:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username")
        if credential.iterations < MIN_ITERATIONS:
            raise SaslCredentialsInvalid(
                f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                f"for {self.mechanism}")
        self._first, self._credential, self._user = first, credential, user
        self._nonce_sent = first.nonce + self._nonce()
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={self._nonce_sent},s={salt},i={credential.iterations}"
        return self._server_first.encode()

    def _receive_final(self, token: bytes) -> bytes:
        final = parse_client_final(token)
        if final.nonce != self._nonce_sent:
            raise SaslCredentialsInvalid("Invalid client nonce in the final client message.")
        first, credential = self._first, self._credential
        assert first is not None and credential is not None
        auth_message = f"{first.bare},{self._server_first},{final.without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self._hash)
        if len(final.proof) != len(signature):
            raise SaslCredentialsInvalid("Invalid client credentials")
        client_key = (int.from_bytes(final.proof) ^ int.from_bytes(signature)).to_bytes(
            len(signature))
        if not hmac.compare_digest(hashlib.new(self._hash, client_key).digest(),
                                   credential.stored_key):
            raise SaslCredentialsInvalid("Invalid client credentials")
        server_signature = hmac.digest(credential.server_key, auth_message, self._hash)
        self._credential = None
        self._done = True
        return b"v=" + base64.b64encode(server_signature)
