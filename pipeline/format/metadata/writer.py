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
3. A file group is rewritten as a whole base file (its records as of the instant: the
   latest slice merged, then the instant's changes; Hudi's metadata compaction) once it
   holds ``MAX_DELTAS`` logs whose records' bytes reach ``LOG_RATIO`` of its base's (a
   file's bytes less those of a file of one record: the record schema, twice in a log, is
   most of a small one, and counted would make a group due every ``MAX_DELTAS`` writes
   however large its base), or ``SOFT_LOGS`` logs whatever their size. So a base of many
   keys is rewritten once per that fraction of it written, and the work per write is that
   of the write's own records, not the index's size, until writes of few keys per group
   take ``SOFT_LOGS`` logs to reach it: from then on a group is rewritten about every
   ``SOFT_LOGS`` writes that touch it, a thirtieth of the group per write. A reader merges
   a base and at most ``MAX_LOGS`` logs, at the ten-thousandth instant as at the tenth.
   One ``record_index`` group is rewritten per instant (the one with the most logs), or as
   many as rewrite every group due before the first reaches ``MAX_LOGS`` (any there
   too), so that the groups of partitions written together are not all rewritten in one
   write. Only
   when no other instant of the table is pending: a pending instant completes with a
   completion time after this one's id (its log then belongs to the new slice), except
   one that committed before this instant began and has not published yet, which a
   base written now would miss (Hudi's metadata compaction waits for the same).
4. After such a rewrite: each file group's slices before its previous one are removed (a
   reader that listed the previous slice still finds its files), and the metadata
   table's instants before the previous rewrite move to its archived timeline
   (``lsm_history``), so its active timeline stays short too (a base of an archived
   instant still counts: readers take archived instants as completed).

