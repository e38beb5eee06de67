"""Hudi's archived timeline, as table version 6 keeps it: ``.hoodie/archived/``.

Hudi moves old instants off the active timeline (``.hoodie/``) into log files named
``.commits_.archive.<version>_<write token>``, each holding Avro data blocks of
``HoodieArchivedMetaEntry`` records (one per instant and state). Hudi reads an entry's
``commitTime``, ``actionType`` and ``actionState`` by name with the schema the block
carries; the per-action metadata fields (``hoodieCommitMetadata``, ...) are written as
null here: the history names every archived instant, while what each wrote stays in
dynbucket's archive record (``timeline/archive.py``).

An archival adds a file (``append``: object stores cannot append to one), so small files
are merged as Hudi's writers merge them (``hoodie.archive.merge.enable``), or the folder
would hold a file per archival for the table's life: once ``MERGE_FILES`` files of about
the same size (the same power of ten of bytes) are there, they become one file of the
next version, their blocks one after the other (a log file is its blocks; a reader reads
every file's). A file is merged about once per power of ten it grows, so the folder holds
a few dozen files however long the table lives.
"""

from __future__ import annotations

import json
import posixpath
import re
import zlib

import pyarrow.fs as pafs

from dynbucket.base.errors import FormatError
from dynbucket.format.hudi import log_file
from dynbucket.format.hudi.avro import Reader, Writer
from dynbucket.format.storage.store import TableStore

ARCHIVED_DIR = ".hoodie/archived"
#: Files of one size tier merged at once (Hudi: ``hoodie.archive.merge.files.batch.size``).
MERGE_FILES = 10
#: Files this large are not merged (Hudi: ``hoodie.archive.merge.small.file.limit.bytes``).
SMALL_FILE = 20 * 1024 * 1024
#: What a merge is about to do, for the next archival to finish after a crash (a name
#: Hudi's readers, which read ``.commits_.archive*``, pass over).
MERGE_PLAN = ".dynbucket_merge_plan.json"
_NAME = re.compile(r"^\.commits_\.archive\.(?P<version>\d+)_(?P<token>\d+-\d+-\d+)$")
#: The metadata fields of Hudi's entry, by action (null in what is written here).
_METADATA_FIELDS = (
    "hoodieCommitMetadata",
    "hoodieCleanMetadata",
    "hoodieCompactionMetadata",
    "hoodieRollbackMetadata",
    "hoodieSavePointMetadata",
    "hoodieCompactionPlan",
    "hoodieCleanerPlan",
    "hoodieReplaceCommitMetadata",
    "hoodieRequestedReplaceMetadata",
    "hoodieInflightReplaceMetadata",
)
_STRINGS = ("commitTime", "actionType", "actionState", "stateTransitionTime")
SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "HoodieArchivedMetaEntry",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            *({"name": n, "type": ["null", "string"], "default": None} for n in _METADATA_FIELDS),
            *({"name": n, "type": ["null", "string"], "default": None} for n in _STRINGS),
            {"name": "version", "type": ["int", "null"], "default": 1},
        ],
    }
)


def file_name(version: int) -> str:
    """The name of the archive log file of ``version`` (1, 2, ...)."""
    return f".commits_.archive.{version}_1-0-1"


def version_of(name: str) -> int | None:
    """The version an archive log file's name says (None: not an archive log file)."""
    m = _NAME.match(name)
    return int(m["version"]) if m is not None else None


def entries_file(entries: list[tuple[str, str, str]], instant: str) -> bytes:
    """An archive log file of one Avro data block: an entry per (instant id, action as Hudi
    names it, state: ``REQUESTED``, ``INFLIGHT`` or ``COMPLETED``)."""
    records = []
    for commit_time, action, state in entries:
        w = Writer()
        for _ in _METADATA_FIELDS:
            w.long(0)  # the null branch
        for value in (commit_time, action, state, commit_time):
            w.long(1)
            w.string(value)
        w.long(0)  # the int branch of version
        w.long(1)
        records.append(w.getvalue())
    return log_file.avro_data_block(records, instant, SCHEMA)


