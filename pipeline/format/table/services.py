"""Table services, each an instant of its own: compaction, index compaction, cleaning,
rollback of what dead writers left; and the history of the timeline."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import Any

from dynbucket.format.file_group.slices import data_files, unmerged
from dynbucket.format.hudi import files as names
from dynbucket.format.index.files import index_files, index_instant
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.storage.store import TEMPORARY, TableStore, final_name
from dynbucket.format.table import compaction
from dynbucket.format.table.paths import (
    BUCKET_LAYOUT_DIR,
    HOODIE_DIR,
    META_DIR,
    OUTCOME_DIR,
    RLI_DIR,
    TIMELINE_DIR,
)
from dynbucket.format.table.results import ServiceResult
from dynbucket.format.table.snapshot import Snapshot
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline import outcome
from dynbucket.format.timeline.timeline import LAYOUT_2_DIR, Instant, Timeline, Visible
from dynbucket.format.timeline.transaction import Transaction, WrittenFile, left_pending
from dynbucket.format.timeline.transaction import schedule as schedule_instant

#: The instant in a data or index file name (``_<instant>.`` or a leading ``<instant>.``).
_INSTANT_IN_NAME = re.compile(r"(?:^\.?|_)(\d{17})\.")

log = logging.getLogger(__name__)


def writer_of_temporary(name: str) -> str | None:
    """The instant that was writing a temporary file (None: none can be told): a data
    file's writer (a log file's name also holds its base instant, an older one), an index
    file's, else the first instant in the name."""
    final = final_name(name)
    parsed = names.parse(final) or names.parse("." + final)
    if parsed is not None:
        return parsed.instant
    index = index_instant(final.lstrip("."))
    if index is not None:
        return index
    found = _INSTANT_IN_NAME.search(name)
    return found.group(1) if found is not None else None


def compact(
    store: TableStore, spec: TableSpec, partitions: Sequence[str] | None = None
) -> ServiceResult:
    """Merges each file slice that has log files into a new base file (merge-on-read tables;
    a copy-on-write table has nothing to compact), inline: scheduled and executed at once
    (``compaction.py``).

    On Hudi's timeline as Hudi records a compaction: ``<id>.compaction.requested``,
    ``.compaction.inflight``, completed as ``<id>.commit`` (``compacted``, operation type
    ``COMPACT``). Rows keep their meta fields, so their commit time.
    """
    return compact_due(store, spec, 1, partitions)


def compact_due(
    store: TableStore,
    spec: TableSpec,
    min_logs: int,
    partitions: Sequence[str] | None = None,
    max_bytes: int | None = None,
    by_size: bool = False,
) -> ServiceResult:
    """Executes the compactions left pending (an executor died), then schedules and
    executes one of the slices with at least ``min_logs`` log files (up to ``max_bytes``;
    ``by_size``: only those whose logs reach ``compaction.log-size-ratio``:
    ``compaction.schedule``)."""
    for left in compaction.pending(Timeline(store, spec.options.merge_on_read)):
        compaction.run(store, spec, left.id)
    scheduled = compaction.schedule(store, spec, min_logs, partitions, max_bytes, by_size)
    if scheduled is None:
        return ServiceResult("compaction", None)
    return compaction.run(store, spec, scheduled)


def log_compact_due(
    store: TableStore, spec: TableSpec, min_logs: int, max_bytes: int | None = None
) -> ServiceResult:
    """Executes the log compactions left pending, then schedules and executes one of the
    slices with at least ``min_logs`` logs that are not due for a compaction
    (``compaction.schedule_log``)."""
    timeline = Timeline(store, spec.options.merge_on_read)
    for left in pending_of(timeline, "logcompaction"):
        compaction.run_log(store, spec, left.id)
    scheduled = compaction.schedule_log(store, spec, min_logs, max_bytes=max_bytes)
    if scheduled is None:
        return ServiceResult("logcompaction", None)
    return compaction.run_log(store, spec, scheduled)