The metadata table's deltacommit completes before the table's instant; a reader that
finds it completed while the table's instant is not yet skips it (``reader.py``).
"""

from __future__ import annotations

import functools
import itertools
import posixpath
import zlib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.format.hudi import commit_avro, hfile, log_file, lsm_history, properties
from dynbucket.format.hudi.commit import WriteStat, commit_metadata
from dynbucket.format.hudi.files import PARTITION_METADATA
from dynbucket.format.metadata import record_index, records
from dynbucket.format.metadata.reader import (
    BASE_NAME,
    FILES,
    LOG_NAME,
    RECORD_INDEX,
    Chunk,
    MetadataTable,
    merge,
    metadata_store,
)
from dynbucket.format.storage.store import TableStore, WriteBatch
from dynbucket.format.table.paths import HOODIE_DIR, PROPERTIES_FILE
from dynbucket.format.timeline.timeline import COMPLETION_TIME, hudi_instants, next_instant_id

#: The instant that initialises a metadata table's partitions (Hudi's).
INIT_INSTANT = "00000000000000000"
FILE_GROUP = "files-0000-0"
TIMELINE = f"{HOODIE_DIR}/timeline"
#: ``hoodie.table.metadata.partitions`` of the table.
PARTITIONS_PROPERTY = "hoodie.table.metadata.partitions"
#: The partitions a table dynbucket creates in version 9 keeps.
PARTITIONS = (FILES, RECORD_INDEX)
#: Logs a file group's slice takes before the next delta may rewrite it as a base (Hudi:
#: ``hoodie.metadata.compact.max.delta.commits``, 10), once they are ``LOG_RATIO`` of its
#: base's bytes; at ``MAX_LOGS`` logs, whatever their bytes.
MAX_DELTAS = 10
LOG_RATIO = 0.2
MAX_LOGS = 40
#: Logs at which a group is due whatever their bytes, though rewritten in turn (``_bounded``):
#: the groups of partitions written together reach it together, and are spread over the
#: ``MAX_LOGS - SOFT_LOGS`` writes before ``MAX_LOGS``, which would rewrite them all in one.
SOFT_LOGS = 30
#: ``record_index`` groups one instant rewrites at least, of those due (``_bounded``).
REWRITES_PER_INSTANT = 1
#: The metadata partitions of each store, learnt from its properties when the table opens.
_PARTITIONS: dict[str, frozenset[str]] = {}


def remember(store: TableStore, hoodie: Mapping[str, str]) -> None:
    """Notes which metadata partitions the table at ``store`` keeps (its properties)."""
    if len(_PARTITIONS) > 1024:
        _PARTITIONS.clear()
    named = hoodie.get(PARTITIONS_PROPERTY, "").split(",")
    # Version 6's metadata table is another layout, which this writer does not keep.
    layout_2 = hoodie.get("hoodie.table.version", "6") not in ("6", "7")
    _PARTITIONS[store.uri] = frozenset(p for p in PARTITIONS if p in named and layout_2)


def partitions(store: TableStore) -> frozenset[str]:
    """The metadata partitions this writer keeps in step for the table at ``store``."""
    found = _PARTITIONS.get(store.uri)
    if found is None:
        try:
            remember(store, properties.loads(store.read_bytes(store.path(PROPERTIES_FILE))))
        except (FileNotFoundError, OSError):
            return frozenset()
        found = _PARTITIONS[store.uri]
    return found


def enabled(store: TableStore) -> bool:
    return FILES in partitions(store)


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


#: A file the metadata table's instant writes: (partition, file group, name, bytes, records).
_File = tuple[str, str, str, bytes, int]


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
    files = [_base(FILES, FILE_GROUP, INIT_INSTANT, _arrays({
        records.ALL_PARTITIONS_KEY: records.all_partitions_record([])}), ours)]  # fmt: skip
    files += [
        _base(RECORD_INDEX, record_index.group_name(i), INIT_INSTANT, _arrays({}), ours)
        for i in range(record_index.FILE_GROUPS if RECORD_INDEX in kept and not partitioned else 0)
    ]
    _deltacommit(mdt, INIT_INSTANT, files, next_instant_id(None))
    _PARTITIONS[store.uri] = frozenset(kept)


def record(
    store: TableStore,
    instant: str,
    document: Mapping[str, Any],
    others_pending: Callable[[], bool] = lambda: True,
) -> None:
    """Steps 2-4 (module doc): the delta of the instant ``instant`` completing with
    ``document`` (Hudi's commit metadata, or dynbucket's record of a clean: ``removed``);
    ``others_pending``: whether another instant of the table is pending."""
    mdt = metadata_store(store)
    # The same completion time whoever publishes (a settler too): one completed file.
    completion = str(document.get(COMPLETION_TIME) or instant)
    if mdt.exists(mdt.path(TIMELINE, f"{instant}_{completion}.deltacommit")):
        return
    kept = partitions(store)
    # 1. What changed: files added and removed; keys inserted and deleted.
    added, removed = _changes(document)
    keyed = (
        record_index.changes(store, document)
        if RECORD_INDEX in kept
        else record_index.CHANGES_SCHEMA.empty_table()
    )
    if not (added or removed or keyed.num_rows):
        return
    table = MetadataTable(store)
    slices = {(p, g): s for p in kept for g, s in table.file_groups(p).items()}
    # Records in the schema the metadata table was written with (Hudi 1.0's is older):
    # a reader resolves a slice's blocks to one schema.
    schema = table.writer_schema(slices.get((FILES, FILE_GROUP))) or records.schema_json()
    # 2. Each touched file group's records: the instant's changes to it.
    changed: dict[tuple[str, str], _Changes] = {}
    if added or removed:
        entries: dict[str, bytes | None] = {
            _key(p): records.files_record(added.get(p, {}), removed.get(p, ()), schema)
            for p in sorted(set(added) | set(removed))
        }
        entries[records.ALL_PARTITIONS_KEY] = records.all_partitions_record(
            [_key(p) for p in added], schema_json=schema
        )
        changed[(FILES, FILE_GROUP)] = _arrays(entries)
    if keyed.num_rows:
        groups = _record_index_groups(keyed, [g for p, g in slices if p == RECORD_INDEX])
        values = _locations(keyed, schema)
        keys = keyed.column("key").combine_chunks().cast(pa.binary())
        for group in np.unique(groups):
            at = pa.array(np.flatnonzero(groups == group))
            # Deletes before inserts: where a key is both (moved), the insert wins.
            mine = merge(
                [Chunk(keys.take(at), values.take(at), schema)],
                keep_deletes=True,
            )
            changed[(RECORD_INDEX, str(group))] = (mine.keys, mine.values)
    # 3. Logs, and the groups due (when no other instant is pending) rewritten as bases.
    overhead = _overhead(schema)
    due = {k for k, s in slices.items() if _due(s, overhead)}
    if due and others_pending():
        due = set()
    elif due:
        # Read again after the question: an instant that completed since it was first read
        # is in what the rewrite merges (else its log would fall in the slice replaced).
        table = MetadataTable(store)
        slices = {(p, g): s for p in kept for g, s in table.file_groups(p).items()}
        due = _bounded({k for k, s in slices.items() if _due(s, overhead)}, slices)
    files = [
        _base(
            p,
            g,
            instant,
            _merged(table, p, slices[(p, g)], changed.get((p, g), _arrays({})), schema),
            schema,
        )  # fmt: skip
        for p, g in sorted(due)
    ]
    files += [
        _log(p, g, instant, changes, schema)
        for (p, g), changes in sorted(changed.items())
        if (p, g) not in due
    ]
    _deltacommit(mdt, instant, files, completion, schema)
    if due:
        _retire(mdt, kept, instant)


#: A file group's changes: keys ascending and their records (null: the key is deleted).
_Changes = tuple[pa.BinaryArray, pa.BinaryArray]


def _record_index_groups(keyed: pa.Table, groups: list[str]) -> npt.NDArray[np.str_]:
    """The record index group of each key of ``keyed`` (``record_index.changes``), in the
    layout the existing ``groups`` have (``record_index.py``), as many as there are (Hudi
    sizes them when it builds an index): the global layout (a key in one place: a key
    deleted in one partition and inserted in another only moves) or the partitioned one (a
    new data partition's groups made by its first key)."""
    counts = Counter(record_index.partition_of(g) for g in groups)
    keys = keyed.column("key").to_pylist()
    if None in counts:
        names = np.array([record_index.group_name(i) for i in range(counts[None])])
        return names[record_index.group_indexes(keys, counts[None])]
    partitions = keyed.column("partition").combine_chunks().dictionary_encode()
    out = np.empty(len(keys), object)
    for code, partition in enumerate(partitions.dictionary.to_pylist()):
        mine = np.flatnonzero(partitions.indices.to_numpy() == code)
        count = counts.get(partition) or record_index.PARTITION_GROUPS
        names = np.array([record_index.group_name(i, partition) for i in range(count)])
        out[mine] = names[record_index.group_indexes([keys[i] for i in mine], count)]
    return out.astype(str)


def _locations(keyed: pa.Table, schema: str) -> pa.BinaryArray:
    """Each inserted key's ``record_index`` record (null for a deleted one), each distinct
    location encoded once: a write's keys share few (partition, file group, instant)."""
    # NUL joins them: no path (partition folder, file name) or instant id can hold one.
    coded = pc.binary_join_element_wise(
        *(keyed.column(c).combine_chunks() for c in ("partition", "file_id", "instant")),
        "\x00",
        null_handling="emit_null",
    ).dictionary_encode()
    encoded = [
        records.record_index_record(
            records.Location(partition, file_id, records.instant_millis(instant)), schema
        )
        for partition, file_id, instant in (d.split("\x00") for d in coded.dictionary.to_pylist())
    ]
    return pa.array(encoded, pa.binary()).take(coded.indices)


def _bounded(
    due: set[tuple[str, str]], slices: Mapping[tuple[str, str], Any]
) -> set[tuple[str, str]]:
    """Step 3's bound: of the ``record_index`` groups due, those with the most logs, one
    per instant or as many as rewrite them all before the first reaches ``MAX_LOGS`` (a
    write adds a log to each), and any at ``MAX_LOGS``. The groups of partitions written
    together fill together: rewritten in one instant, their rewrites add up in one write
    (the soak's slowest writes, one group's rewrite per partition); spread so, each write
    pays one or a few, the others waiting their turn."""
    groups = sorted(
        (k for k in due if k[0] == RECORD_INDEX),
        key=lambda k: (-len(slices[k].logs), -slices[k].logs_size, k),
    )
    most = len(slices[groups[0]].logs) if groups else 0
    per_instant = max(REWRITES_PER_INSTANT, -(-len(groups) // max(1, MAX_LOGS - most)))
    return (
        {k for k in due if k[0] != RECORD_INDEX}
        | set(groups[:per_instant])
        | {k for k in groups if len(slices[k].logs) >= MAX_LOGS}
    )


def _due(file_slice: Any, overhead: tuple[int, int]) -> bool:
    """Step 3's rule (module doc); ``overhead``: the bytes of a base and of a log of one
    record, what a file carries whatever its records."""
    logs = len(file_slice.logs)
    if logs >= MAX_LOGS:
        return True
    base = max(0, file_slice.base_size - overhead[0]) if file_slice.base else 0
    records = sum(max(0, size - overhead[1]) for size in file_slice.log_sizes)
    return logs >= MAX_DELTAS and (records >= LOG_RATIO * base or logs >= SOFT_LOGS)


@functools.lru_cache(maxsize=8)
def _overhead(schema: str) -> tuple[int, int]:
    """The bytes of a base and of a log of one tiny record in ``schema``: the headers and
    the schema every file carries (step 3 counts the bytes beyond them)."""
    one = (pa.array([b"k"], pa.binary()), pa.array([b"v"], pa.binary()))
    return (
        len(_base(RECORD_INDEX, "g", INIT_INSTANT, one, schema)[3]),
        len(_log(RECORD_INDEX, "g", INIT_INSTANT, one, schema)[3]),
    )


def _merged(
    table: MetadataTable,
    partition: str,
    file_slice: Any,
    changes: _Changes,
    schema: str,
) -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """A file group's records as of now (its slice merged), then ``changes`` applied (in
    ``schema``, the metadata table's): keys ascending and their values."""
    ours = Chunk(*changes, schema)
    if partition != FILES:  # the record index: a group of many keys, merged as Arrow
        live = merge(
            [*table.merged(partition, file_slice).chunks(), ours] if file_slice else [ours]
        )
        return live.keys, live.values
    listings: dict[str, dict[str, int]] = {}
    slice_records = table.slice_records(partition, file_slice) if file_slice else iter(())
    ours_records = (
        (key.decode(), value, schema)
        for key, value in zip(changes[0].to_pylist(), changes[1].to_pylist(), strict=True)
    )
    for key, value, written in itertools.chain(slice_records, ours_records):
        if value is not None:
            records.merge_listing(listings.setdefault(key, {}), value, written)
    names = sorted(k for k in listings if k != records.ALL_PARTITIONS_KEY)
    merged = {k: records.files_record(listings[k], schema_json=schema) for k in names}
    merged[records.ALL_PARTITIONS_KEY] = records.all_partitions_record(names, schema_json=schema)
    return _arrays(merged)


def _arrays(entries: Mapping[str, bytes | None]) -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """``entries`` as Arrow, keys ascending (None: a delete's null value)."""
    ordered = sorted(entries)
    return (
        pa.array([k.encode() for k in ordered], pa.binary()),
        pa.array([entries[k] for k in ordered], pa.binary()),
    )


def _base(
    partition: str,
    group: str,
    instant: str,
    entries: tuple[pa.BinaryArray, pa.BinaryArray],
    schema: str,
) -> _File:
    keys, values = entries
    content = hfile.write_arrays(keys, values, {"schema": schema.encode()})
    return partition, group, f"{group}_0-{instant}-0_{instant}.hfile", content, len(keys)


def _log(partition: str, group: str, instant: str, changes: _Changes, schema: str) -> _File:
    """A log of ``changes``: an HFile data block of the records, a delete block of the
    keys gone (null values)."""
    keys, values = changes
    valid = pc.is_valid(values)
    kept = pc.filter(keys, valid), pc.filter(values, valid)
    gone = [k.decode() for k in pc.filter(keys, pc.invert(valid)).to_pylist()]
    blocks = []
    if len(kept[0]):
        content = hfile.write_arrays(*kept, {"schema": schema.encode()})
        blocks.append(log_file.hfile_data_block(content, instant, schema))
    if gone:
        blocks.append(log_file.delete_block(gone, [partition] * len(gone), ("int", 0), instant))
    name = f".{group}_{instant}.log.1_0-{instant}-0"
    return partition, group, name, b"".join(blocks), len(keys)


def _retire(mdt: TableStore, kept: Iterable[str], newest: str) -> None:
    """Step 4 (module doc): each file group's slices before its previous one removed; the
    metadata table's instants before the previous rewrite archived."""
    rewrites: set[str] = set()
    for partition in kept:
        names = [i for i in mdt.list_files(mdt.path(partition))]
        bases: dict[str, list[str]] = {}
        for info in names:
            m = BASE_NAME.match(info.base_name)
            if m is not None and m["instant"] <= newest:
                bases.setdefault(m["file_id"], []).append(m["instant"])
        for group, found in bases.items():
            found.sort()
            rewrites.update(found[1:])
            if len(found) < 3:
                continue
            keep_from = found[-2]
            for info in names:
                m = BASE_NAME.match(info.base_name) or LOG_NAME.match(info.base_name)
                if m is not None and m["file_id"] == group and m["instant"] < keep_from:
                    mdt.delete(info.path)
    previous = sorted(r for r in rewrites if r < newest)
    if not previous:
        return
    old = [i for i in hudi_instants(mdt) if i.done and i.id < previous[-1]]
    if not old:
        return
    lsm_history.append(
        mdt,
        [
            lsm_history.Entry(
                instant=i.id,
                completion=i.done.partition(".")[0][18:] or i.id,
                action=i.action,
                metadata=mdt.read_bytes(mdt.path(TIMELINE, i.done)),
            )
            for i in old
        ],
    )
    for i in old:  # the completed file last: a crash in between leaves it whole
        for state in sorted(i.files, key=lambda n: n == i.done):
            mdt.delete(mdt.path(TIMELINE, state))


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


def _deltacommit(
    mdt: TableStore,
    instant: str,
    files: list[_File],
    completion: str,
    schema: str | None = None,
) -> None:
    """A deltacommit of the metadata table: requested, inflight, its files (published
    together: one wait for the disk, not one per file group), completed."""
    for state in ("requested", "inflight"):
        mdt.write_atomic(mdt.path(TIMELINE, f"{instant}.deltacommit.{state}"), b"")
    batch = WriteBatch(mdt)
    try:
        for partition, _group, name, data, _entries in files:
            batch.write_file(mdt.path(partition, name), data)
        batch.publish()
    except BaseException:
        batch.discard()
        raise
    stats = []
    for partition, group, name, data, entries in files:
        is_log = name.startswith(".")
        stats.append(
            WriteStat(
                partition=partition,
                file_id=group,
                path=f"{partition}/{name}",
                prev_commit=instant,
                num_writes=entries,
                num_inserts=0 if is_log else entries,
                num_updates=entries if is_log else 0,
                num_deletes=0,
                size=len(data),
                base_file="" if is_log else None,
                log_version=1 if is_log else None,
            )
        )
    doc = commit_metadata(stats, "upsert_prepped", schema or records.schema_json(), {})
    mdt.write_atomic(
        mdt.path(TIMELINE, f"{instant}_{completion}.deltacommit"), commit_avro.encode(doc)
    )
