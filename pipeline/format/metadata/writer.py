"""Writing a table's metadata table: its ``files`` and ``record_index`` partitions kept in
step with the table.

A table of version 9 that dynbucket creates carries Hudi's metadata table with the
``files`` partition (``hoodie.table.metadata.partitions=files,record_index``), so that
Hudi's readers list its files from one file instead of listing storage, and see exactly
the files of completed instants (a stray file in a partition folder is not listed), and
the ``record_index`` partition, each live key's location (``record_index.py``).

1. ``create``: the metadata table's ``hoodie.properties``, its partitions, and their
   initialisation (instant ``00000000000000000``): a base HFile per file group (``files``:
   an empty ``__all_partitions__`` record; ``record_index``: the global layout's 10 empty
   groups, none in the partitioned layout, where a partition's first key makes its own).
2. ``record``: each instant the table completes (a write, a compaction, a replace, a
   clean), just before its completed file is published (``timeline/transaction.py``'s one
   publish): a deltacommit of the same id appending one log file to ``files-0000-0``, an
   HFile data block whose records name, per partition, the files the instant added (with
   sizes) or removed, and the partitions it touched under ``__all_partitions__``; and a log
   file to each ``record_index`` group whose keys it inserted (an HFile data block) or
   deleted (a delete block). An instant that changed neither adds nothing. Publishing
   again (a settler publishing an instant its writer committed) finds the deltacommit
   completed and adds nothing.
3. As base files, by the delta itself, when no other instant is pending (a pending
   instant that committed before this one began and has not published yet would be
   missed by a base written now): the ``files`` group when the rule of ``compaction.py``
   makes it due (one small file: a compaction instant of its own would cost more than
   its rewrite), and a ``record_index`` group the metadata compaction (``compaction.py``,
   a service beside the writes) has not rewritten before it reached
   ``compaction.MAX_LOGS`` logs (the service switched off, or behind); then the slices
   before the previous rewrite are removed (``compaction.retire``).

The metadata table's deltacommit completes before the table's instant; a reader that
finds it completed while the table's instant is not yet skips it (``reader.py``).
"""

from __future__ import annotations

import functools
import os
import posixpath
import zlib
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.threads import shared_pool
from dynbucket.format.hudi import properties
from dynbucket.format.hudi.files import PARTITION_METADATA
from dynbucket.format.hudi.hfile_scan import decoded, key_order
from dynbucket.format.metadata import compaction, files, record_index, records
from dynbucket.format.metadata.files import INIT_INSTANT, Changes, arrays
from dynbucket.format.metadata.partitions import PARTITIONS, note, partitions
from dynbucket.format.metadata.reader import (
    FILES,
    RECORD_INDEX,
    Chunk,
    MetadataTable,
    Slice,
    merge,
    metadata_store,
)
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import HOODIE_DIR
from dynbucket.format.timeline.timeline import COMPLETION_TIME, next_instant_id

__all__ = ["INIT_INSTANT", "create", "record"]

FILE_GROUP = compaction.FILE_GROUP


def metadata_properties(table_name: str) -> dict[str, str]:
    """The metadata table's ``hoodie.properties``, as Hudi 1.1 writes them."""
    name = f"{table_name}_metadata"
    return {
        "hoodie.table.name": name,
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "9",
        "hoodie.table.initial.version": "9",
        "hoodie.timeline.layout.version": "2",
        "hoodie.timeline.path": "timeline",
        "hoodie.timeline.history.path": "history",
        "hoodie.archivelog.folder": "history",
        "hoodie.table.base.file.format": "HFILE",
        "hoodie.table.recordkey.fields": "key",
        "hoodie.table.keygenerator.type": "HOODIE_TABLE_METADATA",
        "hoodie.populate.meta.fields": "false",
        "hoodie.compaction.payload.class": "org.apache.hudi.metadata.HoodieMetadataPayload",
        "hoodie.record.merge.mode": "CUSTOM",
        "hoodie.record.merge.strategy.id": "00000000-0000-0000-0000-000000000000",
        "hoodie.datasource.write.drop.partition.columns": "false",
        "hoodie.table.checksum": str(zlib.crc32(name.encode())),
    }


def create(
    store: TableStore,
    table_name: str,
    kept: tuple[str, ...] = PARTITIONS,
    partitioned: bool = False,
) -> None:
    """Step 1 (module doc): an empty metadata table with the partitions ``kept``; its
    record index in the ``partitioned`` layout (``record_index.py``: no groups until a
    partition's first key) or the global one."""
    mdt = metadata_store(store)
    mdt.write_atomic(
        mdt.path(HOODIE_DIR, "hoodie.properties"),
        properties.dumps(metadata_properties(table_name), "Properties saved by dynbucket"),
    )
    meta = {"commitTime": INIT_INSTANT, "partitionDepth": "1"}
    for partition in kept:
        mdt.write_atomic(
            mdt.path(partition, PARTITION_METADATA), properties.dumps(meta, "partition metadata")
        )
    ours = records.schema_json()
    made = [
        files.base(
            FILES,
            FILE_GROUP,
            INIT_INSTANT,
            arrays({records.ALL_PARTITIONS_KEY: records.all_partitions_record([])}),
            ours,
        )
    ]
    made += [
        files.base(RECORD_INDEX, record_index.group_name(i), INIT_INSTANT, arrays({}), ours)
        for i in range(record_index.FILE_GROUPS if RECORD_INDEX in kept and not partitioned else 0)
    ]
    files.complete(mdt, INIT_INSTANT, files.write(mdt, made), next_instant_id(None))
    note(store, kept)


