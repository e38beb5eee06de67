"""Table services, each an instant of its own: compaction, index compaction, cleaning,
rollback of what dead writers left; and the history of the timeline."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dynbucket.pipeline.format.file_groups import write_file
from dynbucket.pipeline.format.layout import TEMPORARY, data_files, index_files
from dynbucket.pipeline.format.merge import read_slice
from dynbucket.pipeline.format.reader import Snapshot
from dynbucket.pipeline.format.rli import RecordLevelIndex
from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.table_spec import TableSpec
from dynbucket.pipeline.format.timeline import Timeline
from dynbucket.pipeline.format.transaction import Transaction, WrittenFile

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
    """Merges each file slice that has deltas into a new base file.

    Rows keep their ``_instant`` (the commit that last wrote them).
    """
    with Transaction.begin(store, "compaction", "compact", spec.options.lock_lease_seconds) as txn:
        snapshot = Snapshot(store, spec, txn.based_on) if txn.based_on else None
        refs = [r for r in snapshot.slices(partitions) if r.slice.deltas] if snapshot else []
        if not refs:
            txn.abort()
            return ServiceResult("compaction", None)
        rows = 0
        for ref in refs:
            live = read_slice(store, spec, ref.slice, spec.data_fields)
            txn.add(write_file(store, spec, txn.id, ref.partition, ref.slice.file_id, live, True))
            rows += live.num_rows
        txn.commit({"compacted-slices": len(refs)})
        return ServiceResult("compaction", txn.id, len(refs), 0, rows)


def compact_index(
    store: TableStore, spec: TableSpec, min_files: int | None = None
) -> ServiceResult:
    """Merges a partition's index files into one once it has ``min_files`` of them."""
    threshold = min_files or spec.options.index_compaction_min_files
    index = RecordLevelIndex(store, spec)
    with Transaction.begin(
        store, "index-compaction", "compact-index", spec.options.lock_lease_seconds
    ) as txn:
        visible = {i.id for i in txn.timeline.completed()}
        written = 0
        for partition in index.partitions():
            base, deltas = index.files(partition, visible)
            if len(deltas) + (base is not None) < threshold:
                continue
            merged = index.compact(partition, txn.id, visible)
            if merged is not None:
                txn.add(WrittenFile(partition, merged.path, "index-base", 0, merged.size))
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
    with Transaction.begin(store, "clean", "clean", spec.options.lock_lease_seconds) as txn:
        # Retention counts instants that change data; cleans and rollbacks do not.
        completed = [i.id for i in txn.timeline.completed("commit", "compaction")]
        if len(completed) <= keep:
            txn.abort()
            return ServiceResult("clean", None)
        earliest = completed[-keep]
        visible = {i.id for i in txn.timeline.completed()}
        removed = 0
        for partition in Snapshot(store, spec).partitions():
            removed += _clean_files(store, data_files(store, partition), visible, earliest, True)
        for partition in RecordLevelIndex(store, spec).partitions():
            removed += _clean_files(store, index_files(store, partition), visible, earliest, False)
        removed += _clean_temporary(store, visible)
        txn.commit({"earliest-retained": earliest, "files-removed": removed})
        return ServiceResult("clean", txn.id, 0, removed)


def _clean_files(
    store: TableStore, files: list[Any], visible: set[str], earliest: str, by_group: bool
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


def _clean_temporary(store: TableStore, visible: set[str]) -> int:
    """Temporary files that killed task attempts left behind, for completed instants (a
    pending instant's are removed by its rollback)."""
    removed = 0
    for info in store.walk(store.root):
        if not TEMPORARY.match(info.base_name):
            continue
        instant = _INSTANT_IN_NAME.search(info.base_name)
        if instant is not None and instant.group(1) in visible:
            store.delete(info.path)
            removed += 1
    return removed


def rollback(store: TableStore, spec: TableSpec) -> list[str]:
    """Rolls back every pending instant a crashed writer left (as an instant of its own,
    which records them); returns their ids."""
    pending = [i.id for i in Timeline(store).pending()]
    txn = Transaction.begin(store, "rollback", "rollback", spec.options.lock_lease_seconds)
    txn.commit({"rolled-back": pending})
    return pending


def history(store: TableStore) -> list[dict[str, Any]]:
    """Every instant with its state and, when completed, its metadata summary."""
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
        out.append(row)
    return out
