"""What archival leaves for readers and writers: the archive record in force.

``.hoodie/.dynbucket/archive/<floor>.json``, one per archival (``archive.py``); the newest
is in force. Readers need it to see the files of archived instants (every instant up to the
floor was completed, except those it lists as rolled back); writers need each stream's
last batch and the slot counts of archived commits.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import ARCHIVE_DIR


@dataclass(frozen=True)
class Archived:
    """What the archived instants leave for readers and writers (empty: none archived)."""

    floor: str = ""
    """The newest archived instant: every instant up to it is archived."""
    rolled_back: frozenset[str] = frozenset()
    """Archived-range instants that were rolled back (their leftover files are not data)."""
    streams: dict[str, int] = field(default_factory=dict)
    """Stream id -> the last batch id an archived commit of it wrote."""
    slots: frozenset[Any] = frozenset()
    """The slot counts archived commits were written with (None: in process)."""
    earliest_retained: str | None = None
    """The largest cleaning horizon among archived cleans."""
    instants: int = 0
    """How many instants were archived, in all."""
    deletes: dict[str, int] = field(default_factory=dict)
    """``<partition>/<file id>`` -> delete records archived commits wrote into the group
    (``dynbucket check`` weighs index entries without a live row against them)."""

    def to_json(self) -> bytes:
        doc = {
            "floor": self.floor,
            "rolled-back": sorted(self.rolled_back),
            "streams": self.streams,
            "slots": sorted(self.slots, key=lambda s: (s is None, s)),
            "earliest-retained": self.earliest_retained,
            "instants": self.instants,
            "deletes": self.deletes,
        }
        return json.dumps(doc, sort_keys=True, indent=1).encode()

    @classmethod
    def from_json(cls, data: bytes) -> Archived:
        doc = json.loads(data)
        return cls(
            doc["floor"],
            frozenset(doc.get("rolled-back", [])),
            dict(doc.get("streams", {})),
            frozenset(doc.get("slots", [])),
            doc.get("earliest-retained"),
            int(doc.get("instants", 0)),
            dict(doc.get("deletes", {})),
        )


_LOADED: caches.Kept[tuple[str, str], Archived] = caches.Kept(256)


def load(store: TableStore) -> Archived:
    """The archive record in force (the newest), or an empty one."""
    names = [
        i.base_name
        for i in store.list_files(store.path(ARCHIVE_DIR))
        if i.base_name.endswith(".json") and not i.base_name.startswith(".")
    ]
    if not names:
        return Archived()
    newest = max(names)
    key = (store.uri, newest)
    found = _LOADED.get(key)
    if found is not None:
        return found
    try:
        data = store.read_bytes(store.path(ARCHIVE_DIR, newest))
    except FileNotFoundError:  # a newer archival replaced it since the listing
        return load(store)
    return _LOADED.put(key, Archived.from_json(data))