def compact_index(
    store: TableStore,
    spec: TableSpec,
    min_files: int | None = None,
    partitions: Sequence[str] | None = None,
    by_size: bool = False,
) -> ServiceResult:
    """Merges a partition's index files into one once it has ``min_files`` of them (of
    ``partitions``; default all), now: scheduled and executed at once (one a process that
    died left pending first). ``by_size``: as :func:`schedule_index_compaction`."""
    for left in pending_of(Timeline(store, spec.options.merge_on_read), "index-compaction"):
        execute_index_compaction(store, spec, left.id)
    scheduled = schedule_index_compaction(store, spec, min_files, partitions, by_size)
    if scheduled is None:
        return ServiceResult("index-compaction", None)
    return execute_index_compaction(store, spec, scheduled)


def schedule_index_compaction(
    store: TableStore,
    spec: TableSpec,
    min_files: int | None = None,
    partitions: Sequence[str] | None = None,
    by_size: bool = False,
    seen: dict[str, int] | None = None,
) -> str | None:
    """Plans an index compaction of the partitions (of ``partitions``; default all) with
    at least ``min_files`` index files, under the lease, and leaves it pending for
    :func:`execute_index_compaction`, which needs no lease: as a compaction does
    (``compaction.py``), it writes only files of its own instant and moves no key, and
    writes meanwhile add index files of later instants. ``by_size``: a partition whose
    deltas are under ``index.compaction.delta-size-ratio`` of its base has a run of its
    newest deltas merged into one (``compaction.merge_run``; its plan names them), not its
    whole index rewritten, so the work per write does not grow with the partition.
    Returns its instant (None: nothing to merge; partitions are looked at before the lease
    is taken, and ``seen`` gets each one's count of index files)."""
    threshold = min_files or spec.options.index_compaction_min_files
    ratio = spec.options.index_compaction_delta_ratio
    index = RecordLevelIndex(store, spec)

    def due(partition: str, visible: Collection[str]) -> bool:
        base, deltas = index.files(partition, visible)
        files = len(unmerged(deltas)) + (base is not None)
        if seen is not None:
            seen[partition] = files
        return files >= threshold

    visible = Timeline(store, spec.options.merge_on_read).visible()
    wanted = [p for p in (partitions or index.partitions()) if due(p, visible)]
    if not wanted:
        return None

    def plan(txn: Transaction) -> dict[str, Any] | None:
        running = any(i.action == "index-compaction" for i in txn.timeline.pending()[:-1])
        if running:
            return None
        whole, merges = [], {}
        for p in (p for p in wanted if due(p, txn.visible)):
            base, deltas = index.files(p, txn.visible)
            if not by_size or base is None or sum(f.size for f in deltas) >= ratio * base.size:
                whole.append(p)
            else:
                merges[p] = [f.name for f in compaction.merge_run(deltas, threshold)]
        return {"partitions": whole, "merges": merges} if whole or merges else None

    return schedule_instant(store, spec, "index-compaction", "compact-index", plan)


def execute_index_compaction(store: TableStore, spec: TableSpec, instant: str) -> ServiceResult:
    """Executes the pending index compaction ``instant`` and completes it: each planned
    partition's index files older than it merged into one base file of it, or the planned
    run of its deltas into one merged delta."""
    timeline = Timeline(store, spec.options.merge_on_read)
    found = next((i for i in timeline.pending() if i.id == instant), None)
    if found is None or found.action != "index-compaction":
        raise ValueError(f"no pending index compaction {instant} in {store.uri}")
    txn = Transaction.resume(store, spec, found, f"index-compactor-{uuid.uuid4().hex[:8]}")
    visible = timeline.visible(as_of=instant)
    index = RecordLevelIndex(store, spec)
    for partition in txn.plan.get("partitions", []):
        merged = index.compact(partition, instant, visible)
        if merged is not None:
            txn.add(WrittenFile(partition, merged.path, "index", 0, merged.size))
    for partition, names_ in txn.plan.get("merges", {}).items():
        by_name = {f.name: f for f in index_files(store, partition)}
        missing = [n for n in names_ if n not in by_name]
        if missing:
            # A clean removed them: what restates them is retained, so this merge is moot
            # (merging is never needed to read), and is skipped, not failed for good.
            log.warning(
                "index compaction %s: index files %s of %s are gone (cleaned); not merged",
                instant, missing, partition or "(root)",
            )  # fmt: skip
            continue
        merged = index.merge_deltas(partition, instant, [by_name[n] for n in names_])
        txn.add(WrittenFile(partition, merged.path, "index", 0, merged.size))
    written = len(txn.files)
    txn.commit({"partitions": written})
    return ServiceResult("index-compaction", txn.id, written)


