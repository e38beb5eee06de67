"""Adoption: a table Apache Hudi wrote becomes a dynbucket table in place.

Most users start with Hudi tables; adoption keeps every data file where Hudi put it and
adds only what is dynbucket's, under ``.hoodie/.dynbucket/``, but for the metadata table
partitions it does not continue (step 6) and, when asked, a deduplication (step 5)
(``Table.undo_adoption`` undoes it; Hudi's readers see nothing new):

1. **Gate.** The table must be one dynbucket can continue in its own version: Hudi table
   version 6 (timeline layout 1), Parquet base files, record keys and partition paths as
   dynbucket spells them (checked on every adopted row in step 5), nothing pending on the
   timeline (a Hudi write, compaction, clustering or clean left pending is Hudi's to
   finish or roll back). Anything else is refused by name, before anything is written.
2. **Definition.** Name, keys, partition fields, table type and meta fields from
   ``hoodie.properties``; the schema the newest commit wrote with (else the one the table
   was created with), without the meta fields; the precombine field (version 9: the
   ordering field) as ordering field, unless the table orders by commit time (its merge
   mode says so, or, version 6, its payload overwrites with the latest record, which Hudi
   1.x takes as that mode).
3. **Files** (``adopted.json``, ``file_group/adopted.py``): every file group becomes a
   bucket, numbered from 0 per partition in the order of their file ids, but those a
   completed replace commit (clustering, insert overwrite) replaced, which are no longer
   read; every log's writing instant is read from its first block's header.
4. **History.** Instants Hudi archived stay archived: an archive record whose floor is
   just before the active timeline (Hudi's own rule: a file older than the active
   timeline is committed), or at the newest replace commit (whose files dynbucket's
   timeline sees through the floor: history before it is Hudi's readers' to read), with
   the cleaning horizon at the newest instant when Hudi cleaned or archived (files its
   commits list may be gone).
5. **Deduplication**, asked for (``deduplicate.py``): a key with more than one live row
   keeps the row with the largest ordering value (ties: the latest commit), the others
   removed in one instant of new file slices. Not asked for, such a table is refused in
   step 5b, by the option's name.
5b. **Index** (``build_index.py``). The record-level index, one base file per partition
   under the newest completed instant, from the live keys of every slice, in threads or
   tasks on a cluster; each key's record key and partition path are checked against what
   dynbucket would write for it, each key has one live row, and a bucket index's keys are
   where its hash puts them (such a table gets no index).
6. **Metadata table** (``metadata.py``). A version 8 or 9 table's is kept and continued
   (its ``files`` partition, and its ``record_index`` when whole and the index global);
   what is not continued goes aside under ``.hoodie/.dynbucket/``, named with its reason
   in ``adopted.json`` and the command's output, and undo puts it back.
7. **Commit.** ``table.json`` is created last and exclusively: until it is there the table
   is not adopted (a crashed adoption is run again; its files are rewritten the same).
"""

from __future__ import annotations

import logging
import uuid
from collections import defaultdict
from dataclasses import replace

import pyarrow as pa
import pyarrow.fs as pafs

from dynbucket.base.beside import Beside
from dynbucket.base.errors import ConcurrentWriteError, NotATableError, TableExistsError
from dynbucket.base.options import DynamicBucketIndex, IndexOptions, SimpleBucketIndex
from dynbucket.format.adoption.build_index import build_index, in_threads, refused
from dynbucket.format.adoption.deduplicate import find_duplicates, rewrite_duplicates
from dynbucket.format.adoption.metadata import keep_metadata_table
from dynbucket.format.buckets.scheme import scheme_of
from dynbucket.format.file_group import adopted
from dynbucket.format.hudi import avro_read, log_file, properties, versions
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi.instant_files import HudiAction
from dynbucket.format.hudi.lsm_history import HISTORY_DIR
from dynbucket.format.hudi.meta_fields import META_FIELDS
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.options import HUDI_TABLE_PROPERTIES, TableOptions
from dynbucket.format.table.paths import (
    ADOPTED_FILE,
    ARCHIVE_DIR,
    HOODIE_DIR,
    META_DIR,
    PROPERTIES_FILE,
    RLI_DIR,
    TABLE_FILE,
)
from dynbucket.format.table.spec import (
    TableSpec,
    adopted_precombine,
    hive_style,
    ordering_of,
    timestamp_partitioning,
)
from dynbucket.format.timeline.archive_record import Archived
from dynbucket.format.timeline.lock import WriterLock
from dynbucket.format.timeline.timeline import (
    LAYOUT_2_DIR,
    Timeline,
    document_of,
    hudi_instants,
    layout_of,
    remember_layout,
)

