"""Table services, each an instant of its own: compaction, index compaction, cleaning,
rollback of what dead writers left; and the history of the timeline."""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dynbucket.format.file_group.merge import read_slice
from dynbucket.format.file_group.slices import data_files
from dynbucket.format.file_group.writer import moved_to, write_base
from dynbucket.format.hudi.files import base_name
from dynbucket.format.index.files import index_files
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.storage.store import TEMPORARY, TableStore
from dynbucket.format.table.paths import (
    BUCKET_LAYOUT_DIR,
    HOODIE_DIR,
    META_DIR,
    RLI_DIR,
    TIMELINE_DIR,
)
from dynbucket.format.table.snapshot import Snapshot
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.format.timeline.transaction import Transaction, WrittenFile

#: The instant in a data or index file name (``_<instant>.`` or a leading ``<instant>.``).
_INSTANT_IN_NAME = re.compile(r"(?:^\.?|_)(\d{17})\.")


@dataclass(frozen=True)
class ServiceResult:
    """What a table service did (``instant`` is None when there was nothing to do)."""

    action: str
    instant: str | None
    files_written: int = 0
    files_removed: int = 0
    rows: int = 0


def compact(
    store: TableStore, spec: TableSpec, partitions: Sequence[str] | None = None
) -> ServiceResult:
    """Merges each file slice that has log files into a new base file (merge-on-read tables;
    a copy-on-write table has nothing to compact).

    On Hudi's timeline as Hudi records a compaction: ``<id>.compaction.requested``,
    ``.compaction.inflight``, completed as ``<id>.commit`` (``compacted``, operation type
    ``COMPACT``). Rows keep their meta fields, so their commit time.
    """
    if not spec.options.merge_on_read:
        return ServiceResult("compaction", None)
    with Transaction.begin(store, spec, "compaction", "compact") as txn:
        snapshot = Snapshot(store, spec, txn.based_on) if txn.based_on else None
        refs = [r for r in snapshot.slices(partitions) if r.slice.logs] if snapshot else []
        if not refs:
            txn.abort()
            return ServiceResult("compaction", None)
        rows = 0
        meta = list(spec.meta_fields)
        for ref in refs:
            live = read_slice(store, spec, ref.slice, spec.schema.names, meta)
            name = base_name(ref.slice.file_id, txn.id)
            path = store.path(ref.partition, name)
            size = write_base(store, spec, path, moved_to(spec, live, name))
            txn.add(
                WrittenFile(
                    ref.partition,
                    path,
                    "base",
                    live.num_rows,
                    size,
                    ref.slice.file_id,
                    ref.slice.bucket,
                    prev_commit=ref.slice.base_instant,
                )
            )
            rows += live.num_rows
        txn.commit({"compacted-slices": len(refs)})
        return ServiceResult("compaction", txn.id, len(refs), 0, rows)


def compact_index(
    store: TableStore, spec: TableSpec, min_files: int | None = None
) -> ServiceResult:
    """Merges a partition's index files into one once it has ``min_files`` of them."""
    threshold = min_files or spec.options.index_compaction_min_files
    index = RecordLevelIndex(store, spec)
    with Transaction.begin(store, spec, "index-compaction", "compact-index") as txn:
        visible = txn.visible
        written = 0
        for partition in index.partitions():
            base, deltas = index.files(partition, visible)
            if len(deltas) + (base is not None) < threshold:
                continue
            merged = index.compact(partition, txn.id, visible)
            if merged is not None:
                txn.add(WrittenFile(partition, merged.path, "index", 0, merged.size))
                written += 1
        if not written:
            txn.abort()
            return ServiceResult("index-compaction", None)
        txn.commit({"partitions": written})
        return ServiceResult("index-compaction", txn.id, written)


