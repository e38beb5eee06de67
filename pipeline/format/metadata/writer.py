"""Writing a table's metadata table: its ``files`` partition kept in step with the table.

A table of version 9 that dynbucket creates carries Hudi's metadata table with the
``files`` partition (``hoodie.table.metadata.partitions=files``), so that Hudi's readers
list its files from one file instead of listing storage, and see exactly the files of
completed instants (a stray file in a partition folder is not listed).

1. ``create``: the metadata table's ``hoodie.properties``, the ``files`` partition, and its
   initialisation (instant ``00000000000000000``): a base HFile holding an empty
   ``__all_partitions__`` record.
2. ``record``: each instant the table completes (a write, a compaction, a replace, a
   clean), just before its completed file is published (``timeline/transaction.py``'s one
   publish): a deltacommit of the same id appending one log file to ``files-0000-0``, an
   HFile data block whose records name, per partition, the files the instant added (with
   sizes) or removed, and the partitions it touched under ``__all_partitions__``. An
   instant that changed no data file adds nothing. Publishing again (a settler publishing
   an instant its writer committed) finds the deltacommit completed and adds nothing.
3. Every ``MAX_DELTAS`` deltas, the delta is a whole base file instead (the listing as of
   the instant: the latest slice merged, then the instant's changes), so a reader reads a
   base and at most that many logs, at the ten-thousandth instant as at the tenth. Only
   when no other instant of the table is pending: a pending instant completes with a
   completion time after this one's id (its log then belongs to the new slice), except
   one that committed before this instant began and has not published yet, which a
   base written now would miss (Hudi's metadata compaction waits for the same).
4. After a new base: the slices before the previous one are removed (a reader that
   listed the previous slice still finds its files), and the metadata table's instants
   older than the previous base move to its archived timeline (``lsm_history``), so its
   active timeline stays short too.

The metadata table's deltacommit completes before the table's instant; a reader that
finds it completed while the table's instant is not yet skips it (``reader.py``).
"""

from __future__ import annotations

import posixpath
import zlib
from collections.abc import Callable, Mapping
from typing import Any

from dynbucket.format.hudi import commit_avro, hfile, log_file, lsm_history, properties
from dynbucket.format.hudi.commit import WriteStat, commit_metadata
from dynbucket.format.hudi.files import PARTITION_METADATA
from dynbucket.format.metadata import records
from dynbucket.format.metadata.reader import (
    BASE_NAME,
    FILES,
    LOG_NAME,
    MetadataTable,
    metadata_store,
)
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import HOODIE_DIR
from dynbucket.format.timeline.timeline import COMPLETION_TIME, hudi_instants, next_instant_id

#: The instant that initialises a metadata table's partitions (Hudi's).
INIT_INSTANT = "00000000000000000"
FILE_GROUP = "files-0000-0"
TIMELINE = f"{HOODIE_DIR}/timeline"
#: ``hoodie.table.metadata.partitions`` of the table.
PARTITIONS_PROPERTY = "hoodie.table.metadata.partitions"
#: Deltas (log files) of the ``files`` file group's slice after which the next delta is a
#: whole base file (Hudi: ``hoodie.metadata.compact.max.delta.commits``, 10).
MAX_DELTAS = 10
#: Which stores have a metadata table, learnt from their properties when the table opens.
_ENABLED: dict[str, bool] = {}


def remember(store: TableStore, hoodie: Mapping[str, str]) -> None:
    """Notes whether the table at ``store`` keeps a ``files`` partition (its properties)."""
    if len(_ENABLED) > 1024:
        _ENABLED.clear()
    _ENABLED[store.uri] = FILES in hoodie.get(PARTITIONS_PROPERTY, "").split(",")


def enabled(store: TableStore) -> bool:
    found = _ENABLED.get(store.uri)
    if found is None:
        found = MetadataTable(store).exists()
        _ENABLED[store.uri] = found
    return found


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


def create(store: TableStore, table_name: str) -> None:
    """Step 1 (module doc): an empty metadata table with the ``files`` partition."""
    mdt = metadata_store(store)
    mdt.write_atomic(
        mdt.path(HOODIE_DIR, "hoodie.properties"),
        properties.dumps(metadata_properties(table_name), "Properties saved by dynbucket"),
    )
    mdt.write_atomic(
        mdt.path(FILES, PARTITION_METADATA),
        properties.dumps({"commitTime": INIT_INSTANT, "partitionDepth": "1"}, "partition metadata"),
    )
    content = hfile.write(
        [(records.ALL_PARTITIONS_KEY.encode(), records.all_partitions_record([]))],
        {"schema": records.schema_json().encode()},
    )
    name = f"{FILE_GROUP}_0-0-0_{INIT_INSTANT}.hfile"
    _deltacommit(
        mdt, INIT_INSTANT, name, len(content), 1,
        lambda path: mdt.write_atomic(path, content), next_instant_id(None),
    )  # fmt: skip
    _ENABLED[store.uri] = True