log = logging.getLogger(__name__)

#: Hudi 1.x's key generator types (``hoodie.table.keygenerator.type``) -> their classes.
_KEY_GENERATOR_TYPES = {
    "SIMPLE": "SimpleKeyGenerator",
    "COMPLEX": "ComplexKeyGenerator",
    "NON_PARTITION": "NonpartitionedKeyGenerator",
    "TIMESTAMP": "TimestampBasedKeyGenerator",
    "CUSTOM": "CustomKeyGenerator",
}
#: Hudi's actions that write data files (an adopted table's files come from these).
_DATA_WRITES = (HudiAction.COMMIT, HudiAction.DELTA_COMMIT, HudiAction.REPLACE_COMMIT)
#: Where Hudi archives instants in timeline layout 1 (layout 2: ``HISTORY_DIR``).
ARCHIVED_DIR = f"{HOODIE_DIR}/archived"
#: Key generators whose record keys and partition paths dynbucket spells the same.
_KEY_GENERATORS = (
    "SimpleKeyGenerator",
    "ComplexKeyGenerator",
    "NonpartitionedKeyGenerator",
    "TimestampBasedKeyGenerator",
)


def adopt(
    store: TableStore,
    bucket_options: IndexOptions | None,
    options: dict[str, str] | None = None,
    slots: int = 1,
    beside: Beside | None = None,
    deduplicate: bool = False,
) -> TableSpec:
    """Adopts the Hudi table at ``store`` (module doc); returns its definition.

    Args:
        store: the table's folder.
        bucket_options: the bucket index the table continues with (None: Hudi's bucket
            index with its count when its properties name one, else the dynamic index).
        options: dynbucket's own table options (services, lease), as properties.
        slots: the slot count the index files are grouped by (the writes' slot count).
        beside: runs the index build's tasks (default: threads of this process).
        deduplicate: a key with more than one live row keeps one (step 5); else such a
            table is refused.

    Raises:
        NotATableError: no Hudi table there.
        TableExistsError: already a dynbucket table.
        AdoptionRefusedError: a table dynbucket cannot continue yet (the message says why);
            nothing was written.
    """
    if store.exists(store.path(TABLE_FILE)):
        raise TableExistsError(f"{store.uri} is already a dynbucket table; open it")
    try:
        hoodie = properties.loads(store.read_bytes(store.path(PROPERTIES_FILE)))
    except FileNotFoundError as e:
        raise NotATableError(
            f"{store.uri} holds no Hudi table (no {PROPERTIES_FILE}); create a table with "
            "Table.create"
        ) from e
    _gate(store, hoodie)  # 1.
    # One adoption at a time, under the table's writer lease: a second one beside it
    # touches nothing (it deleted the first one's files, or rewrote its index).
    lock = WriterLock(store)
    try:
        lock.acquire()
    except ConcurrentWriteError as e:
        raise ConcurrentWriteError(
            f"another process is adopting {store.uri} ({e}); open the table once it is done"
        ) from e
    try:
        if store.exists(store.path(TABLE_FILE)):
            raise TableExistsError(f"another process adopted {store.uri} just now; open it")
        spec = _adopt(store, hoodie, bucket_options, options, slots, beside, deduplicate, lock)
    except BaseException:
        lock.release()
        # Nothing of a refused or failed adoption stays: its lease file neither (only its
        # own generation: another adopter may hold the next one).
        if lock.generation is not None:
            _remove(store, lock.path(lock.generation))
        store.remove_empty_dirs([store.path(META_DIR)])
        raise
    lock.release()
    return spec


