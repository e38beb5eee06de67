"""What a process keeps of the tables it read, and the one call that forgets a table.

Several rooms cache what a table's files said, so that a write does not read it again:
its timeline layout, its metadata partitions, its adoption record, a file's largest
ordering value. They are keyed by the table's URI or by a file's path under it. A table
deleted and created again at the same path in one process is another table, perhaps of
another version: :func:`forget` drops everything cached under the path, and the places
that learn a table anew (its creation, its opening, its adoption, a task's first use of a
table it was handed) call it first, so that no cache outlives the table it describes.
"""

from __future__ import annotations

from typing import Any, TypeVar

_V = TypeVar("_V")
_CACHES: list[dict[str, Any]] = []


def per_table(cache: dict[str, _V]) -> dict[str, _V]:
    """Registers ``cache`` (keyed by a table's URI, or by the path of a file under a
    table's root) so that :func:`forget` empties it of a table; returns it."""
    _CACHES.append(cache)
    return cache


def forget(uri: str, root: str) -> None:
    """Drops every registered entry of the table at ``uri`` (its files under ``root``)."""
    heads = tuple(f"{p.rstrip('/')}/" for p in {uri, root})
    for cache in _CACHES:
        for key in [k for k in cache if k in (uri, root) or k.startswith(heads)]:
            cache.pop(key, None)
