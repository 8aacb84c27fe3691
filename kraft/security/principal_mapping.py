"""`ssl.principal.mapping.rules` (KIP-371): how a certificate's RFC 2253 subject becomes the
principal's name.

The value is a comma-separated list of `DEFAULT` (the DN unchanged) and
`RULE:<regex>/<replacement>/[L|U]` (`\\/` for a `/` inside either part). The first rule whose
regex matches the *whole* DN names the principal: every match of the regex in the DN is
replaced (Java's `String.replaceAll`), `$n` naming a group, and L/U lower- or upper-case the
result. When no rule matches, the caller is refused, as Kafka fails the login.

Splitting and parsing follow Kafka's SslPrincipalMapper grammar, so a list Kafka accepts
splits into the same rules here and one Kafka refuses is refused. The regexes are Python's
`re`, which reads the usual Java constructs alike. Two deliberate differences, each about a
rule that could only fail at login in Kafka: a reference to a group the regex does not have
is literal text (Kafka's intent, which it misses when the regex has no group at all), and a
`$` not followed by a digit is refused here at load instead of at every login.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

DEFAULT_RULES = "DEFAULT"

# Kafka's grammar: DEFAULT | RULE:pattern/replacement/[LU] | anything else (refused below).
_RULE = r"(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?).*?|(.*?)"
# Java's \s is ASCII whitespace; re.ASCII keeps Python's the same.
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(?:,\s*|$)", re.ASCII)
_PARSER = re.compile(_RULE, re.ASCII)
# Java's String.trim(): every char up to U+0020.
_JAVA_TRIM = "".join(chr(c) for c in range(0x21))


class NoMatchingRule(Exception):
    """No rule names this DN: the connection is refused."""


@dataclass(frozen=True)
class MappingRule:
    """One rule; `pattern` None is DEFAULT. `replacement` is `replacement_text` parsed:
    literal text and group numbers."""

    text: str
    pattern: re.Pattern[str] | None = None
    replacement_text: str = ""
    replacement: tuple[str | int, ...] = ()
    case: str = ""  # "L", "U" or ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(self._expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def _expand(self, match: re.Match[str]) -> str:
        return "".join(part if isinstance(part, str) else (match.group(part) or "")
                       for part in self.replacement)


@dataclass(frozen=True)
class PrincipalMapper:
    rules: tuple[MappingRule, ...]

    def name(self, dn: str) -> str:
        """The principal name of `dn`; NoMatchingRule when no rule applies."""
        for rule in self.rules:
            result = rule.apply(dn)
            if result is not None:
                return result
        raise NoMatchingRule(
            f"no ssl.principal.mapping.rules rule matches {dn!r} "
            f"(rules: {', '.join(r.text for r in self.rules) or 'none'})")

    @property
    def can_refuse(self) -> bool:
        """Whether some DN matches no rule (no DEFAULT in the list)."""
        return all(rule.pattern is not None for rule in self.rules)


def parse_mapping_rules(text: str | None) -> PrincipalMapper:
    """The mapper of a `ssl.principal.mapping.rules` value (None: the default). Raises
    ValueError naming the bad rule."""
    if text is None:
        text = DEFAULT_RULES
    rules = []
    for match in _SPLITTER.finditer(text.strip(_JAVA_TRIM)):
        rule = _parse_rule(match.group(1))
        if rule is not None:
            rules.append(rule)
    return PrincipalMapper(tuple(rules))


def _parse_rule(text: str) -> MappingRule | None:
    match = _PARSER.match(text)
    assert match is not None  # the last alternative matches anything, even nothing
    if match.end() != len(text):
        extra = f" ('{text[match.end():]}' is too much)" if match.end() else ""
        raise ValueError(
            f"invalid rule '{text}'{extra}: write DEFAULT or RULE:<regex>/<replacement>/, "
            "optionally with L or U after the last / (a / inside either part is \\/)")
    if match.group(1) is not None:
        return MappingRule("DEFAULT")
    if match.group(2) is None:
        return None  # an empty entry, ignored as Kafka does
    try:
        pattern = re.compile(match.group(2))
    except re.error as exc:
        raise ValueError(f"rule '{text}' has an invalid regular expression: {exc}") from None
    replacement = _parse_replacement(text, match.group(3), pattern.groups)
    return MappingRule(text, pattern, match.group(3), replacement, match.group(4))


def _parse_replacement(rule: str, raw: str, groups: int) -> tuple[str | int, ...]:
    """Java's replacement syntax: `\\c` is c; `$` and digits name a group, taking digits
    while the number stays a group of the regex."""
    parts: list[str | int] = []
    literal: list[str] = []
    i = 0
    while i < len(raw):
        char = raw[i]
        if char == "\\":  # the grammar guarantees a character follows
            literal.append(raw[i + 1])
            i += 2
            continue
        if char != "$":
            literal.append(char)
            i += 1
            continue
        if i + 1 == len(raw) or raw[i + 1] not in "0123456789":
            raise ValueError(
                f"rule '{rule}': a $ in the replacement must be followed by a group number "
                "($1); write \\$ for a dollar sign")
        group = int(raw[i + 1])
        if group > groups:  # no such group: the text stays as written
            literal.append("$")
            i += 1
            continue
        i += 2
        while i < len(raw) and raw[i] in "0123456789" and group * 10 + int(raw[i]) <= groups:
            group = group * 10 + int(raw[i])
            i += 1
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(group)
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


DEFAULT_MAPPER = parse_mapping_rules(DEFAULT_RULES)