def clean(store: TableStore, spec: TableSpec, retain: int | None = None) -> ServiceResult:
    """Removes file slices no retained instant can read, now: scheduled and executed at
    once.

    The last ``retain`` completed instants stay readable (``cleaner.commits-retained``): for
    the oldest of them, E, each group keeps its newest base <= E and everything after it,
    except the logs a merged log of a log compaction <= E restates and the logs of older
    slices (a compaction carried them onto its own).
    A clean a process that died left pending is finished first.
    """
    for left in pending_of(Timeline(store, spec.options.merge_on_read), "clean"):
        execute_clean(store, spec, left.id)
    scheduled = schedule_clean(store, spec, retain)
    if scheduled is None:
        return ServiceResult("clean", None)
    return execute_clean(store, spec, scheduled)


def schedule_clean(store: TableStore, spec: TableSpec, retain: int | None = None) -> str | None:
    """Plans a clean under the lease, and leaves it pending for :func:`execute_clean`: the
    plan says the horizon E before any file goes (a read that finds a file gone while the
    clean runs learns that its instant is no longer retained: ``snapshot.missing_file``),
    and the compactions then pending, whose base files the clean must not count (a reader
    may still read the slices they replace). Removing files below a horizon needs no
    lease: horizons only grow. Returns its instant (None: fewer instants than retained)."""
    keep = retain or spec.options.cleaner_commits_retained

    def plan(txn: Transaction) -> dict[str, Any] | None:
        # Retention counts instants that change data; cleans and rollbacks do not.
        completed = [i.id for i in txn.timeline.completed("commit", "compaction")]
        if len(completed) <= keep:
            return None
        pending = [i.id for i in txn.timeline.pending() if i.id != txn.id]
        return {"earliest-retained": completed[-keep], "pending": pending}

    return schedule_instant(store, spec, "clean", "clean", plan)


def execute_clean(store: TableStore, spec: TableSpec, instant: str) -> ServiceResult:
    """Executes the pending clean ``instant`` and completes it."""
    timeline = Timeline(store, spec.options.merge_on_read)
    found = next((i for i in timeline.pending() if i.id == instant), None)
    if found is None or found.action != "clean":
        raise ValueError(f"no pending clean {instant} in {store.uri}")
    txn = Transaction.resume(store, spec, found, f"cleaner-{uuid.uuid4().hex[:8]}")
    earliest = txn.plan["earliest-retained"]
    seen = timeline.visible()
    # What was visible when it was planned: not what completed since, from then pending.
    visible = Visible(set(seen) - set(txn.plan.get("pending", [])), seen.floor, seen.rolled_back)
    removed = 0
    folders = []
    on_timeline = {i.id for i in timeline.instants()}
    leftovers = _RolledBack(store, lambda i: i not in on_timeline and i not in seen)
    for partition in Snapshot(store, spec).partitions():
        files = data_files(store, partition)
        removed += _clean_files(store, files, visible, earliest, True) + leftovers.remove(files)
        folders.append(store.path(partition))
    for partition in RecordLevelIndex(store, spec).partitions():
        files = index_files(store, partition)
        removed += _clean_files(store, files, visible, earliest, False) + leftovers.remove(files)
        folders.append(store.path(RLI_DIR, partition))
    removed += _clean_temporary(store, visible, folders, spec.options.lock_lease_seconds)
    txn.commit({"earliest-retained": earliest, "files-removed": removed})
    return ServiceResult("clean", txn.id, 0, removed)


