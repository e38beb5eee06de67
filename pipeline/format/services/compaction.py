"""Compaction: a file slice's logs folded into a new base file, scheduled and executed apart.

As Hudi's compaction runs (inline, or asynchronously beside the writes), so that a write
never waits for it:

1. **Schedule**, under the writer lease, in a moment: pick the slices with at least
   ``min_logs`` log files (``hoodie.compact.inline.max.delta.commits``), record them as the
   plan of a new compaction instant ``C`` (inflight) with the data writes pending then
   (``writing``: older than ``C``, their logs not written yet), and release the lease with
   ``C`` pending. Writes go on putting their logs on the slices they know (the completed
   ones).
2. **Execute**, without the lease (nobody else writes these base files): per planned group,
   merge its slice as of ``C`` (the newest base before ``C`` and the logs after it, all of
   instants older than ``C`` and not ``writing``: the same files whoever runs it, whenever)
   into base file ``C``, whose name keeps the first ``len(writing)`` log versions of its
   slice for the writing ones; groups in parallel (threads here; a cluster may run shares
   of them as tasks: ``execute_groups``).
3. **Finish**, under the lease, in a moment: the logs written onto a planned group's old
   slice since ``C`` was planned are copied onto ``C``'s slice (same bytes, same writer's
   token, ``C`` as base instant): a writing one's at its kept version (in id order), a
   younger one's after them; then the outcome's exclusive create and the publish of
   ``<C>.commit``. A writing instant that completes after ``C`` carries its own log there
   at its commit (``file_group/carry.py``), so that a compaction planned while a write is
   written costs that write nothing (several writers: ``timeline/conflicts.py``). The
   original stays on the old slice for the views before ``C``.

Hudi's own writers put the logs of planned groups onto ``C``'s slice from step 1 on, and
its Java readers merge them onto the slice before; hudi-rs 0.5 reads such logs only once
``C`` completed, so a table written that way reads stale in hudi-rs while a compaction
runs. Carrying the late logs in step 3 keeps every reader right at every moment: before
``C`` completes, the old slice holds every log; after, ``C``'s slice does. A pending
compaction is never rolled back; an executor that dies leaves it pending, and the next run
executes it again (the same plan writes the same files).

A log compaction (``log_compaction.py``) merges a slice's logs without its base.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from dynbucket.base.beside import in_threads
from dynbucket.base.errors import InstantNotFoundError
from dynbucket.format.file_group.merge import read_slice
from dynbucket.format.file_group.merged_log import mergeable
from dynbucket.format.file_group.slices import (
    DataFile,
    FileSlice,
    data_files,
    latest_slice,
    unmerged,
)
from dynbucket.format.file_group.stale import copied_largest
from dynbucket.format.file_group.writer import moved_to, write_base
from dynbucket.format.hudi.files import base_name, log_name
from dynbucket.format.read.snapshot import Snapshot
from dynbucket.format.services.service import AUTOMATIC, Scope, Service, ServiceResult
from dynbucket.format.storage.store import TableStore, WriteBatch
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.plans import (
    compacting,
    compaction_groups,
    left_pending,
    left_pending_one,
)
from dynbucket.format.timeline.timeline import WRITING, Instant, Timeline, compaction_writing
from dynbucket.format.timeline.transaction import Transaction, WrittenFile
from dynbucket.format.timeline.transaction import schedule as schedule_instant

#: A planned group: (partition, file id, base instant of the slice it compacts).
Group = tuple[str, str, str]

log = logging.getLogger(__name__)


def full_due(spec: TableSpec, fslice: FileSlice) -> bool:
    """Whether an automatic service compacts ``fslice`` into a new base file (else it merges
    its logs): no log compaction, no base, or logs of ``compaction.log-size-ratio`` of the
    base's bytes or more."""
    base = fslice.base.size if fslice.base is not None else 0
    return full_due_of(spec, base, sum(f.size for f in fslice.logs))


def full_due_of(spec: TableSpec, base_bytes: int, log_bytes: int) -> bool:
    """:func:`full_due` of a slice of a ``base_bytes`` base (0: none) and ``log_bytes`` of
    logs."""
    o = spec.options
    if not (o.log_compaction_enable and mergeable(spec)) or not base_bytes:
        return True
    return log_bytes >= o.compaction_log_size_ratio * base_bytes


