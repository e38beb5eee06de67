"""Adoption's metadata table step (``adopt.py``, step 6), and its undo.

A Hudi 1.x table (version 8 or 9) keeps its metadata table: from the adoption on,
``metadata/writer.py`` keeps its ``files`` partition and its ``record_index`` in step with
every instant, in Hudi's layout, so Hudi's readers go on listing files from it and Hudi's
writers find every key's location there.

1. **Which partitions stay**: ``files``, and ``record_index`` when its layout is the one
   the table continues with (``metadata/record_index.py``: global for a global dynamic
   bucket index or a table without partitions, partitioned for a partition-scoped index,
   where a key may be in several partitions) and it is whole: exactly the live keys, each
   at its row's partition and file group (the entries the index build just wrote). A version
   6 table's metadata table (another layout), one dynbucket cannot read, and every other
   partition (column and partition statistics, secondary and expression indexes, bloom
   filters: dynbucket's writes do not restate them) go, each with its reason.
2. **What goes is kept aside**: the properties as they were are saved, and each partition
   removed moves, folder and all, under ``.hoodie/.dynbucket/metadata-removed/``; then the
   properties name only the partitions kept (first: a reader never meets a named
   partition without its folder). The reasons go into ``adopted.json`` and the
   command's output.
3. **Undo** (``undo``): while no instant was written since the adoption (the deduplication
   aside, which stays: it is a Hudi commit), the saved properties and the moved folders go
   back and ``.hoodie/.dynbucket/`` goes. After a write, a removed partition would be stale
   (column statistics skipping files they do not describe): undo is refused, naming why.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping

import pyarrow as pa
import pyarrow.fs as pafs

from dynbucket.base.columns import FILE_ID
from dynbucket.base.errors import AdoptionRefusedError, NotAdoptedError
from dynbucket.format.file_group import adopted
from dynbucket.format.hudi import properties
from dynbucket.format.hudi.meta_fields import record_keys
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.metadata import partitions as metadata_partitions
from dynbucket.format.metadata.agreement import disagreement
from dynbucket.format.metadata.reader import FILES, METADATA_DIR, RECORD_INDEX, MetadataTable
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import META_DIR, PROPERTIES_FILE, TABLE_FILE
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import hudi_instants

PARTITIONS_PROPERTY = metadata_partitions.PARTITIONS_PROPERTY
#: Where step 2 keeps what adoption removed: the properties as they were, the folders.
REMOVED_DIR = f"{META_DIR}/metadata-removed"
SAVED_PROPERTIES = f"{REMOVED_DIR}/hoodie.properties"


def keep_metadata_table(
    store: TableStore, spec: TableSpec, hoodie: Mapping[str, str], floor: str
) -> tuple[tuple[str, ...], dict[str, str]]:
    """Steps 1-2 (module doc) for a table whose index was built as of ``floor``; returns
    (the partitions kept, partition -> why it was removed)."""
    if not store.exists(store.path(METADATA_DIR)):
        return (), {}
    saved = store.path(SAVED_PROPERTIES)
    if store.exists(saved):  # an adoption that did not finish changed them: as they were
        before = properties.loads(store.read_bytes(saved))
    else:
        before = dict(hoodie)
        store.write_atomic(saved, store.read_bytes(store.path(PROPERTIES_FILE)))  # as it was
    named = _names(before.get(PARTITIONS_PROPERTY, ""))
    inflight = _names(before.get(f"{PARTITIONS_PROPERTY}.inflight", ""))
    why = _unkept(store, spec, hoodie, floor, named)
    removed = {p: why[p] for p in named if p in why}
    removed |= {p: "its build had not finished" for p in inflight if p not in named}
    kept = tuple(p for p in named if p not in removed)
    if not kept and not removed:
        removed = {"files": "the properties name none of its partitions"}
    props = {**hoodie, PARTITIONS_PROPERTY: ",".join(kept), f"{PARTITIONS_PROPERTY}.inflight": ""}
    store.write_atomic(
        store.path(PROPERTIES_FILE), properties.dumps(props, "Properties saved by dynbucket")
    )
    metadata_partitions.remember(store, props)  # this process's writes see the change
    moved = [METADATA_DIR] if not kept else [f"{METADATA_DIR}/{p}" for p in removed]
    for folder in moved:
        _move_tree(store, folder, f"{REMOVED_DIR}/{folder}")
    return kept, removed


def _move_tree(store: TableStore, source: str, target: str) -> None:
    """Moves the folder ``source`` to ``target`` (paths in the table), file by file (an
    object store has no folders to rename); nothing when ``source`` is not there."""
    if not store.exists(store.path(source)):
        return
    found = store.fs.get_file_info(pafs.FileSelector(store.path(source), recursive=True))
    for info in found:
        if info.type != pafs.FileType.File:
            continue
        relative = posixpath.relpath(info.path, store.path(source))
        destination = store.path(target, relative)
        store.fs.create_dir(posixpath.dirname(destination), recursive=True)
        store.fs.copy_file(info.path, destination)
    store.fs.delete_dir(store.path(source))


def _unkept(
    store: TableStore, spec: TableSpec, hoodie: Mapping[str, str], floor: str, named: list[str]
) -> dict[str, str]:
    """Step 1: partition -> why it goes, for each named one that does."""
    version = hoodie.get("hoodie.table.version", "6")
    ours = {FILES, RECORD_INDEX}
    why = {p: "dynbucket's writes do not keep it in step" for p in named if p not in ours}
    if version not in ("8", "9"):
        return {p: f"a table version {version} metadata table is not continued" for p in named}
    table = MetadataTable(store)
    try:
        indexed = table.record_index_table() if RECORD_INDEX in named else None
        table.listing()
    except Exception as e:  # noqa: BLE001 - any unreadable file: not continued, by name
        return {p: f"dynbucket cannot read it ({e})" for p in named}
    if indexed is not None:
        if table.partitioned() != spec.partitioned_record_index:
            why[RECORD_INDEX] = _LAYOUTS[spec.partitioned_record_index]
        else:
            differ = _differing(store, spec, floor, indexed)
            if differ:
                why[RECORD_INDEX] = f"it is not whole: {differ}"
    return why


#: Why a record index of the other layout goes (``metadata/record_index.py``), by whether
#: the table continues with the partitioned one.
_LAYOUTS = {
    True: (
        "the table continues with a partition-scoped index, where a key may be in several "
        "partitions, and this record index has the global layout, which holds one location "
        "per key (adopt with DynamicBucketIndex(global_index=True) to keep it)"
    ),
    False: (
        "the table continues with a global index (or has no partitions), and this record "
        "index has the partitioned layout (adopt with a partition-scoped index to keep it)"
    ),
}


def _differing(store: TableStore, spec: TableSpec, floor: str, indexed: pa.Table) -> str:
    """How the record index ``indexed`` (``MetadataTable.record_index_table``) differs
    from the live keys the index build found (empty: it does not)."""
    rli = RecordLevelIndex(store, spec)
    live = []
    for partition in rli.partitions():
        entries = rli.record_index_locations(partition, {floor})
        live.append(
            pa.table(
                {
                    "key": record_keys(entries, spec.record_key),
                    "partition": pa.repeat(pa.scalar(partition, pa.string()), entries.num_rows),
                    "file_id": entries.column(FILE_ID),
                }
            )
        )
    columns = ["key", "partition", "file_id"]
    found = pa.concat_tables(live) if live else indexed.select(columns).slice(0, 0)
    return disagreement(found, indexed, spec.partitioned_record_index).said()


def undo(store: TableStore) -> None:
    """Step 3 (module doc): the table as Hudi wrote it, but the deduplication's commit.

    Raises:
        NotAdoptedError: not an adopted table.
        AdoptionRefusedError: an instant was written since the adoption (nothing changed).
    """
    record = adopted.load(store)
    if not store.exists(store.path(TABLE_FILE)) or record == adopted.NONE:
        raise NotAdoptedError(f"{store.uri} is not a table dynbucket adopted; nothing to undo")
    since = [i.id for i in hudi_instants(store) if i.id > record.newest]
    if since:
        raise AdoptionRefusedError(
            f"{store.uri}: cannot undo the adoption: {len(since)} instant(s) were written "
            f"since (e.g. {since[0]}), which the metadata partitions adoption removed do not "
            "describe. Nothing was changed. Keep the table adopted (its metadata table's "
            "files and record_index are kept in step), or rebuild the removed partitions "
            "with Hudi after deleting .hoodie/.dynbucket/"
        )
    saved = store.path(SAVED_PROPERTIES)
    if store.exists(saved):
        if not store.exists(store.path(METADATA_DIR)):
            _move_tree(store, f"{REMOVED_DIR}/{METADATA_DIR}", METADATA_DIR)
        for folder in record.metadata_removed:
            _move_tree(store, f"{REMOVED_DIR}/{METADATA_DIR}/{folder}", f"{METADATA_DIR}/{folder}")
        store.write_atomic(store.path(PROPERTIES_FILE), store.read_bytes(saved))
    store.fs.delete_dir(store.path(META_DIR))
    adopted.forget(store)
    hoodie = properties.loads(store.read_bytes(store.path(PROPERTIES_FILE)))
    metadata_partitions.remember(store, hoodie)


def _names(text: str) -> list[str]:
    return [p for p in (s.strip() for s in text.split(",")) if p]
