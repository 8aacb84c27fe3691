"""Kafka's ConfigDef: the one way a configuration key is declared.

A `ConfigKey` is one key: its name, Kafka's type, its default as the raw text a file or an
AlterConfigs request would hold (None: no value), a parser from that text to the typed value,
and its documentation. A `ConfigDef` is an ordered set of keys for one kind of resource, each
name defined once, as in Kafka: the node's own config file (`server/config_keys.py`), and the
dynamic broker and topic configs the controller stores (`metadata/configs.py`). A parser raises
`InvalidValue` with the reason; the caller writes the message around it (the node config's
one-line errors, Kafka's ConfigException wording on the wire).

A key is also a typed descriptor: as a class attribute of a config object with `values` (name
-> parsed value) it reads its own value, so `NodeConfig.election_timeout_ms` is the key
`controller.quorum.election.timeout.ms` itself, with its type, and nothing is copied by hand.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Generic, Protocol, TypeVar, overload

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
_INT_RANGE = (-(2**31), INT_MAX)
_LONG_RANGE = (-(2**63), LONG_MAX)
_INTEGER = re.compile(r"[+-]?[0-9]+")  # what Java's Integer.valueOf / Long.valueOf accept
_LIST_SEPARATOR = re.compile(r"\s*,\s*")  # ConfigDef.COMMA_WITH_WHITESPACE


class ConfigType(IntEnum):
    """Kafka's ConfigDef.Type, numbered as DescribeConfigsResponse.ConfigType numbers it."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7
    PASSWORD = 9


class InvalidValue(ValueError):
    """A value a parser refuses. str() is the reason; `shown` is the value the message should
    name when it is not the text as given (Kafka names the parsed number, or the list entry
    that is wrong)."""

    def __init__(self, reason: str, shown: str | None = None) -> None:
        super().__init__(reason)
        self.shown = shown


class HasValues(Protocol):
    """A config object: the parsed value of each of its keys, by name."""

    @property
    def values(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True, eq=False)
class ConfigKey(Generic[T_co]):
    """One key. `parse` turns the raw text into the typed value or raises InvalidValue (a
    plain ValueError is taken as one too). `valid_values` says in words what it accepts."""

    name: str
    type: ConfigType
    default: str | None
    parse: Callable[[str], T_co]
    doc: str
    valid_values: str = ""
    required: bool = False
    internal: bool = False  # for tests and tools: never suggested for a misspelt key
    synonym: str | None = None  # a topic key's broker-level name (Kafka's LogConfig synonyms)

    @overload
    def __get__(self, obj: None, owner: Any = None) -> ConfigKey[T_co]: ...

    @overload
    def __get__(self, obj: HasValues, owner: Any = None) -> T_co: ...

    def __get__(self, obj: HasValues | None, owner: Any = None) -> ConfigKey[T_co] | T_co:
        if obj is None:
            return self
        value: T_co = obj.values[self.name]
        return value


class ConfigDef(Mapping[str, ConfigKey[Any]]):
    """An ordered set of keys for one kind of resource; a name is defined once."""

    def __init__(self) -> None:
        self._keys: dict[str, ConfigKey[Any]] = {}

    def define(
        self,
        name: str,
        type_: ConfigType,
        default: str | None,
        parse: Callable[[str], T],
        doc: str,
        *,
        valid_values: str = "",
        required: bool = False,
        internal: bool = False,
        synonym: str | None = None,
    ) -> ConfigKey[T]:
        if name in self._keys:
            raise ValueError(f"configuration key {name} is defined twice")
        key = ConfigKey(name, type_, default, parse, doc, valid_values, required, internal,
                        synonym)
        self._keys[name] = key
        return key

    def define_kafka(
        self,
        name: str,
        type_: ConfigType,
        default: str,
        doc: str,
        *,
        at_least: int | None = None,
        valid_list: Sequence[str] | None = None,
        synonym: str | None = None,
    ) -> ConfigKey[Any]:
        """A key checked as Kafka's ConfigDef checks it, with its messages (dynamic configs:
        they go back to the client as they are)."""
        parse = kafka_parser(type_, at_least=at_least, valid_list=valid_list)
        if at_least is not None:
            valid = f"[{at_least},...]"
        elif valid_list is not None:
            valid = ", ".join(valid_list)
        else:
            valid = ""
        return self.define(name, type_, default, parse, doc, valid_values=valid,
                           synonym=synonym)

    def __getitem__(self, name: str) -> ConfigKey[Any]:
        return self._keys[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)


# -- parsers ----------------------------------------------------------------------------------


def split_list(raw: str) -> list[str]:
    """Kafka's LIST: comma-separated, whitespace around the commas dropped; an empty value is
    an empty list. An empty entry (`a,,b`) is kept as ""; the caller decides about it."""
    text = raw.strip()
    return _LIST_SEPARATOR.split(text) if text else []


def integer(lo: int, hi: int = INT_MAX, note: str = "") -> tuple[str, Callable[[str], int]]:
    """(description, parser) of an integer in [lo, hi] with the node config's messages, which
    say what to write; hi at the type's limit reads `>= lo`."""
    unbounded = hi in (INT_MAX, LONG_MAX)
    description = f"an integer >= {lo}" if unbounded else f"an integer between {lo} and {hi}"
    if note:
        description += f" ({note})"

    def parse(raw: str) -> int:
        text = raw.strip()
        if not _INTEGER.fullmatch(text):
            raise InvalidValue(f"must be {description}")
        value = int(text)
        if value > hi and unbounded:  # only the type's limit was exceeded: name it
            raise InvalidValue(f"must be an integer between {lo} and {hi}")
        if not lo <= value <= hi:
            raise InvalidValue(f"must be {description}")
        return value

    return description, parse


def boolean(raw: str) -> bool:
    """`true` or `false`, any case (the node config's message)."""
    text = raw.strip().lower()
    if text not in ("true", "false"):
        raise InvalidValue("must be true or false")
    return text == "true"


def java_integer(text: str, type_: ConfigType = ConfigType.INT) -> int | None:
    """What Java's Integer.parseInt (Long.parseLong for LONG) reads in `text`, or None."""
    low, high = _INT_RANGE if type_ is ConfigType.INT else _LONG_RANGE
    if _INTEGER.fullmatch(text) is None or not low <= int(text) <= high:
        return None
    return int(text)


def kafka_parser(
    type_: ConfigType, *, at_least: int | None = None, valid_list: Sequence[str] | None = None
) -> Callable[[str], Any]:
    """Kafka's ConfigDef.parseType, then the key's validator (Range.atLeast, ValidList.in),
    with Kafka's messages."""

    def parse(value: str) -> Any:
        trimmed = value.strip()
        if type_ in (ConfigType.INT, ConfigType.LONG):
            number = java_integer(trimmed, type_)
            if number is None:
                raise InvalidValue(f"Not a number of type {type_.name}")
            if at_least is not None and number < at_least:
                # The validator sees the parsed number, so "+07" reads back as 7.
                raise InvalidValue(f"Value must be at least {at_least}", str(number))
            return number
        if type_ is ConfigType.BOOLEAN:
            if trimmed.lower() not in ("true", "false"):
                raise InvalidValue("Expected value to be either true or false")
            return trimmed.lower() == "true"
        if type_ is ConfigType.LIST:
            parts = split_list(value)
            if valid_list is not None:
                for part in parts:
                    if part not in valid_list:
                        raise InvalidValue("String must be one of: " + ", ".join(valid_list),
                                           part)
            return parts
        return trimmed

    return parse