def _adopt(
    store: TableStore,
    hoodie: dict[str, str],
    bucket_options: IndexOptions | None,
    options: dict[str, str] | None,
    slots: int,
    beside: Beside | None,
    deduplicate: bool,
    lock: WriterLock,
) -> TableSpec:
    """Steps 2-7 (module doc), under the lease."""
    caches.forget(store.uri, store.root)
    remember_layout(store, int(hoodie[versions.TIMELINE_LAYOUT]))
    timeline = Timeline(store, hoodie.get("hoodie.table.type") == "MERGE_ON_READ")
    completed = timeline.completed()
    if bucket_options is None:
        bucket_options = _index_of(store, hoodie)
    if not scheme_of(bucket_options).adoptable:
        raise refused(
            store,
            "consistent hashing places keys by its own ring, which no Hudi table was written with",
            "Adopt it with the dynamic bucket index, or a simple bucket index of its count",
        )
    spec = _definition(store, hoodie, timeline, bucket_options, options or {})  # 2.
    replaces = _replace_commits(store)
    floor = max([i.id for i in completed] + list(replaces), default="")
    _partition_folders_explained(store, spec)
    record = _files(store, floor, replaces, spec.scheme.file_ids_numbered)  # 3.
    _newest_files_there(store, hoodie, set(record.replaced))
    written = [store.path(ADOPTED_FILE), store.path(ARCHIVE_DIR), store.path(RLI_DIR)]
    beside = beside or in_threads()
    try:
        store.write_atomic(store.path(ADOPTED_FILE), record.to_json())
        adopted.remember(store, record)
        _history(store, timeline, floor, replaces)  # 4.
        found = find_duplicates(store, spec, beside) if floor and deduplicate else None
        if found:  # 5.
            done = rewrite_duplicates(store, spec, lock, found)
            floor = done.instant
            record = replace(record, deduplicated=done.to_json())
        if floor:
            build_index(store, spec, floor, slots, beside)  # 5b.
    except BaseException:
        # What steps 3-5 wrote goes: a refused table is left as it was (a crash leaves
        # them under .hoodie/.dynbucket/, without table.json: adopt again, or delete it).
        adopted.forget(store)
        for path in written:
            _remove(store, path)
        raise
    kept, removed = keep_metadata_table(store, spec, hoodie, floor)  # 6.
    newest = max((i.id for i in hudi_instants(store)), default="")
    record = replace(record, newest=newest, metadata_kept=kept, metadata_removed=removed)
    store.write_atomic(store.path(ADOPTED_FILE), record.to_json())
    adopted.remember(store, record)
    if timeline.layout == 2 and not store.exists(store.path(LAYOUT_2_DIR)):
        # Every process tells the layout by this folder: a version-8 table with no
        # instant yet may not have it.
        store.fs.create_dir(store.path(LAYOUT_2_DIR))
    if not store.create_exclusive(store.path(TABLE_FILE), spec.to_json()):  # 7.
        raise TableExistsError(f"another process adopted {store.uri} just now; open it")
    return spec