def clean(store: TableStore, spec: TableSpec, retain: int | None = None) -> ServiceResult:
    """Removes file slices no retained instant can read.

    The last ``retain`` completed instants stay readable (``cleaner.commits-retained``): for
    the oldest of them, E, each group keeps its newest base <= E and everything after it.
    """
    keep = retain or spec.options.cleaner_commits_retained
    with Transaction.begin(store, spec, "clean", "clean") as txn:
        # Retention counts instants that change data; cleans and rollbacks do not.
        completed = [i.id for i in txn.timeline.completed("commit", "compaction")]
        if len(completed) <= keep:
            txn.abort()
            return ServiceResult("clean", None)
        earliest = completed[-keep]
        # Said before any file goes: a read that finds a file gone while this clean runs
        # learns that its instant is no longer retained (reader.missing_file).
        txn.record_plan({"earliest-retained": earliest})
        visible = txn.visible
        removed = 0
        folders = []
        for partition in Snapshot(store, spec).partitions():
            removed += _clean_files(store, data_files(store, partition), visible, earliest, True)
            folders.append(store.path(partition))
        for partition in RecordLevelIndex(store, spec).partitions():
            removed += _clean_files(store, index_files(store, partition), visible, earliest, False)
            folders.append(store.path(RLI_DIR, partition))
        removed += _clean_temporary(store, visible, folders)
        txn.commit({"earliest-retained": earliest, "files-removed": removed})
        return ServiceResult("clean", txn.id, 0, removed)


def _clean_files(
    store: TableStore, files: list[Any], visible: Collection[str], earliest: str, by_group: bool
) -> int:
    groups: dict[str, list[Any]] = {}
    for f in files:
        if f.instant in visible:
            groups.setdefault(f.file_id if by_group else "", []).append(f)
    removed = 0
    for group in groups.values():
        bases = [f.instant for f in group if f.kind == "base" and f.instant <= earliest]
        if not bases:
            continue
        floor = max(bases)
        for f in group:
            if f.instant < floor:
                store.delete(f.path)
                removed += 1
    return removed


def _clean_temporary(store: TableStore, visible: Collection[str], folders: Iterable[str]) -> int:
    """Temporary files that killed task attempts left behind, for completed instants (a
    pending instant's are removed by its rollback). Only local filesystems write files
    under temporary names, beside their final names: in the data and index ``folders``
    that clean lists anyway, and in the table's metadata folders, never in a walk of the
    whole table."""
    if not store.is_local:
        return 0
    removed = 0
    meta = [store.path(d) for d in (HOODIE_DIR, META_DIR, TIMELINE_DIR, BUCKET_LAYOUT_DIR)]
    for folder in sorted({*folders, *meta}):
        for info in store.list_files(folder):
            if not TEMPORARY.match(info.base_name):
                continue
            instant = _INSTANT_IN_NAME.search(info.base_name)
            if instant is not None and instant.group(1) in visible:
                store.delete(info.path)
                removed += 1
    return removed


def rollback(store: TableStore, spec: TableSpec) -> list[str]:
    """Settles every pending instant a crashed writer left (as an instant of its own, which
    records them): rolls each back, unless its writer had committed it (then it is
    published, and recorded as such); returns the ids rolled back."""
    txn = Transaction.begin(store, spec, "rollback", "rollback")
    rolled = [i for i, done in txn.settled.items() if done == "rolled back"]
    published = [i for i, done in txn.settled.items() if done == "published"]
    txn.commit({"rolled-back": rolled, "published": published})
    return rolled


#: What a write's keys became, as ``history`` reports them.
KEY_COUNTS = ("inserted", "updated", "stale", "deleted", "not_found")


def history(store: TableStore) -> list[dict[str, Any]]:
    """Every instant with its state and, when completed, its metadata summary (for writes,
    what happened to their keys: ``KEY_COUNTS``)."""
    timeline = Timeline(store)
    out = []
    for instant in timeline.instants():
        row: dict[str, Any] = {
            "instant": instant.id,
            "action": instant.action,
            "state": instant.state.name.lower(),
        }
        if instant.completed:
            meta = timeline.metadata(instant)
            row["operation"] = meta.get("operation")
            row["files"] = len(meta.get("files", []))
            stats = meta.get("stats") or {}
            row["keys"] = {k: stats.get(f"keys_{k}", 0) for k in KEY_COUNTS}
        out.append(row)
    return out