def record(
    store: TableStore,
    instant: str,
    document: Mapping[str, Any],
    others_pending: Callable[[], bool] = lambda: True,
    index_entries: Mapping[str, pa.Table] | None = None,
) -> None:
    """Steps 2-3 (module doc): the delta of the instant ``instant`` completing with
    ``document`` (Hudi's commit metadata, or dynbucket's record of a clean: ``removed``;
    a metadata compaction's completes it: ``compaction.complete``); ``others_pending``:
    whether another instant of the table is pending; ``index_entries``: the entries of the
    instant's index files by path, where the caller has them in memory."""
    if compaction.WRITTEN in document:
        compaction.complete(store, instant, document)
        return
    mdt = metadata_store(store)
    # The same completion time whoever publishes (a settler too): one completed file.
    completion = str(document.get(COMPLETION_TIME) or instant)
    if mdt.exists(mdt.path(files.TIMELINE, f"{instant}_{completion}.deltacommit")):
        return
    kept = partitions(store)
    # 1. What changed: files added and removed; keys inserted and deleted.
    added, removed = _changes(document)
    keyed = (
        record_index.changes(store, document, index_entries or {})
        if RECORD_INDEX in kept
        else record_index.CHANGES_SCHEMA.empty_table()
    )
    if not (added or removed or keyed.num_rows):
        return
    table = MetadataTable(store)
    slices = compaction.slices(table, kept)
    schema = compaction.schema_of(table, slices)
    # 2. Each touched file group's records: the instant's changes to it (sorted in step 3,
    # each group in a thread).
    changed: dict[tuple[str, str], Callable[[], Changes]] = {}
    if added or removed:
        entries: dict[str, bytes | None] = {
            _key(p): records.files_record(added.get(p, {}), removed.get(p, ()), schema)
            for p in sorted(set(added) | set(removed))
        }
        entries[records.ALL_PARTITIONS_KEY] = records.all_partitions_record(
            [_key(p) for p in added], schema_json=schema
        )
        changed[(FILES, FILE_GROUP)] = functools.partial(arrays, entries)
    if keyed.num_rows:
        codes, names = _record_index_groups(keyed, [g for p, g in slices if p == RECORD_INDEX])
        values = _locations(keyed, schema)
        keys = keyed.column("key").combine_chunks().cast(pa.binary())
        order = np.argsort(codes, kind="stable")  # each group's keys in record order
        bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
        for code, group in enumerate(names):
            if bounds[code] == bounds[code + 1]:
                continue
            at = order[bounds[code] : bounds[code + 1]]
            changed[(RECORD_INDEX, group)] = functools.partial(
                _sorted_changes, keys, values, at, schema
            )
    # 3. Logs, and as bases (when no other instant is pending) the ``files`` group when
    # due and any group at the bound.
    due = _at_bound(slices) | compaction.files_due(slices, schema)
    if due and others_pending():
        due = set()
    elif due:
        # Read again after the question: an instant that completed since it was first read
        # is in what the rewrite merges (else its log would fall in the slice replaced).
        table = MetadataTable(store)
        slices = compaction.slices(table, kept)
        due = _at_bound(slices) | compaction.files_due(slices, schema)
    made = [
        files.base(
            p,
            g,
            instant,
            compaction.merged(table, p, slices[(p, g)], changed.get((p, g), _no_changes)(), schema),
            schema,
        )
        for p, g in sorted(due)
    ]
    # A group's log is sorted, laid out and compressed apart from the others': in threads,
    # as this runs inside the commit (500k new keys in eight groups: 0.35 s in one thread).
    unsorted = [(p, g, sort) for (p, g), sort in sorted(changed.items()) if (p, g) not in due]
    pool = shared_pool("metadata-logs", os.cpu_count() or 1)
    made += pool.map(lambda u: files.log(u[0], u[1], instant, u[2](), schema), unsorted)
    files.complete(mdt, instant, files.write(mdt, made), completion, schema)
    if due:
        compaction.retire(mdt, kept, instant)
    else:
        logs = {(p, g): len(data) for p, g, name, data, _ in made if name.startswith(".")}
        compaction.note(store, slices, logs, schema)


def _no_changes() -> Changes:
    return arrays({})