def due_slices(
    txn: Transaction,
    store: TableStore,
    spec: TableSpec,
    min_logs: int,
    partitions: Sequence[str] | None,
    max_bytes: int | None,
    full: bool | None,
) -> list[Any]:
    """The slices (of ``partitions``; default all) with at least ``min_logs`` logs whose
    group no pending compaction plans (``full``: only those :func:`full_due` says, or only
    the others, counting the logs after the newest merged one, ``slices.unmerged``, as the
    writer does; None: all, every log counted), the slices with most logs first up to
    ``max_bytes`` of what the compaction reads (the logs alone for a log compaction; at
    least one slice; None: all)."""
    snapshot = Snapshot(store, spec, txn.based_on) if txn.based_on else None
    refs = snapshot.slices(partitions) if snapshot is not None else []
    due = [
        r
        for r in refs
        if len(r.slice.logs if full is None else unmerged(r.slice.logs)) >= min_logs
        and r.slice.file_id not in txn.compacting
        and (full is None or full_due(spec, r.slice) == full)
    ]
    if max_bytes is not None:
        due.sort(key=lambda r: -len(r.slice.logs))
        reads = (
            r.slice.size if full is not False else sum(f.size for f in r.slice.logs) for r in due
        )
        sizes = itertools.accumulate(reads)
        due = [r for r, before in zip(due, [0, *sizes], strict=False) if before < max_bytes]
    return due


def schedule(
    store: TableStore,
    spec: TableSpec,
    min_logs: int = 1,
    partitions: Sequence[str] | None = None,
    max_bytes: int | None = None,
    by_size: bool = False,
) -> str | None:
    """1. Plans a compaction of the slices with at least ``min_logs`` logs (of
    ``partitions``; default all) whose group no pending compaction plans: the slices with
    most logs first, up to ``max_bytes`` of their files (at least one slice; None: all);
    ``by_size``: only those :func:`full_due` says (the others are for a log compaction).
    Returns its instant (None: nothing to compact, or a copy-on-write table)."""
    if not spec.options.merge_on_read:
        return None

    def plan(txn: Transaction) -> dict[str, Any] | None:
        due = due_slices(
            txn, store, spec, min_logs, partitions, max_bytes, True if by_size else None
        )
        groups = [(r.partition, r.slice.file_id, r.slice.base_instant) for r in due]
        if not groups:
            return None
        if spec.table_version >= 8:
            # hudi-rs slices a version 8/9 table's logs by completion time: a write pending
            # now would read on this compaction's slice, which no view before it has.
            return {"groups": groups}
        pending = txn.timeline.pending()
        writing = [i.id for i in pending if i.action == Action.COMMIT and i.id < txn.id]
        return {"groups": groups, WRITING: writing}

    return schedule_instant(store, spec, Action.COMPACTION, "compact", plan)


#: How much larger than the logs taken so far an older log may be and still be merged with
#: them (log sizes vary: a tier of logs about the same size is merged as one).
TIER_GROWTH = 2


def merge_run(logs: Sequence[DataFile], min_logs: int) -> list[DataFile]:
    """The logs a log compaction merges of a slice's ``logs`` (oldest first), as tiers:
    from the newest, each older log while it is at most ``TIER_GROWTH`` times those taken
    so far together (so a merged log is merged again only once about as many bytes came
    after it, and a slice holds a few logs of growing sizes); fewer than two: the newest
    ``min_logs``. Works for index deltas too (several files of one instant go together)."""
    run = [logs[-1]]
    taken = logs[-1].size
    for f in reversed(logs[:-1]):
        if f.size > TIER_GROWTH * taken:
            break
        run.append(f)
        taken += f.size
    first = run[-1].instant if len(run) >= 2 else logs[-min(min_logs, len(logs))].instant
    # Whole instants: a merged file restates every file of the instants it starts from.
    return [f for f in logs if f.instant >= first]


def run(store: TableStore, spec: TableSpec, instant: str, threads: int = 4) -> ServiceResult:
    """2-3. Executes the pending compaction ``instant`` (its groups in ``threads`` threads)
    and completes it."""
    return finish(store, spec, instant, execute(store, spec, instant, threads))


def execute(
    store: TableStore, spec: TableSpec, instant: str, threads: int = 4
) -> list[WrittenFile]:
    """2. Writes the base files of the pending compaction ``instant`` (no lease: any
    process may run it, and run it again)."""
    timeline = Timeline(store, spec.options.merge_on_read)
    found = left_pending_one(timeline, Action.COMPACTION, instant)
    if found is None:
        raise InstantNotFoundError(
            f"no pending compaction {instant} in {store.uri} (completed, or rolled back)"
        )
    return execute_groups(
        store,
        spec,
        instant,
        compaction_groups(timeline, found),
        threads,
        writing=compaction_writing(timeline, found),
    )