def read_entries(data: bytes) -> list[tuple[str, str, str]]:
    """(instant id, action, state) of every entry of an archive log file written by
    :func:`entries_file`."""
    out = []
    for block in log_file.read_blocks(data):
        if block.type != log_file.AVRO_DATA:
            continue
        for record in log_file.avro_records(block):
            r = Reader(record)
            for _ in _METADATA_FIELDS:
                if r.long() != 0:
                    raise FormatError("archived entry with metadata: not written by dynbucket")
            values = []
            for _ in _STRINGS:
                values.append(r.string() if r.long() == 1 else "")
            out.append((values[0], values[1], values[2]))
    return out


def append(store: TableStore, body: bytes) -> str:
    """Adds the archive log file ``body`` (``entries_file``) under the next version, then
    merges small files (module doc); returns its name."""
    folder = store.path(ARCHIVED_DIR)
    version = max(_versions(store.list_files(folder)), default=0) + 1
    while not store.create_exclusive(store.path(folder, file_name(version)), body):
        version += 1
    merge(store)
    return file_name(version)


def merge(store: TableStore) -> None:
    """The module doc's merge.

    1. A plan a crashed merge left: if its merged file is there (the checksum the plan
       names), the files it merged go; then the plan.
    2. Of the files under ``SMALL_FILE`` bytes whose blocks read whole (a file Hudi left
       with a corrupt block stays as it is), those of the smallest size tier holding
       ``MERGE_FILES``: the oldest ``MERGE_FILES`` of it; again while a tier is full (a
       merged file may fill the next).
    3. The plan (an exclusive create: one merge at a time), then the merged file under the
       next version (an exclusive create: whole or absent), then the files merged, then
       the plan. A reader between the merged file and the deletes lists an entry twice, as
       Hudi's own merge may leave it; a crash there is finished by step 1.
    """
    folder = store.path(ARCHIVED_DIR)
    plan_path = store.path(folder, MERGE_PLAN)
    if store.exists(plan_path):  # 1.
        plan = json.loads(store.read_bytes(plan_path))
        merged_path = store.path(folder, plan["merged"])
        if store.exists(merged_path) and zlib.crc32(store.read_bytes(merged_path)) == plan["crc"]:
            for name in plan["merged_from"]:
                store.delete(store.path(folder, name))
        store.delete(plan_path)
    while _merge_a_tier(store, folder):  # a merge may fill the next tier
        pass


def _merge_a_tier(store: TableStore, folder: str) -> bool:
    """Steps 2-3 of ``merge`` for the smallest full tier; whether it merged one."""
    files = store.list_files(folder)
    tiers: dict[int, list[tuple[int, str]]] = {}
    for info in files:  # 2.
        version = version_of(info.base_name)
        size = info.size or 0
        if version is not None and size < SMALL_FILE:
            tiers.setdefault(len(str(size)), []).append((version, info.base_name))
    for tier in sorted(tiers):
        if len(tiers[tier]) < MERGE_FILES:
            continue
        merged_from = []
        for _, name in sorted(tiers[tier]):
            data = store.read_bytes(store.path(folder, name))
            try:
                log_file.read_blocks(data)
            except FormatError:
                continue
            merged_from.append((name, data))
            if len(merged_from) == MERGE_FILES:
                return _merge_files(store, folder, files, merged_from)
    return False


def _merge_files(
    store: TableStore, folder: str, files: list[pafs.FileInfo], merged_from: list[tuple[str, bytes]]
) -> bool:
    """Step 3 of ``merge``; whether this call merged them."""
    body = b"".join(data for _, data in merged_from)
    version = max(_versions(files), default=0) + 1
    while store.exists(store.path(folder, file_name(version))):
        version += 1
    merged = file_name(version)
    plan = {
        "merged": merged,
        "crc": zlib.crc32(body),
        "merged_from": [name for name, _ in merged_from],
    }
    plan_path = store.path(folder, MERGE_PLAN)
    if not store.create_exclusive(plan_path, json.dumps(plan).encode()):
        return False  # another merge is under way
    done = store.create_exclusive(store.path(folder, merged), body)
    if done:
        for name, _ in merged_from:
            store.delete(store.path(folder, name))
    store.delete(plan_path)
    return done


def _versions(files: list[pafs.FileInfo]) -> list[int]:
    return [v for v in (version_of(posixpath.basename(i.path)) for i in files) if v is not None]