def _sorted_changes(
    keys: pa.BinaryArray, values: pa.BinaryArray, at: npt.NDArray[np.int64], schema: str
) -> Changes:
    """A group's records ``at``, sorted by key: each key once (a write's keys of one
    partition are), so sorting is the merge, and the keys and values are each taken
    once in that order; a key twice (a move in the global layout: its delete, then its
    insert) goes through :func:`merge`, deletes before inserts, so that the insert wins."""
    taken = keys.take(pa.array(at))
    order = key_order(taken)
    ordered = taken.take(pa.array(order))
    if len(ordered) > 1 and pc.any(pc.equal(ordered[1:], ordered[:-1])).as_py():
        mine_values = decoded(values.take(pa.array(at)))
        mine = merge([Chunk(taken, mine_values, schema)], keep_deletes=True)
        return mine.keys, mine.values
    return ordered, values.take(pa.array(at[order]))


def _at_bound(slices: Mapping[tuple[str, str], Slice]) -> set[tuple[str, str]]:
    """The groups whose slice holds ``compaction.MAX_LOGS`` logs: a reader's bound."""
    return {k for k, s in slices.items() if len(s.logs) >= compaction.MAX_LOGS}


def _record_index_groups(
    keyed: pa.Table, groups: list[str]
) -> tuple[npt.NDArray[np.int64], list[str]]:
    """The record index group of each key of ``keyed`` (``record_index.changes``), as a
    code into the group names it returns, in the layout the existing ``groups`` have
    (``record_index.py``), as many as there are (Hudi sizes them when it builds an index):
    the global layout (a key in one place: a key deleted in one partition and inserted in
    another only moves) or the partitioned one (a new data partition's groups made by its
    first key). A partition of one group (the partitioned layout's own) needs no key's
    hash: its keys are not read into Python (a write of 500k new keys spent 0.1 s there)."""
    counts = Counter(record_index.partition_of(g) for g in groups)
    if None in counts:
        names = [record_index.group_name(i) for i in range(counts[None])]
        keys = keyed.column("key").to_pylist()
        return record_index.group_indexes(keys, counts[None]), names
    partitions = keyed.column("partition").combine_chunks().dictionary_encode()
    of_row = partitions.indices.to_numpy(zero_copy_only=False)
    out = np.empty(len(of_row), np.int64)
    names = []
    for code, partition in enumerate(partitions.dictionary.to_pylist()):
        mine = np.flatnonzero(of_row == code)
        count = counts.get(partition) or record_index.PARTITION_GROUPS
        first = len(names)
        names += [record_index.group_name(i, partition) for i in range(count)]
        if count == 1:
            out[mine] = first
        else:
            keys = keyed.column("key").take(pa.array(mine)).to_pylist()
            out[mine] = first + record_index.group_indexes(keys, count)
    return out, names


def _locations(keyed: pa.Table, schema: str) -> pa.DictionaryArray:
    """Each inserted key's ``record_index`` record (null for a deleted one: no file id),
    dictionary-coded: a write's keys share few (partition, file group, instant), each
    encoded once and never copied per key here (a take of 500k such values took 0.1 s).
    The three columns are coded apart and their codes combined as integers (joining the
    strings first took 0.09 s for 500k keys)."""
    partitions, file_ids, instants = (
        keyed.column(c).combine_chunks() for c in ("partition", "file_id", "instant")
    )
    code = np.zeros(keyed.num_rows, np.int64)
    for column in (partitions, file_ids, instants):
        coded = column.dictionary_encode()  # a null (a delete's file id) codes as 0
        indices = pc.add(coded.indices, 1).fill_null(0).to_numpy()
        code = code * (len(coded.dictionary) + 1) + indices
    gone = pc.is_null(file_ids).to_numpy(zero_copy_only=False)
    _, first, inverse = np.unique(code, return_index=True, return_inverse=True)
    encoded: list[bytes] = []
    for row in first.tolist():
        if gone[row]:
            encoded.append(b"")  # a deleted key's code is null: never read
            continue
        millis = records.instant_millis(str(instants[row].as_py()))
        where = records.Location(str(partitions[row].as_py()), str(file_ids[row].as_py()), millis)
        encoded.append(records.record_index_record(where, schema))
    codes = pa.array(inverse.reshape(-1).astype(np.int32), mask=gone)
    return pa.DictionaryArray.from_arrays(codes, pa.array(encoded, pa.binary()))


def _changes(document: Mapping[str, Any]) -> tuple[dict[str, dict[str, int]], dict[str, list[str]]]:
    """(partition -> file name -> size added, partition -> file names removed)."""
    added: dict[str, dict[str, int]] = {}
    for partition, stats in (document.get("partitionToWriteStats") or {}).items():
        for stat in stats:
            path = stat.get("path")
            if path:
                added.setdefault(partition, {})[posixpath.basename(path)] = int(
                    stat.get("fileSizeInBytes") or 0
                )
    removed: dict[str, list[str]] = {}
    for path in document.get("removed") or ():
        partition, name = posixpath.split(path)
        removed.setdefault(partition, []).append(name)
    return added, removed


def _key(partition: str) -> str:
    return partition or records.NON_PARTITIONED