def planned_sizes(store: TableStore, groups: Sequence[Group]) -> list[int]:
    """Bytes of each planned group's slice (its files from the planned base on; one
    listing per partition): about what executing it reads."""
    listed = {p: data_files(store, p) for p in dict.fromkeys(g[0] for g in groups)}
    return [
        sum(f.size for f in listed[p] if f.file_id == file_id and f.instant >= base)
        for p, file_id, base in groups
    ]


def execute_groups(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    groups: Sequence[Group],
    threads: int = 1,
    done: Callable[[int], None] | None = None,
    writing: Sequence[str] = (),
) -> list[WrittenFile]:
    """Writes the base file of ``instant`` of each planned group (a share of a plan: any
    process may run any share; the files are the same whoever writes them); ``done`` is
    told each group written (from the pool's threads); ``writing``: the plan's
    (``compaction_writing``), whose logs it leaves out even once they completed."""
    visible = Timeline(store, spec.options.merge_on_read).visible()
    listed = {p: data_files(store, p) for p in dict.fromkeys(g[0] for g in groups)}
    left_out = frozenset(writing)

    def one(group: Group) -> WrittenFile:
        partition, file_id, _ = group
        files = [
            f
            for f in listed[partition]
            if f.file_id == file_id and f.instant < instant and f.instant not in left_out
        ]
        base, logs = latest_slice(files, visible)
        fslice = FileSlice(file_id, base, logs)
        live = read_slice(store, spec, fslice, spec.schema.names, list(spec.meta_fields))
        name = base_name(file_id, instant, len(left_out))
        path = store.path(partition, name)
        size = write_base(store, spec, path, moved_to(spec, live, name))
        return WrittenFile(
            partition,
            path,
            "base",
            live.num_rows,
            size,
            file_id,
            fslice.bucket,
            prev_commit=fslice.base_instant,
        )

    told = None if done is None else (lambda _: done(1))
    return in_threads(one, [(g,) for g in groups], threads, told)


def finish(
    store: TableStore, spec: TableSpec, instant: str, written: Sequence[WrittenFile]
) -> ServiceResult:
    """3. Completes the compaction ``instant``, whose base files are ``written``, under the
    writer lease (a moment): the logs writes put on a planned group's old slice while it
    ran are carried onto its new slice (the same bytes, named on the compaction's base
    instant, keeping their writer's token), then the outcome and the publish. Already
    completed (another executor finished it): nothing is done."""
    timeline = Timeline(store, spec.options.merge_on_read)
    found = left_pending_one(timeline, Action.COMPACTION, instant)
    if found is None:
        return ServiceResult(Action.COMPACTION, None)
    txn = Transaction.take_over(store, spec, found)
    try:
        if found not in left_pending(
            txn.timeline, Action.COMPACTION
        ):  # finished by another while we waited
            txn.hand_off()
            return ServiceResult(Action.COMPACTION, None)
        writing = compaction_writing(txn.timeline, found)
        groups = compaction_groups(txn.timeline, found)
        carried = _carry_late_logs(store, txn, groups, writing)
        # The copies are the compaction's files too: Hudi's metadata table lists them.
        for f in [*written, *carried]:
            txn.add(f)
        paths = [f.relative(store) for f in carried]
        txn.commit(
            {"compacted-slices": len(written), "carried-logs": paths, WRITING: list(writing)}
        )
    except BaseException:
        txn.abort()  # a compaction stays pending: the next run finishes it
        raise
    return ServiceResult(Action.COMPACTION, txn.id, len(written), 0, sum(f.rows for f in written))


