"""Kafka's JAAS configuration text (`sasl.jaas.config`, JaasConfig's StreamTokenizer grammar):
`<LoginModule> <flag> key="value" ...;`. The broker reads one thing from it: the
`user_<name>="<password>"` options of PlainLoginModule, the users PLAIN accepts."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_FLAGS = ("required", "requisite", "sufficient", "optional")
_WORD = re.compile(r"[A-Za-z0-9_.$\-\x80-\U0010ffff]+")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}


class JaasConfigError(ValueError):
    """A JAAS text that does not parse; str() is Kafka's message."""


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: Mapping[str, str]


def _tokens(text: str) -> list[str]:
    """Words, quoted strings (returned with a leading quote mark), `=` and `;`."""
    tokens: list[str] = []
    at = 0
    while at < len(text):
        char = text[at]
        if char.isspace():
            at += 1
        elif text.startswith("//", at):
            end = text.find("\n", at)
            at = len(text) if end < 0 else end + 1
        elif text.startswith("/*", at):
            end = text.find("*/", at + 2)
            if end < 0:
                raise JaasConfigError("Unterminated comment in JAAS config")
            at = end + 2
        elif char in "=;":
            tokens.append(char)
            at += 1
        elif char in "\"'":
            value, at = _quoted(text, at)
            tokens.append('"' + value)
        else:
            match = _WORD.match(text, at)
            if match is None:
                raise JaasConfigError(f"Unexpected character '{char}' in JAAS config")
            tokens.append(match.group())
            at = match.end()
    return tokens


def _quoted(text: str, start: int) -> tuple[str, int]:
    quote, at = text[start], start + 1
    out: list[str] = []
    while at < len(text):
        char = text[at]
        if char == quote:
            return "".join(out), at + 1
        if char == "\\" and at + 1 < len(text):
            at += 1
            char = _ESCAPES.get(text[at], text[at])
        out.append(char)
        at += 1
    raise JaasConfigError("Unterminated quoted string in JAAS config")


def parse_jaas_config(text: str) -> list[JaasEntry]:
    tokens = _tokens(text)
    entries: list[JaasEntry] = []
    at = 0
    while at < len(tokens):
        module = tokens[at]
        if module in ("=", ";") or module.startswith('"'):
            raise JaasConfigError("Login module not specified in JAAS config")
        if at + 1 >= len(tokens):
            raise JaasConfigError("Login module control flag not specified in JAAS config")
        flag = tokens[at + 1].lstrip('"')
        if flag.lower() not in _FLAGS:
            raise JaasConfigError(f"Invalid login module control flag '{flag}' in JAAS config")
        at += 2
        options: dict[str, str] = {}
        while at < len(tokens) and tokens[at] != ";":
            key = tokens[at].lstrip('"')
            if at + 2 >= len(tokens) or tokens[at + 1] != "=" or tokens[at + 2] in ("=", ";"):
                raise JaasConfigError(f"Value not specified for key '{key}' in JAAS config")
            options[key] = tokens[at + 2].removeprefix('"')
            at += 3
        if at >= len(tokens):
            raise JaasConfigError("JAAS config entry not terminated by semi-colon")
        at += 1
        entries.append(JaasEntry(module, flag.lower(), MappingProxyType(options)))
    if not entries:
        raise JaasConfigError("Login module not specified in JAAS config")
    return entries


def plain_users(text: str) -> Mapping[str, str]:
    """The users (name -> password) a PLAIN listener's JAAS config names: exactly one
    PlainLoginModule entry, as Kafka requires of a listener-prefixed config."""
    entries = parse_jaas_config(text)
    if len(entries) != 1:
        raise JaasConfigError(
            f"JAAS config property contains {len(entries)} login modules, should be 1 module")
    (entry,) = entries
    if entry.login_module != PLAIN_LOGIN_MODULE:
        raise JaasConfigError(
            f"the login module is {entry.login_module}; PLAIN needs {PLAIN_LOGIN_MODULE}")
    return MappingProxyType({key[len("user_"):]: value for key, value in entry.options.items()
                             if key.startswith("user_") and len(key) > len("user_")})