def _gate(store: TableStore, hoodie: dict[str, str]) -> None:
    """Step 1 (module doc): refuses what dynbucket cannot continue."""
    unknown = versions.unsupported(hoodie, store.exists(store.path(versions.LAYOUT_2_TIMELINE)))
    if unknown is not None:
        raise refused(
            store,
            f"it is a {unknown} table; dynbucket adopts Hudi table versions 6 (timeline "
            "layout 1), 8 and 9 (layout 2)",
            "Read it with a Hudi reader, or write its rows into a new dynbucket table",
        )
    for key in ("hoodie.table.name", "hoodie.table.type"):
        if not hoodie.get(key):
            raise refused(
                store,
                f"its {PROPERTIES_FILE} has no {key}",
                f"Restore {PROPERTIES_FILE} (Hudi writes {key} when it creates a table)",
            )
    if hoodie["hoodie.table.type"] not in ("MERGE_ON_READ", "COPY_ON_WRITE"):
        raise refused(
            store,
            f"its hoodie.table.type is {hoodie['hoodie.table.type']!r}",
            "Set it to MERGE_ON_READ or COPY_ON_WRITE, as the table was written",
        )
    if hoodie["hoodie.table.type"] == "COPY_ON_WRITE":
        merged = [h.files[-1] for h in hudi_instants(store) if h.action == HudiAction.DELTA_COMMIT]
        if merged:
            raise refused(
                store,
                f"its properties say COPY_ON_WRITE, but its timeline holds delta commits "
                f"({', '.join(merged[:2])}): it was written merge-on-read, and its logs "
                "would not be read",
                "Set hoodie.table.type=MERGE_ON_READ in .hoodie/hoodie.properties",
            )
    base_format = hoodie.get("hoodie.table.base.file.format", "PARQUET").upper()
    if base_format != "PARQUET":
        raise refused(
            store, f"its base files are {base_format}", "dynbucket reads Parquet base files"
        )
    keygen = _key_generator(hoodie)
    if keygen and keygen not in _KEY_GENERATORS:
        raise refused(
            store,
            f"its key generator is {keygen}, whose record keys or partition paths dynbucket "
            f"does not spell (it spells those of {', '.join(_KEY_GENERATORS)})",
            "Write its rows into a new dynbucket table",
        )
    if hoodie.get("hoodie.datasource.write.partitionpath.urlencode", "false") == "true":
        raise refused(
            store,
            "its partition paths are URL-encoded (hoodie.datasource.write.partitionpath."
            "urlencode=true)",
            "Write its rows into a new dynbucket table",
        )
    pending = [h.files[-1] for h in hudi_instants(store) if not h.done]
    if pending:
        raise refused(
            store,
            f"instant(s) pending on its timeline ({', '.join(pending[:3])})",
            "Finish or roll them back with Hudi first (hudi-cli: commit rollback, "
            "compaction run), then adopt the table",
        )


#: Hudi index types whose keys are unique in the table (``hoodie.index.type``).
GLOBAL_INDEX_TYPES = frozenset(
    {"GLOBAL_SIMPLE", "GLOBAL_BLOOM", "GLOBAL_HBASE", "RECORD_INDEX", "GLOBAL_RECORD_LEVEL_INDEX"}
)


def _index_of(store: TableStore, hoodie: dict[str, str]) -> IndexOptions:
    """The index a table's properties say it was written with: Hudi's simple bucket index
    (``hoodie.index.type=BUCKET`` and its count); else the dynamic one, global when the
    table's keys are unique in the table: a global index type named, or a record index of
    the global layout in its metadata table (Hudi 1.x's record index, table versions 8 and
    9, is global unless its groups are a data partition's: the partitioned layout, which a
    dynbucket table of version 9 keeps, and which a table adopted again keeps)."""
    count = hoodie.get("hoodie.bucket.index.num.buckets", "")
    kind = hoodie.get("hoodie.index.type", "").upper()
    if kind == "BUCKET" and count.isdigit():
        return SimpleBucketIndex(num_buckets=int(count))
    mdt = _list(hoodie.get("hoodie.table.metadata.partitions", ""))
    record_index = "record_index" in mdt and hoodie.get("hoodie.table.version") in ("8", "9")
    if record_index and kind not in GLOBAL_INDEX_TYPES:
        try:
            record_index = not MetadataTable(store).partitioned()
        except Exception:  # noqa: BLE001 - unreadable: taken as Hudi's default, global
            log.warning("the record index of %s cannot be read; taken as global", store.uri)
    return DynamicBucketIndex(global_index=kind in GLOBAL_INDEX_TYPES or record_index)


def _key_generator(hoodie: dict[str, str]) -> str:
    """The table's key generator's class name (version 8 on: from its type)."""
    kind = hoodie.get("hoodie.table.keygenerator.type", "")
    if kind:
        return _KEY_GENERATOR_TYPES.get(kind, f"{kind} key generator")
    return hoodie.get("hoodie.table.keygenerator.class", "").rsplit(".", 1)[-1]


