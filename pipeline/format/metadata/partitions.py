"""Which partitions of Hudi's metadata table a table keeps: named in its
``hoodie.properties`` (``hoodie.table.metadata.partitions``), noted per table when it opens.

Light on purpose: loading a table's definition (``table/spec.py``) notes them, and must not
load the metadata table's reader and writer (HFile, Avro, the record index) to do it.
"""

from __future__ import annotations

from collections.abc import Mapping

from dynbucket.format.hudi import properties
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import PROPERTIES_FILE

FILES, RECORD_INDEX = "files", "record_index"
#: ``hoodie.table.metadata.partitions`` of the table.
PARTITIONS_PROPERTY = "hoodie.table.metadata.partitions"
#: The partitions a table dynbucket creates in version 9 keeps.
PARTITIONS = (FILES, RECORD_INDEX)
#: The metadata partitions of each store, learnt from its properties when the table opens.
_PARTITIONS: dict[str, frozenset[str]] = caches.per_table({})


def remember(store: TableStore, hoodie: Mapping[str, str]) -> None:
    """Notes which metadata partitions the table at ``store`` keeps (its properties)."""
    if len(_PARTITIONS) > 1024:
        _PARTITIONS.clear()
    named = hoodie.get(PARTITIONS_PROPERTY, "").split(",")
    # Version 6's metadata table is another layout, which the writer does not keep.
    layout_2 = hoodie.get("hoodie.table.version", "6") not in ("6", "7")
    _PARTITIONS[store.uri] = frozenset(p for p in PARTITIONS if p in named and layout_2)


def note(store: TableStore, kept: tuple[str, ...]) -> None:
    """Notes that the table at ``store`` keeps ``kept`` (its metadata table just made)."""
    _PARTITIONS[store.uri] = frozenset(kept)


def partitions(store: TableStore) -> frozenset[str]:
    """The metadata partitions the writer keeps in step for the table at ``store``."""
    found = _PARTITIONS.get(store.uri)
    if found is None:
        try:
            remember(store, properties.loads(store.read_bytes(store.path(PROPERTIES_FILE))))
        except (FileNotFoundError, OSError):
            return frozenset()
        found = _PARTITIONS[store.uri]
    return found


def enabled(store: TableStore) -> bool:
    """Whether the table keeps a metadata table (its ``files`` partition) in step."""
    return FILES in partitions(store)
