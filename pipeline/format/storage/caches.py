"""What a process keeps of the tables it read, and the one call that forgets a table.

Several rooms cache what a table's files said, so that a write does not read it again:
its timeline layout, its metadata partitions, its adoption record, a file's largest
ordering value. They are keyed by the table's URI or by a file's path under it. A table
deleted and created again at the same path in one process is another table, perhaps of
another version: :func:`forget` drops everything cached under the path, and the places
that learn a table anew (its creation, its opening, its adoption, a task's first use of a
table it was handed) call it first, so that no cache outlives the table it describes.
What is kept up to a size or a count is a :class:`Kept`, one rule of least recently
used out for every room.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from typing import Any, Generic, TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")
_C = TypeVar("_C")
#: Every cache ``per_table`` registered: a dict, or a :class:`Kept` (each iterates its
#: keys and pops one).
_CACHES: list[Any] = []


class Kept(Generic[_K, _V]):
    """What a process keeps of what it read from files that never change once written
    (a completed instant's, an index file's, a data file's: a log Hudi appended to is a
    larger file, so a key holds the size): the least recently used go once the kept
    values' sizes sum past ``limit``; ``size`` measures a value (1 each by default: a
    count); a value larger than ``largest`` is returned, not kept.

    Any thread may use it (a write's groups are written in threads). A value is read
    outside the lock: two threads that miss one key at once both read it, and the first
    kept is what both return after."""

    def __init__(
        self,
        limit: int,
        size: Callable[[_V], int] = lambda _: 1,
        largest: int | None = None,
    ) -> None:
        self.limit, self.size, self.largest = limit, size, largest
        self._kept: OrderedDict[_K, tuple[_V, int]] = OrderedDict()
        self._total = 0
        self._lock = threading.Lock()

    def get(self, key: _K) -> _V | None:
        """The value kept under ``key`` (None: none), now the most recently used."""
        with self._lock:
            found = self._kept.get(key)
            if found is None:
                return None
            self._kept.move_to_end(key)
            return found[0]

    def put(self, key: _K, value: _V) -> _V:
        """Keeps ``value`` under ``key`` (unless another thread kept one first, or it is
        larger than ``largest``) and returns what is kept."""
        size = self.size(value)
        if self.largest is not None and size > self.largest:
            return value
        with self._lock:
            found = self._kept.get(key)
            if found is not None:
                return found[0]
            self._kept[key] = (value, size)
            self._total += size
            while self._total > self.limit and self._kept:
                self._total -= self._kept.popitem(last=False)[1][1]
        return value

    def read(self, key: _K, load: Callable[[], _V]) -> _V:
        """The value kept under ``key``, else what ``load`` returns, kept."""
        found = self.get(key)
        return found if found is not None else self.put(key, load())

    def pop(self, key: _K, default: _V | None = None, /) -> _V | None:
        """Forgets ``key``; returns its value (``default``: none was kept)."""
        with self._lock:
            found = self._kept.pop(key, None)
            if found is None:
                return default
            self._total -= found[1]
            return found[0]

    def clear(self) -> None:
        with self._lock:
            self._kept.clear()
            self._total = 0

    def __iter__(self) -> Iterator[_K]:
        with self._lock:
            return iter(list(self._kept))

    def __len__(self) -> int:
        return len(self._kept)


def per_table(cache: _C) -> _C:
    """Registers ``cache`` (a dict or a :class:`Kept`, keyed by a table's URI, or by the
    path of a file under a table's root) so that :func:`forget` empties it of a table;
    returns it."""
    _CACHES.append(cache)
    return cache


def forget(uri: str, root: str) -> None:
    """Drops every registered entry of the table at ``uri`` (its files under ``root``)."""
    heads = tuple(f"{p.rstrip('/')}/" for p in {uri, root})
    for cache in _CACHES:
        for key in [k for k in cache if k in (uri, root) or k.startswith(heads)]:
            cache.pop(key, None)