def _definition(
    store: TableStore,
    hoodie: dict[str, str],
    timeline: Timeline,
    bucket_options: IndexOptions,
    options: dict[str, str],
) -> TableSpec:
    """Step 2 (module doc)."""
    schema_json = hoodie.get("hoodie.table.create.schema", "")
    for instant in reversed(timeline.completed()):
        written = (timeline.raw(instant).get("extraMetadata") or {}).get("schema")
        if written:
            schema_json = written
            break
    if not schema_json:
        raise refused(
            store,
            "neither its properties nor its commits hold its schema",
            "Write to it with Hudi once (its commit records the schema), then adopt it",
        )
    full = avro_read.arrow_schema(schema_json)
    schema = pa.schema([f for f in full if f.name not in META_FIELDS])
    ordering = ordering_of(hoodie)
    if ordering and ordering not in schema.names and adopted_precombine(hoodie):
        raise refused(
            store,
            f"its properties name the ordering field {ordering!r}, which its schema "
            f"({schema.names}) does not have: which record of a key wins would be a guess",
            "Set the precombine (ordering) field in .hoodie/hoodie.properties to a field of "
            "the schema, then adopt it",
        )
    hudi_options = {k: v for k, v in hoodie.items() if k in HUDI_TABLE_PROPERTIES}
    return TableSpec(
        schema=schema,
        record_key=tuple(_list(hoodie.get("hoodie.table.recordkey.fields", ""))),
        partition_by=tuple(_list(hoodie.get("hoodie.table.partition.fields", ""))),
        ordering_field=ordering if ordering in schema.names else None,
        bucket_options=bucket_options,
        options=TableOptions.from_properties({**options, **hudi_options}),
        table_id=uuid.uuid4().hex,
        name=hoodie.get("hoodie.table.name", ""),
        hive_style_partitioning=hive_style(hoodie),
        precombine_named=adopted_precombine(hoodie),
        timestamp_partitioning=timestamp_partitioning(hoodie),
    )


def _partition_folders_explained(store: TableStore, spec: TableSpec) -> None:
    """Rows in partition folders need partition fields that say them: a partitioned table
    whose properties name none would be adopted as unpartitioned, and an update of a key
    would then make it a second live row."""
    folders = [p for p in _partitions(store) if p]
    if folders and not spec.partition_by:
        raise refused(
            store,
            f"its rows sit in partition folders ({', '.join(folders[:3])}) but its "
            "properties name no partition field (hoodie.table.partition.fields)",
            "Set hoodie.table.partition.fields in .hoodie/hoodie.properties to the fields its "
            "partition paths are made of, then adopt it",
        )


def _newest_files_there(store: TableStore, hoodie: dict[str, str], replaced: set[str]) -> None:
    """Every file group's newest file that a completed commit on the active timeline lists
    is on storage (a cleaner never removes a group's newest slice): a lost one would be
    adopted as rows gone, with ``check`` saying healthy."""
    folder = LAYOUT_2_DIR if layout_of(store) == 2 else HOODIE_DIR
    newest: dict[str, tuple[str, str]] = {}
    for h in hudi_instants(store):
        if not h.done or h.action not in _DATA_WRITES:
            continue
        doc = document_of(store.read_bytes(store.path(folder, h.done)))
        for stats in (doc.get("partitionToWriteStats") or {}).values():
            for stat in stats:
                file_id, path = stat.get("fileId", ""), stat.get("path", "")
                known = file_id and path and file_id not in replaced
                if known and (file_id not in newest or newest[file_id][0] <= h.id):
                    newest[file_id] = (h.id, path)
    lost = sorted(p for _, p in newest.values() if not store.exists(store.path(p)))
    if lost:
        raise refused(
            store,
            f"file(s) its newest commits list are missing ({', '.join(lost[:3])}): their rows "
            "would be gone",
            "Restore them from a backup (or roll their commits back with Hudi), then adopt it",
        )


def _remove(store: TableStore, path: str) -> None:
    """Removes a file or folder this adoption wrote (nothing when it is not there)."""
    info = store.fs.get_file_info(path)
    if info.type == pafs.FileType.Directory:
        store.fs.delete_dir(path)
    elif info.type == pafs.FileType.File:
        store.delete(path)


def _replace_commits(store: TableStore) -> dict[str, set[str]]:
    """Completed replace commits on the active timeline -> the file ids each replaced."""
    out: dict[str, set[str]] = {}
    folder = LAYOUT_2_DIR if layout_of(store) == 2 else HOODIE_DIR
    for h in hudi_instants(store):
        if h.done and h.action == HudiAction.REPLACE_COMMIT:
            doc = document_of(store.read_bytes(store.path(folder, h.done)))
            replaced = doc.get("partitionToReplaceFileIds") or {}
            out[h.id] = {file_id for ids in replaced.values() for file_id in ids}
    return out


