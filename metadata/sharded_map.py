"""ShardedMap: an immutable string-keyed mapping whose updates copy a 64th of it.

The image keeps maps with one entry per topic (topics by id and by name, and per broker the
topics whose ISR or leadership it is in). A delta that touches one topic must not copy maps
of 10,000+ entries, so each such map is 64 dicts chosen by a stable hash of the key (CRC32, so
iteration order does not depend on the process's hash seed): an update copies the touched
shards only.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

V = TypeVar("V")

SHARDS = 64
_NO_ENTRIES: dict[Any, Any] = {}  # shared by every empty shard; never written


def _shard_of(key: str) -> int:
    return zlib.crc32(key.encode()) & (SHARDS - 1)


class ShardedMap(Mapping[str, V], Generic[V]):
    __slots__ = ("_len", "_shards")

    def __init__(self, shards: tuple[dict[str, V], ...] | None = None, length: int = 0) -> None:
        self._shards = shards if shards is not None else (_NO_ENTRIES,) * SHARDS
        self._len = length

    def __getitem__(self, key: str) -> V:
        return self._shards[_shard_of(key)][key]

    def get(self, key: str, default: Any = None) -> Any:
        return self._shards[_shard_of(key)].get(key, default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._shards[_shard_of(key)]

    def __iter__(self) -> Iterator[str]:
        for shard in self._shards:
            yield from shard

    def __len__(self) -> int:
        return self._len

    def items(self) -> Any:  # an iterator is enough for every caller, and cheaper
        return (item for shard in self._shards for item in shard.items())

    def values(self) -> Any:
        return (value for shard in self._shards for value in shard.values())

    def updated(self, changes: Mapping[str, V | None]) -> ShardedMap[V]:
        """A new map with `changes` applied (None removes the key); shares untouched shards."""
        if not changes:
            return self
        shards = list(self._shards)
        copied: set[int] = set()
        length = self._len
        for key, value in changes.items():
            index = _shard_of(key)
            if index not in copied:
                shards[index] = dict(shards[index])
                copied.add(index)
            shard = shards[index]
            present = key in shard
            if value is None:
                if present:
                    del shard[key]
                    length -= 1
            else:
                shard[key] = value
                length += not present
        for index in copied:
            if not shards[index]:
                shards[index] = _NO_ENTRIES
        return ShardedMap(tuple(shards), length)

    def __repr__(self) -> str:
        return f"ShardedMap({dict(self.items())!r})"


EMPTY_SHARDED: ShardedMap[Any] = ShardedMap()