def record(
    store: TableStore,
    instant: str,
    document: Mapping[str, Any],
    others_pending: Callable[[], bool] = lambda: True,
) -> None:
    """Steps 2-4 (module doc): the ``files`` delta of the instant ``instant`` completing
    with ``document`` (Hudi's commit metadata, or dynbucket's record of a clean:
    ``removed``); ``others_pending``: whether another instant of the table is pending."""
    mdt = metadata_store(store)
    # The same completion time whoever publishes (a settler too): one completed file.
    completion = str(document.get(COMPLETION_TIME) or instant)
    if mdt.exists(mdt.path(TIMELINE, f"{instant}_{completion}.deltacommit")):
        return
    added, removed = _changes(document)
    if not added and not removed:
        return
    table = MetadataTable(store)
    current = table.file_groups(FILES).get(FILE_GROUP)
    if current is not None and len(current.logs) >= MAX_DELTAS and not others_pending():
        _rewrite_base(mdt, table, instant, completion, added, removed)
        return
    entries = {
        _key(p): records.files_record(added.get(p, {}), removed.get(p, ()))
        for p in sorted(set(added) | set(removed))
    }
    entries[records.ALL_PARTITIONS_KEY] = records.all_partitions_record([_key(p) for p in added])
    content = hfile.write(
        sorted((k.encode(), v) for k, v in entries.items()),
        {"schema": records.schema_json().encode()},
    )
    block = log_file.hfile_data_block(content, instant, records.schema_json())
    name = f".{FILE_GROUP}_{instant}.log.1_0-{instant}-0"
    _deltacommit(
        mdt, instant, name, len(block), len(entries),
        lambda path: mdt.write_atomic(path, block), completion,
    )  # fmt: skip


def _rewrite_base(
    mdt: TableStore,
    table: MetadataTable,
    instant: str,
    completion: str,
    added: dict[str, dict[str, int]],
    removed: dict[str, list[str]],
) -> None:
    """Step 3 (module doc): the listing as of ``instant`` as a new base file."""
    listing = {_key(p): files for p, files in table.listing().items()}
    for partition, files in added.items():
        listing.setdefault(_key(partition), {}).update(files)
    for partition, names in removed.items():
        for name in names:
            listing.get(_key(partition), {}).pop(name, None)
    entries = {p: records.files_record(files) for p, files in listing.items()}
    entries[records.ALL_PARTITIONS_KEY] = records.all_partitions_record(listing)
    content = hfile.write(
        sorted((k.encode(), v) for k, v in entries.items()),
        {"schema": records.schema_json().encode()},
    )
    name = f"{FILE_GROUP}_0-{instant}-0_{instant}.hfile"
    _deltacommit(
        mdt, instant, name, len(content), len(entries),
        lambda path: mdt.write_atomic(path, content), completion,
    )  # fmt: skip
    _retire(mdt, instant)


def _retire(mdt: TableStore, newest_base: str) -> None:
    """Step 4 (module doc): removes the slices before the previous base and archives the
    metadata table's instants before it."""
    bases = sorted(
        m["instant"]
        for i in mdt.list_files(mdt.path(FILES))
        if (m := BASE_NAME.match(i.base_name)) is not None and m["instant"] <= newest_base
    )
    if len(bases) < 3:
        return
    keep_from = bases[-2]
    for info in mdt.list_files(mdt.path(FILES)):
        m = BASE_NAME.match(info.base_name) or LOG_NAME.match(info.base_name)
        if m is not None and m["instant"] < keep_from:
            mdt.delete(info.path)
    old = [i for i in hudi_instants(mdt) if i.done and i.id < keep_from]
    if not old:
        return
    entries = [
        lsm_history.Entry(
            instant=i.id,
            completion=i.done.partition(".")[0][18:] or i.id,
            action=i.action,
            metadata=mdt.read_bytes(mdt.path(TIMELINE, i.done)),
        )
        for i in old
    ]
    lsm_history.append(mdt, entries)
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
    name: str,
    size: int,
    entries: int,
    write: Callable[[str], None],
    completion: str,
) -> None:
    """A deltacommit of the metadata table: requested, inflight, the file, completed."""
    for state in ("requested", "inflight"):
        mdt.write_atomic(mdt.path(TIMELINE, f"{instant}.deltacommit.{state}"), b"")
    path = mdt.path(FILES, name)
    write(path)
    is_log = name.startswith(".")
    stat = WriteStat(
        partition=FILES,
        file_id=FILE_GROUP,
        path=f"{FILES}/{name}",
        prev_commit=instant,
        num_writes=entries,
        num_inserts=0 if is_log else entries,
        num_updates=entries if is_log else 0,
        num_deletes=0,
        size=size,
        base_file="" if is_log else None,
        log_version=1 if is_log else None,
    )
    doc = commit_metadata([stat], "upsert_prepped", records.schema_json(), {})
    mdt.write_atomic(
        mdt.path(TIMELINE, f"{instant}_{completion}.deltacommit"), commit_avro.encode(doc)
    )
