"""Java `.properties` files, read and written the way java.util.Properties does it.

Reading follows `Properties.load`: natural lines end at `\\n`, `\\r` or `\\r\\n`; a line whose
content ends in an odd number of backslashes continues on the next line (whose leading
whitespace is dropped); blank lines and lines whose first non-blank character is `#` or `!`
are skipped (a comment never continues); the key ends at the first unescaped `=`, `:` or
whitespace, and one `=`/`:` plus surrounding whitespace separate it from the value; escapes
are `\\t \\n \\r \\f \\uXXXX` and `\\<any>` for that character. Leading whitespace of a value
is dropped, trailing whitespace is kept. A later duplicate key overrides an earlier one.

One deliberate difference: files are decoded as UTF-8 (Java's `load(InputStream)` uses
ISO-8859-1). ASCII files, which is what `Properties.store` writes, read the same either way.

Writing follows `Properties.store`: output is pure ASCII, anything outside printable ASCII
becomes `\\uXXXX`, and `= : # !`, backslashes, control characters and spaces (all of them in
keys, leading ones in values) are escaped, so the file reads back to the same mapping.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from typing import NamedTuple

_WHITESPACE = " \t\f"
_NEWLINE = re.compile(r"\r\n|\r|\n")
_SIMPLE_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")


class PropertiesError(ValueError):
    """A properties file that cannot be read; names the file and the (first) line."""

    def __init__(self, source: str, line: int, reason: str) -> None:
        super().__init__(f"{source}:{line}: {reason}")
        self.source = source
        self.line = line
        self.reason = reason


class PropertyEntry(NamedTuple):
    """One `key=value` of a file, with the line its logical line starts on."""

    key: str
    value: str
    line: int


def parse_entries(text: str, source: str = "<string>") -> list[PropertyEntry]:
    """Every entry of `text` in file order, duplicates included."""
    entries: list[PropertyEntry] = []
    for start_line, logical in _logical_lines(text):
        key_raw, value_raw = _split_key_value(logical)
        key = _unescape(key_raw, source, start_line)
        value = _unescape(value_raw, source, start_line)
        entries.append(PropertyEntry(key, value, start_line))
    return entries


def parse_properties(text: str, source: str = "<string>") -> dict[str, str]:
    """The mapping `text` defines, in order of first appearance; the last duplicate wins."""
    return {entry.key: entry.value for entry in parse_entries(text, source)}


def read_entries(path: str | os.PathLike[str]) -> list[PropertyEntry]:
    """`parse_entries` of a UTF-8 file. OSError (e.g. FileNotFoundError) propagates."""
    source = os.fspath(path)
    with open(source, "rb") as file:
        data = file.read()
    return parse_entries(_decode(data, source), source)


def load_properties(path: str | os.PathLike[str]) -> dict[str, str]:
    """`parse_properties` of a UTF-8 file. OSError (e.g. FileNotFoundError) propagates."""
    return {entry.key: entry.value for entry in read_entries(path)}


def format_properties(props: Mapping[str, str], comments: Iterable[str] = ()) -> str:
    """The text `Properties.store` would write: each comment line as `#line`, then one
    `key=value` line per entry, in the mapping's order. Unlike `store`, no date line is added
    (pass it as a comment), so the output is deterministic."""
    lines = ["#" + _escape_comment(comment) for comment in comments]
    lines.extend(
        _escape(key, escape_all_spaces=True) + "=" + _escape(value, escape_all_spaces=False)
        for key, value in props.items()
    )
    return "".join(line + "\n" for line in lines)


# -- reading ---------------------------------------------------------------------------------


def _decode(data: bytes, source: str) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise PropertiesError(source, line, "the file is not valid UTF-8") from None
    # A BOM would otherwise become part of the first key.
    return text.removeprefix("\ufeff")


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """(first line number, content) of each logical line, continuations joined."""
    buffer: list[str] = []
    start_line = 0
    continuing = False
    for number, natural in enumerate(_NEWLINE.split(text), start=1):
        content = natural.lstrip(_WHITESPACE)
        if not continuing:
            if not content or content[0] in "#!":
                continue
            start_line = number
            buffer = []
        trailing = len(content) - len(content.rstrip("\\"))
        continuing = trailing % 2 == 1
        buffer.append(content[:-1] if continuing else content)
        if not continuing:
            yield start_line, "".join(buffer)
    if continuing:
        # Java drops the dangling backslash at end of file and keeps the line.
        yield start_line, "".join(buffer)


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped separator, as `Properties.load0` does."""
    key_end = len(line)
    value_start = len(line)
    has_separator = False
    backslash = False
    for index, char in enumerate(line):
        if not backslash and char in "=:":
            key_end, value_start, has_separator = index, index + 1, True
            break
        if not backslash and char in _WHITESPACE:
            key_end, value_start = index, index + 1
            break
        backslash = char == "\\" and not backslash
    while value_start < len(line):
        char = line[value_start]
        if char not in _WHITESPACE:
            if has_separator or char not in "=:":
                break
            has_separator = True
        value_start += 1
    return line[:key_end], line[value_start:]


def _unescape(raw: str, source: str, line: int) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    index = 0
    while index < len(raw):
        char = raw[index]
        index += 1
        if char != "\\" or index >= len(raw):
            out.append(char)
            continue
        char = raw[index]
        index += 1
        if char == "u":
            digits = raw[index : index + 4]
            if len(digits) != 4 or not set(digits) <= _HEX_DIGITS:
                raise PropertiesError(
                    source, line, f"malformed \\uXXXX escape \\u{digits} (need 4 hex digits)"
                )
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_SIMPLE_ESCAPES.get(char, char))
    return _join_surrogates("".join(out), source, line)


def _join_surrogates(text: str, source: str, line: int) -> str:
    """Java strings are UTF-16: `\\uD83D\\uDE00` is one character, a lone half is garbage."""
    if not any("\ud800" <= char <= "\udfff" for char in text):
        return text
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        raise PropertiesError(
            source, line, "a \\uD800-\\uDFFF escape is not part of a surrogate pair"
        ) from None


# -- writing ---------------------------------------------------------------------------------


def _escape(text: str, *, escape_all_spaces: bool) -> str:
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char == " ":
            out.append("\\ " if escape_all_spaces or index == 0 else " ")
        elif char in "\t\n\r\f":
            out.append({"\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[char])
        elif char in "=:#!":
            out.append("\\" + char)
        elif " " < char <= "~":
            out.append(char)
        else:
            out.append(_unicode_escape(char))
    return "".join(out)


def _escape_comment(comment: str) -> str:
    # A newline inside a comment starts a new comment line rather than a key.
    text = "\n#".join(_NEWLINE.split(comment))
    return "".join(
        char if char == "\n" or " " <= char <= "~" else _unicode_escape(char) for char in text
    )


def _unicode_escape(char: str) -> str:
    """`\\uXXXX` per UTF-16 code unit, upper-case hex, as Java writes it."""
    units = char.encode("utf-16-be", "surrogatepass")
    return "".join(
        f"\\u{int.from_bytes(units[i : i + 2], 'big'):04X}" for i in range(0, len(units), 2)
    )