def _carry_late_logs(
    store: TableStore, txn: Transaction, groups: Sequence[Group], writing: Sequence[str] = ()
) -> list[WrittenFile]:
    """Copies each planned group's logs written after the compaction was planned onto its
    slice (those of ``writing``, the writes pending then, at the versions kept for them);
    returns the copies (their rows counted by the writes that wrote them). A group
    rewritten since (a newer base) is left alone."""
    instant, visible = txn.id, txn.visible
    kept = {w: version for version, w in enumerate(writing, start=1)}
    out: list[WrittenFile] = []
    # Published together (one wait for the disk, not one per log); locally as hard links.
    with WriteBatch(store) as batch:
        for partition in dict.fromkeys(g[0] for g in groups):
            files = data_files(store, partition)
            planned = {g[1] for g in groups if g[0] == partition}
            by_group: dict[str, list[DataFile]] = {}
            for f in files:
                if f.file_id in planned and f.instant in visible:
                    by_group.setdefault(f.file_id, []).append(f)
            for file_id, group in by_group.items():
                if any(f.kind == "base" and f.instant > instant for f in group):
                    continue
                late = sorted(
                    (
                        f
                        for f in group
                        if f.kind == "log"
                        and f.base_instant < instant
                        and (f.instant > instant or f.instant in kept)
                    ),
                    key=lambda f: (f.instant, f.version),
                )
                after = itertools.count(len(kept) + 1)
                slots = dict(kept)  # a write logs once a group; a second log goes after
                for f in late:
                    version = slots.pop(f.instant, None) or next(after)
                    target = store.path(partition, log_name(file_id, instant, version, f.instant))
                    batch.copy_file(f.path, target)
                    copied_largest(f.path, target)
                    out.append(
                        WrittenFile(
                            partition,
                            target,
                            "log",
                            0,
                            f.size,
                            file_id,
                            prev_commit=instant,
                            log_version=version,
                        )
                    )
    return out


def full_flags(spec: TableSpec, files: Sequence[WrittenFile]) -> dict[str, bool]:
    """Of each file group a write's logs reached ``hoodie.compact.inline.max.delta.commits``
    logs on (counted from its newest merged log, as the writer noted them): whether its
    slice is due for a compaction into a new base (:func:`full_due_of`), else for a log
    compaction."""
    n = spec.options.compaction_delta_commits
    return {
        f.file_id: full_due_of(spec, f.base_bytes, f.log_bytes)
        for f in files
        if f.kind == "log" and (f.slice_logs or f.log_version or 0) >= n
    }


def due_scope(spec: TableSpec, files: Sequence[WrittenFile], full: bool) -> Scope | None:
    """The scope of a compaction (``full``) or a log compaction a write of ``files`` made
    due: the file groups :func:`full_flags` gives it (None: none)."""
    groups = frozenset(g for g, f in full_flags(spec, files).items() if f == full)
    return replace(AUTOMATIC, groups=groups) if groups else None


def planned_already(store: TableStore, spec: TableSpec, scope: Scope) -> bool:
    """Whether a pending compaction or log compaction plans each of the groups ``scope``
    found due: then the write made nothing new due, and no plan is made under the lease
    (read without it: were that plan to go, the next write on those groups finds them due
    again)."""
    if scope.groups is None:
        return False
    timeline = Timeline(store, spec.options.merge_on_read)
    return scope.groups <= compacting(timeline, timeline.pending()).keys()


def slices_compacted_automatically(spec: TableSpec) -> bool:
    """Whether the writes of a merge-on-read table compact its slices (inline or beside
    them): compaction and log compaction alike."""
    o = spec.options
    return o.merge_on_read and (o.compaction_inline or o.compaction_async)


class Compaction(Service):
    """Hudi's compaction: slices with logs into new base files (merge-on-read tables)."""

    action = Action.COMPACTION

    def automatic(self, spec: TableSpec) -> bool:
        return slices_compacted_automatically(spec)

    def due(
        self, spec: TableSpec, files: Sequence[WrittenFile], instants: Sequence[Instant]
    ) -> Scope | None:
        return due_scope(spec, files, full=True)

    def plan(self, store: TableStore, spec: TableSpec, scope: Scope) -> str | None:
        if not scope.automatic:
            return schedule(store, spec, 1, scope.partitions)
        if planned_already(store, spec, scope):
            return None
        o = spec.options
        most = o.compaction_target_io_mb * 1024 * 1024
        return schedule(
            store, spec, o.compaction_delta_commits, scope.partitions, most, by_size=True
        )

    def execute(
        self, store: TableStore, spec: TableSpec, instant: str, threads: int = 4
    ) -> list[WrittenFile]:
        return execute(store, spec, instant, threads)

    def finish(
        self, store: TableStore, spec: TableSpec, instant: str, executed: Any
    ) -> ServiceResult:
        return finish(store, spec, instant, executed)

    def reads_bytes(self, store: TableStore, timeline: Timeline, found: Instant) -> int:
        return sum(planned_sizes(store, compaction_groups(timeline, found)))
