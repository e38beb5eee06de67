"""Compaction: a file slice's logs folded into a new base file, scheduled and executed apart.

As Hudi's compaction runs (inline, or asynchronously beside the writes), so that a write
never waits for it:

1. **Schedule**, under the writer lease, in a moment: pick the slices with at least
   ``min_logs`` log files (``hoodie.compact.inline.max.delta.commits``), record them as the
   plan of a new compaction instant ``C`` (inflight), and release the lease with ``C``
   pending. From then on writes put the logs of those groups onto ``C``'s slice
   (``FileSlice.next_log``), and readers merge them onto the slice ``C`` reads.
2. **Execute**, without the lease (nobody else writes these base files): per planned group,
   merge its slice as of ``C`` (the newest base before ``C`` and the logs after it, all of
   instants older than ``C``) into base file ``C``; groups in parallel (threads here; the
   cluster runs shares of them as tasks: ``execute_groups``).
3. **Complete**: the outcome's exclusive create, then the publish of ``<C>.commit``.

A pending compaction is never rolled back: logs already sit on its slice. An executor that
dies leaves it pending, and the next run executes it again: the same plan writes the same
files, and whichever executor decides the outcome first completes it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from dynbucket.format.file_group.merge import read_slice
from dynbucket.format.file_group.slices import FileSlice, data_files, latest_slice
from dynbucket.format.file_group.writer import moved_to, write_base
from dynbucket.format.hudi.files import base_name, bucket_of
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.results import ServiceResult
from dynbucket.format.table.snapshot import Snapshot
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import Instant, Timeline
from dynbucket.format.timeline.transaction import Transaction, WrittenFile, compaction_groups

#: A planned group: (partition, file id, base instant of the slice it compacts).
Group = tuple[str, str, str]


def pending(timeline: Timeline) -> list[Instant]:
    """The compactions scheduled and not yet completed, oldest first."""
    return [i for i in timeline.pending() if i.action == "compaction"]


def schedule(
    store: TableStore,
    spec: TableSpec,
    min_logs: int = 1,
    partitions: Sequence[str] | None = None,
) -> str | None:
    """1. Plans a compaction of every slice with at least ``min_logs`` logs (of
    ``partitions``; default all) whose group no pending compaction plans; returns its
    instant (None: nothing to compact, or a copy-on-write table)."""
    if not spec.options.merge_on_read:
        return None
    txn = Transaction.begin(store, spec, "compaction", "compact")
    try:
        snapshot = Snapshot(store, spec, txn.based_on) if txn.based_on else None
        refs = snapshot.slices(partitions) if snapshot is not None else []
        groups = [
            (r.partition, r.slice.file_id, r.slice.base_instant)
            for r in refs
            if len(r.slice.logs) >= min_logs and r.slice.file_id not in txn.compacting
        ]
        if not groups:
            txn.cancel()
            return None
        txn.record_plan({"groups": groups})
    except BaseException:
        txn.abort()
        raise
    txn.hand_off()
    return txn.id


def execute(store: TableStore, spec: TableSpec, instant: str, threads: int = 4) -> ServiceResult:
    """2-3. Executes the pending compaction ``instant`` and completes it (here: its groups
    in ``threads`` threads)."""
    txn = _resume(store, spec, instant)
    groups = compaction_groups(txn.timeline, txn.instant)
    written = execute_groups(store, spec, instant, groups, threads)
    return complete(txn, written)


def execute_groups(
    store: TableStore, spec: TableSpec, instant: str, groups: Sequence[Group], threads: int = 1
) -> list[WrittenFile]:
    """Writes the base file of ``instant`` of each planned group (a share of a plan: any
    process may run any share; the files are the same whoever writes them)."""
    visible = Timeline(store, spec.options.merge_on_read).visible()
    listed = {p: data_files(store, p) for p in dict.fromkeys(g[0] for g in groups)}

    def one(group: Group) -> WrittenFile:
        partition, file_id, _ = group
        files = [f for f in listed[partition] if f.file_id == file_id and f.instant < instant]
        base, logs = latest_slice(files, visible)
        fslice = FileSlice(file_id, base, logs)
        live = read_slice(store, spec, fslice, spec.schema.names, list(spec.meta_fields))
        name = base_name(file_id, instant)
        path = store.path(partition, name)
        size = write_base(store, spec, path, moved_to(spec, live, name))
        return WrittenFile(
            partition,
            path,
            "base",
            live.num_rows,
            size,
            file_id,
            bucket_of(file_id),
            prev_commit=fslice.base_instant,
        )

    with ThreadPoolExecutor(max_workers=max(1, threads)) as pool:
        return list(pool.map(one, groups))


def complete(txn: Transaction, written: Sequence[WrittenFile]) -> ServiceResult:
    """3. Completes a compaction with the files its groups were written to."""
    for f in written:
        txn.add(f)
    txn.commit({"compacted-slices": len(written)})
    return ServiceResult("compaction", txn.id, len(written), 0, sum(f.rows for f in written))


def _resume(store: TableStore, spec: TableSpec, instant: str) -> Transaction:
    timeline = Timeline(store, spec.options.merge_on_read)
    found = next((i for i in pending(timeline) if i.id == instant), None)
    if found is None:
        raise ValueError(f"no pending compaction {instant} in {store.uri}")
    return Transaction.resume(store, spec, found, f"compactor-{uuid.uuid4().hex[:8]}")
