"""The ``record_index`` partition of Hudi's metadata table: where each live key is.

Hudi's layout (``HoodieTableMetadataUtil``): a fixed number of file groups
``record-index-<i, 4 digits>-0``, a key in group ``|(|h| % n)|`` where ``h`` is Java's
``String.hashCode`` of the record key (``f:v,f:v`` for several key fields); a key's record
holds its data partition, file id and the instant that inserted it (``records.Location``).
Only inserts and deletes change it: an update stays where the key is.

What an instant changes is what it added to dynbucket's own index: its index files (named
in its commit, ``index-files``) hold an insert entry per new key and a tombstone per
deleted key, with the key fields, the file id and the instant, per data partition.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.base.columns import DELETE, FILE_ID, HASH, INSTANT, OP
from dynbucket.format.hudi.commit import extra_of
from dynbucket.format.hudi.meta_fields import record_keys
from dynbucket.format.metadata import records
from dynbucket.format.metadata.records import Location
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import RLI_DIR

#: File groups of the partition (Hudi's ``hoodie.metadata.record.index.min.filegroup.count``).
FILE_GROUPS = 10


def group_name(index: int) -> str:
    return f"record-index-{index:04d}-0"


def group_of(key: str, count: int = FILE_GROUPS) -> int:
    """The file group of ``key``: Hudi's ``Math.abs(Math.abs(h) % n)`` of Java's
    ``String.hashCode`` ``h`` (UTF-16 code units, 32-bit wrapping); whatever the sign
    Java gives the remainder, its absolute value is ``|h| mod n``."""
    h = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return abs(signed) % count


def changes(
    store: TableStore, document: Mapping[str, Any]
) -> tuple[dict[str, Location], list[str]]:
    """(key -> its new location, keys deleted) by the index files the instant of
    ``document`` wrote (deletes first: a key that moved partitions is inserted again)."""
    inserted: dict[str, Location] = {}
    deleted: list[str] = []
    for path in extra_of(document).get("index-files", []) or []:
        partition = posixpath.dirname(posixpath.relpath(path, RLI_DIR))
        partition = "" if partition == "." else partition
        entries = pq.read_table(store.path(path))
        if entries.num_rows == 0:
            continue
        fields: Sequence[str] = entries.column_names[: entries.column_names.index(HASH)]
        keys = record_keys(entries, fields).to_pylist()
        gone = pc.equal(entries.column(OP), DELETE).to_pylist()
        file_ids = entries.column(FILE_ID).to_pylist()
        instants = entries.column(INSTANT).to_pylist()
        places: dict[tuple[str, str], Location] = {}  # one per file group and instant
        for key, is_delete, file_id, instant in zip(keys, gone, file_ids, instants, strict=True):
            if is_delete:
                deleted.append(key)
                continue
            place = places.get((file_id, instant))
            if place is None:
                millis = records.instant_millis(instant)
                place = places[(file_id, instant)] = Location(partition, file_id, millis)
            inserted[key] = place
    return inserted, [k for k in deleted if k not in inserted]