class _RolledBack:
    """Files of instants that were rolled back, written after their rollback removed their
    files (a service's executor paused past its scheduler's lease, which wrote on when it
    woke up): never read (their instant is on no timeline), removed by a clean. An instant
    is one when it is on no timeline (``gone``) and its outcome says rolled back."""

    def __init__(self, store: TableStore, gone: Callable[[str], bool]) -> None:
        self.store, self.gone = store, gone
        self._decided: dict[str, bool] = {}

    def remove(self, files: Iterable[Any]) -> int:
        removed = 0
        for f in files:
            if self.gone(f.instant) and self._rolled_back(f.instant):
                self.store.delete(f.path)
                removed += 1
        return removed

    def _rolled_back(self, instant: str) -> bool:
        if instant not in self._decided:
            found = outcome.read(self.store, instant)
            self._decided[instant] = found is not None and found.state == outcome.ROLLED_BACK
        return self._decided[instant]


def pending_of(timeline: Timeline, action: str) -> list[Instant]:
    """Scheduled and not completed instants of ``action`` (one an executor that died left,
    or one running now; not one whose scheduler died before its plan was recorded, which
    the next writer rolls back)."""
    return left_pending(timeline, action)


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
        floor = max(bases, default="")
        # Logs (index deltas) a merged one restates, once it is retained instead of them.
        runs = [
            (f.base_instant, f.merges_from, f.instant)
            for f in group
            if f.merges_from and f.instant <= earliest
        ]
        # Oldest first: a file is removed before any file that restates it, so that a
        # listing in between never sees a restated file without its restater.
        for f in sorted(group, key=lambda f: (f.instant, f.name)):
            merged = f.kind != "base" and any(
                f.base_instant == b and first <= f.instant < last for b, first, last in runs
            )
            # A log on a slice older than the floor's: written while the floor's compaction
            # ran, and carried onto its slice (no retained view reads the older slice), once
            # its writer is not retained (retained instants' files are all there).
            carried = by_group and f.kind == "log" and f.base_instant < floor < f.instant
            carried = carried and f.instant < earliest
            if f.instant < floor or merged or carried:
                store.delete(f.path)
                removed += 1
    return removed


def _clean_temporary(
    store: TableStore, visible: Collection[str], folders: Iterable[str], lease_seconds: float
) -> int:
    """Temporary files that killed task attempts left behind, for completed instants (a
    pending instant's are removed by its rollback). Only local filesystems write files
    under temporary names, beside their final names: in the data and index ``folders``
    that clean lists anyway, and in the table's metadata folders, never in a walk of the
    whole table."""
    if not store.is_local:
        return 0
    # A temporary file of a completed instant may still be on its way (a compaction copying
    # that instant's logs onto its slice): only one older than any writer's lease is left.
    young = time.time() - lease_seconds
    removed = 0
    meta = [
        store.path(d) for d in (HOODIE_DIR, LAYOUT_2_DIR, META_DIR, TIMELINE_DIR, BUCKET_LAYOUT_DIR)
    ]
    outcomes = store.path(OUTCOME_DIR)
    for folder in sorted({*folders, *meta, outcomes}):
        for info in store.list_files(folder):
            if not TEMPORARY.match(info.base_name):
                continue
            if info.mtime is not None and info.mtime.timestamp() > young:
                continue
            instant = writer_of_temporary(info.base_name)
            # An outcome's exclusive create lives for a moment: an old temporary one is a
            # killed creator's, whatever its instant became.
            if folder == outcomes or (instant is not None and instant in visible):
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
