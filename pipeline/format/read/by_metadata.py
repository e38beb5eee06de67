"""Key lookups through Hudi's metadata table: the ``record_index`` partition says where a
key's row is (an HFile key lookup in the key's file group: the index and one block, not a
scan), as Hudi's readers and writers find it.

It answers as of a table's newest instant (the metadata table holds the newest state
only), in the layout its index calls for (``metadata/record_index.py``): a key alone in
the global one, a key in its partition's groups in the partitioned one. A view of an
older instant, one an instant completed beside while the lookup ran, or a record index of
the other layout (written by an older dynbucket) is answered by dynbucket's own index
instead (``Snapshot.lookup``), as is a key whose group the view does not have.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Protocol

import pyarrow as pa

from dynbucket.base.columns import PARTITION
from dynbucket.format.file_group.merge import read_slice_of_keys
from dynbucket.format.file_group.slices import FileSlice
from dynbucket.format.hudi.meta_fields import record_keys
from dynbucket.format.metadata import partitions as metadata_partitions
from dynbucket.format.metadata.reader import RECORD_INDEX, MetadataTable
from dynbucket.format.metadata.records import Location
from dynbucket.format.read.slice_rows import SliceRef, decorate
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import Timeline


class Snapshot(Protocol):
    """What the lookups read of a ``read.snapshot.Snapshot`` (which imports this module)."""

    spec: TableSpec
    store: TableStore
    instant: str | None
    seen: str | None

    def bucket_files(self, partition: str) -> dict[int, FileSlice]: ...


def answers(snapshot: Snapshot) -> bool:
    """Whether the metadata table's record index can answer for ``snapshot``."""
    return (
        snapshot.spec.scheme.index_entries
        and snapshot.instant is not None
        and snapshot.instant == snapshot.seen
        and RECORD_INDEX in metadata_partitions.partitions(snapshot.store)
    )


def lookup(snapshot: Snapshot, wanted: pa.Table, meta_columns: bool) -> list[pa.Table] | None:
    """The rows of ``wanted`` (prepared keys) by the record index, one table per file
    group (``Snapshot.decorate``d); None when the view cannot be answered so."""
    spec, store = snapshot.spec, snapshot.store
    # 1. Each key's location: one HFile key lookup per key, in its group's files.
    keys = record_keys(wanted, spec.record_key).to_pylist()
    table = MetadataTable(store)
    if table.partitioned() != spec.partitioned_record_index:
        return None
    scope = wanted.column(PARTITION).to_pylist() if spec.partitioned_record_index else None
    places: dict[tuple[str | None, str], Location] = {}
    for partition in sorted(set(scope)) if scope is not None else [None]:
        mine = [k for i, k in enumerate(keys) if scope is None or scope[i] == partition]
        places.update(((partition, k), loc) for k, loc in table.lookup(mine, partition).items())
    # 2. Still the newest view (else the index may name a group this view lacks).
    completed = Timeline(store, spec.options.merge_on_read).completed()
    if (completed[-1].id if completed else None) != snapshot.seen:
        return None
    # 3. Per file group, its keys' rows from its slice.
    by_group: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i, key in enumerate(keys):
        place = places.get((scope[i] if scope is not None else None, key))
        if place is not None:
            by_group[(place.partition, place.file_id)].append(i)
    out = []
    for (partition, file_id), rows in sorted(by_group.items()):
        fslice = next(
            (s for s in snapshot.bucket_files(partition).values() if s.file_id == file_id), None
        )
        if fslice is None:
            return None
        mine = wanted.take(pa.array(rows)).select(list(spec.record_key))
        found = read_slice_of_keys(store, spec, fslice, mine, spec.schema.names)
        out.append(
            decorate(spec, SliceRef(partition, fslice), found, spec.schema.names, meta_columns)
        )
    return out