def _files(
    store: TableStore, floor: str, replaces: dict[str, set[str]], numbered: bool
) -> adopted.Adopted:
    """Step 3 (module doc): the buckets of the file groups, the instants of the logs
    (``numbered``: a bucket index's groups, whose file ids start with their buckets)."""
    groups: dict[str, set[str]] = defaultdict(set)
    logs: dict[str, str] = {}
    replaced = frozenset(f for ids in replaces.values() for f in ids)
    for partition in _partitions(store):
        for info in store.list_files(store.path(partition)):
            parsed = names.parse(info.base_name)
            if parsed is None or parsed.file_id in replaced:
                continue
            groups[partition].add(parsed.file_id)
            if parsed.kind == "log" and not parsed.instant:
                logs[info.base_name] = _log_instant(store, info.path)
    if numbered:
        buckets = {f: _numbered(store, p, f, ids) for p, ids in groups.items() for f in ids}
    else:
        buckets = {
            file_id: bucket for ids in groups.values() for bucket, file_id in enumerate(sorted(ids))
        }
    return adopted.Adopted(buckets, logs, floor, replaced)


def _numbered(store: TableStore, partition: str, file_id: str, ids: set[str]) -> int:
    """The bucket a bucket-index table's file id starts with (Hudi's bucket index names
    its groups ``<bucket, 8 digits>-...``)."""
    head = file_id[:8]
    if not (head.isdigit() and file_id[8:9] == "-"):
        raise refused(
            store,
            f"file group {file_id!r} of partition {partition!r} is not named by a bucket "
            "number, as a bucket index names its groups",
            "Adopt it with the dynamic bucket index (index=DynamicBucketIndex(), the default)",
        )
    twins = [f for f in ids if f[:8] == head and f != file_id]
    if twins:
        raise refused(
            store,
            f"bucket {int(head)} of partition {partition!r} has two file groups "
            f"({file_id!r}, {twins[0]!r})",
            "Adopt it with the dynamic bucket index (index=DynamicBucketIndex(), the default)",
        )
    return int(head)


def _partitions(store: TableStore) -> list[str]:
    """The folders holding a ``.hoodie_partition_metadata`` (the table's root when it is
    unpartitioned)."""
    hoodie = store.path(HOODIE_DIR) + "/"
    found = set()
    for info in store.walk(store.root):
        if info.path.startswith(hoodie) or info.base_name != ".hoodie_partition_metadata":
            continue
        found.add(info.path[len(store.root) :].strip("/").rpartition("/")[0])
    return sorted(found)


def _log_instant(store: TableStore, path: str) -> str:
    blocks = log_file.read_blocks(store.read_buffer(path), skip_corrupt=True)
    if not blocks or not blocks[0].instant:
        raise refused(store, f"its log file {path} holds no block naming its instant", "Restore it")
    return blocks[0].instant


def _history(
    store: TableStore, timeline: Timeline, floor: str, replaces: dict[str, set[str]]
) -> None:
    """Step 4 (module doc)."""
    archived_dir = store.path(HISTORY_DIR if timeline.layout == 2 else ARCHIVED_DIR)
    hudi_archived = any(not i.base_name.startswith(".DS") for i in store.list_files(archived_dir))
    cleaned = any(
        h.done and h.action in (HudiAction.CLEAN, HudiAction.ROLLBACK) for h in hudi_instants(store)
    )
    if not (hudi_archived or cleaned or replaces) or not floor:
        return
    active = [i.id for i in timeline.instants()]
    below = f"{int(min(active)) - 1:017d}" if hudi_archived and active else ""
    # A replace commit's files are visible through the floor (dynbucket's timeline has no
    # replace commits); so is what came before it, which only Hudi's readers tell apart.
    below = max([below, *replaces])
    record = Archived(floor=below, earliest_retained=floor)
    store.write_atomic(store.path(ARCHIVE_DIR, f"{below or '0' * 17}.json"), record.to_json())


def _list(text: str) -> list[str]:
    return [p for p in text.split(",") if p]
