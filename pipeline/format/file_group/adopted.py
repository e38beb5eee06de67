"""What the files Apache Hudi wrote before a table was adopted need that their names do not
say: ``.hoodie/.dynbucket/adopted.json``.

dynbucket's names say everything a reader needs (``hudi/files.py``): the bucket in a file
id's first 8 digits, the writing instant in a log's write token. Hudi's file ids are UUIDs
and its write tokens name Spark tasks (``0-26-85``), so adoption (``adoption/adopt.py``)
records, once, each adopted file group's bucket and each adopted log's instant (from its
blocks' headers). The record never changes afterwards (files written after adoption have
dynbucket's names), so a process reads it once per table.

A log with Hudi's write token that the record does not name was written after adoption by
another writer: it is not read (``dynbucket check`` reports it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from dynbucket.format.hudi import files as names
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import ADOPTED_FILE, TABLE_FILE


@dataclass(frozen=True)
class Adopted:
    """The adopted files of a table (empty: not an adopted table, or nothing adopted)."""

    buckets: dict[str, int] = field(default_factory=dict)
    """Adopted file id -> its bucket id (numbered from 0 within each partition)."""
    logs: dict[str, str] = field(default_factory=dict)
    """Adopted log file name -> the instant that wrote it."""
    floor: str = ""
    """The newest instant completed when the table was adopted."""
    replaced: frozenset[str] = frozenset()
    """File ids of the groups a replace commit of Hudi's replaced (clustering, insert
    overwrite): no longer the table's, never read (Hudi's readers skip them by the replace
    commit, which stays on the active timeline)."""
    deduplicated: dict[str, object] = field(default_factory=dict)
    """Adopted with ``deduplicate=True``: its instant, keys, rows removed, groups rewritten
    (``adoption/deduplicate.py``; empty: no key had two live rows)."""
    newest: str = ""
    """The newest instant on the timeline when adoption finished (any action; a
    deduplication's included): undo refuses once a newer one is there."""
    metadata_kept: tuple[str, ...] = ()
    """The metadata table's partitions kept in step from the adoption on."""
    metadata_removed: dict[str, str] = field(default_factory=dict)
    """The metadata table's partitions adoption removed -> why (``adoption/metadata.py``)."""

    def bucket_of(self, file_id: str) -> int:
        """The bucket id of a file group: recorded for an adopted one (-1 for one that was
        replaced), else in its name."""
        bucket = self.buckets.get(file_id)
        if bucket is not None:
            return bucket
        return -1 if file_id in self.replaced else names.bucket_of(file_id)

    def to_json(self) -> bytes:
        doc = {
            "floor": self.floor,
            "buckets": self.buckets,
            "logs": self.logs,
            "replaced": sorted(self.replaced),
            "deduplicated": self.deduplicated,
            "newest": self.newest,
            "metadata_kept": list(self.metadata_kept),
            "metadata_removed": self.metadata_removed,
        }
        return json.dumps(doc, sort_keys=True, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Adopted:
        doc = json.loads(data)
        return cls(
            dict(doc["buckets"]),
            dict(doc["logs"]),
            doc["floor"],
            frozenset(doc["replaced"]),
            dict(doc.get("deduplicated") or {}),
            str(doc.get("newest") or ""),
            tuple(doc.get("metadata_kept") or ()),
            dict(doc.get("metadata_removed") or {}),
        )


NONE = Adopted()
_LOADED: dict[str, Adopted] = caches.per_table({})


def load(store: TableStore) -> Adopted:
    """The adoption record of the table at ``store`` (``NONE`` when it has none)."""
    found = _LOADED.get(store.uri)
    if found is None:
        try:
            found = Adopted.from_json(store.read_bytes(store.path(ADOPTED_FILE)))
        except FileNotFoundError:
            # Adoption writes its record before the table's definition: a table defined
            # without one was created by dynbucket and never has one.
            if not store.exists(store.path(TABLE_FILE)):
                return NONE
            found = NONE
        remember(store, found)
    return found


def forget(store: TableStore) -> None:
    """Drops what :func:`load` remembers of ``store`` (an adoption that did not finish)."""
    _LOADED.pop(store.uri, None)


def remember(store: TableStore, adopted: Adopted) -> None:
    """Sets what :func:`load` answers for ``store`` (adoption, which just wrote it)."""
    if len(_LOADED) > 256:
        _LOADED.clear()
    _LOADED[store.uri] = adopted
