"""Cleaning (Hudi's ``clean``): file slices no retained instant reads removed, and the
temporary files killed writers left and the files of rolled-back instants."""

from __future__ import annotations

import logging
import posixpath
import re
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow.fs as pafs

from dynbucket.format.file_group import adopted
from dynbucket.format.file_group.slices import DataFile, data_files, parsed_data_files
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi.commit import extra_of
from dynbucket.format.index.file_names import index_files, index_instant
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.metadata import partitions as metadata_partitions
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.format.read.snapshot import Snapshot, cleaning_horizon
from dynbucket.format.services.service import (
    AUTOMATIC,
    Scope,
    Service,
    ServiceResult,
    resume,
    run_now,
)
from dynbucket.format.storage.store import TEMPORARY, TableStore, final_name
from dynbucket.format.table.paths import (
    BUCKET_LAYOUT_DIR,
    HOODIE_DIR,
    META_DIR,
    OUTCOME_DIR,
    RLI_DIR,
    SCHEMA_DIR,
    TIMELINE_DIR,
)
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline import outcome
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.archive import foreign_instants, replaced_files
from dynbucket.format.timeline.timeline import LAYOUT_2_DIR, Instant, Timeline, Visible
from dynbucket.format.timeline.transaction import (
    DETACHED_ACTIONS,
    UNSEEN_FROM,
    WrittenFile,
)
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


def clean(store: TableStore, spec: TableSpec, retain: int | None = None) -> ServiceResult:
    """Removes file slices no retained instant can read, now: scheduled and executed at
    once.

    The last ``retain`` completed instants stay readable (``cleaner.commits-retained``): for
    the oldest of them, E, each group keeps its newest base <= E and everything after it,
    except the logs a merged log of a log compaction <= E restates and the logs of older
    slices (a compaction carried them onto its own).
    A clean a process that died left pending is finished first.
    """
    return run_now(Clean(), store, spec, Scope(retain=retain))


#: The data files a clean removes, named in its plan before the first goes (a table with a
#: metadata table: ``execute_clean``).
REMOVING = "removing"


@dataclass(frozen=True)
class CleanPlan:
    """A clean's plan: the horizon (the oldest retained instant: each group keeps its
    newest base at or before it and what follows), and the instants pending when it was
    planned (their files are not counted: a reader may still read what they replace)."""

    earliest_retained: str
    pending: tuple[str, ...] = ()

    @classmethod
    def of(cls, plan: Mapping[str, Any]) -> CleanPlan:
        """The plan as the timeline recorded it (``Timeline.plan``)."""
        return cls(plan["earliest-retained"], tuple(plan.get("pending", [])))

    def entries(self) -> dict[str, Any]:
        """The plan's entries as the timeline records them."""
        return {"earliest-retained": self.earliest_retained, "pending": list(self.pending)}


def schedule_clean(store: TableStore, spec: TableSpec, retain: int | None = None) -> str | None:
    """Plans a clean under the lease, and leaves it pending for :func:`execute_clean`: the
    plan says the horizon E before any file goes (a read that finds a file gone while the
    clean runs learns that its instant is no longer retained: ``snapshot.missing_file``),
    and the compactions then pending, whose base files the clean must not count (a reader
    may still read the slices they replace). Removing files below a horizon needs no
    lease: horizons only grow. Returns its instant (None: nothing to clean).

    The plan is first made from a look at the timeline without the lease: when the
    horizon would not move (fewer instants than retained, or another writer's pending
    write holds it at the last clean's), no instant is begun. A clean is due after every
    ``hoodie.clean.max.commits`` data commits until one completes, so beside another
    writer, whose pending writes hold the horizon back, every write scheduled a clean
    that planned nothing: the lease, an instant's files and their removal, each write
    (on S3 about 15 requests)."""
    keep = retain or spec.options.cleaner_commits_retained
    if _plan(Timeline(store, spec.options.merge_on_read), keep, None) is None:
        return None  # looked at again by the next write it is due after
    return schedule_instant(
        store, spec, Action.CLEAN, "clean", lambda txn: _plan(txn.timeline, keep, txn.id)
    )


def _plan(timeline: Timeline, keep: int, own: str | None) -> dict[str, Any] | None:
    """A clean's plan entries as ``timeline`` stands (``own``: the clean's instant, when
    begun), or None: nothing to clean."""
    listed = timeline.instants()
    # Retention counts instants that change data; cleans and rollbacks do not.
    data = (Action.COMMIT, Action.COMPACTION)
    completed = [i.id for i in listed if i.completed and i.action in data]
    if len(completed) <= keep:
        return None
    pending = [i for i in listed if not i.completed and i.id != own]
    horizon = _horizon(timeline, completed, completed[-keep], pending)
    last = cleaning_horizon(timeline)
    # Horizons only grow: below the last one (a pending write's bound), the last clean
    # has removed all this one would, and readers would count what it removed as lost.
    if horizon is None or (last is not None and horizon <= last.earliest):
        return None
    return CleanPlan(horizon, tuple(i.id for i in pending)).entries()


def _horizon(
    timeline: Timeline, completed: list[str], retained: str, pending: list[Instant]
) -> str | None:
    """The clean's horizon: the oldest retained instant, or older while a data write of
    another writer is pending (several writers): it reads the slices of the instants that
    were completed when it began, which a clean past its oldest unseen instant would remove
    from under it (a copy-on-write rewrite would find its base gone). So the horizon stays
    below the oldest instant pending when it began, or its own (its plan's
    ``unseen-from``). None: nothing is old enough to clean."""
    bounds = []
    for p in pending:
        if p.action in DETACHED_ACTIONS:
            continue
        plan = timeline.plan(p)
        unseen = {**plan, **extra_of(plan)}.get(UNSEEN_FROM)
        if isinstance(unseen, str):  # one writer's pending writes are settled first
            bounds.append(unseen)
    if not bounds:
        return retained
    below = [i for i in completed if i < min(bounds)]
    return min(retained, below[-1]) if below else None


def execute_clean(store: TableStore, spec: TableSpec, instant: str) -> ServiceResult:
    """Executes the pending clean ``instant`` and completes it."""
    timeline = Timeline(store, spec.options.merge_on_read)
    txn = resume(store, spec, instant, Action.CLEAN, "cleaner")
    planned = CleanPlan.of(txn.plan)
    earliest = planned.earliest_retained
    seen = timeline.visible()
    # What was visible when it was planned: not what completed since, from then pending.
    visible = Visible(set(seen) - set(planned.pending), seen.floor, seen.rolled_back)
    folders = []
    on_timeline = {i.id for i in timeline.instants()}
    leftovers = _RolledBack(store, lambda i: i not in on_timeline and i not in seen)
    # 1. The data files to remove, decided before any goes.
    listed = metadata_partitions.enabled(store)
    listing = MetadataTable(store).listing() if listed else {}
    doomed: list[Any] = []
    data: list[str] = []  # their names, relative (the metadata table's ``files``)
    for partition in Snapshot(store, spec).partitions():
        files = data_files(store, partition)
        mine = _cleanable(files, visible, earliest, True) + leftovers.of(files)
        doomed += mine
        data += [posixpath.join(partition, posixpath.basename(f.path)) for f in mine]
        data += _gone(store, partition, files, listing.get(partition, {}), visible, earliest)
        folders.append(store.path(partition))
    # With a metadata table, the clean also removes the groups Hudi's replace commits
    # replaced (else the archiver removes them before it archives the replace commit).
    replaced = _replaced_groups(store, timeline, earliest) if listed else []
    data += [name for _, name in replaced]
    # 2. A table with a metadata table needs their names (its ``files`` partition drops
    # them), named in the plan first: an executor paused after removing some, and the one
    # that resumed the clean meanwhile, which finds them gone, name them still (else the
    # metadata table lists files that are not there, and Hudi's readers fail on them).
    if listed:
        data = sorted({*data, *txn.plan.get(REMOVING, ())})
        txn.record_plan({REMOVING: data})
    # 3. Remove them, oldest first, and the replaced groups'; then the index files, the
    # temporaries.
    log.debug(
        "clean %s (horizon %s, pending %s) removes %s",
        txn.id,
        earliest,
        planned.pending,
        [f.path for f in doomed],
    )
    removed = len(_remove(store, doomed))
    for path, _ in replaced:
        store.delete(path)
    removed += len(replaced)
    for partition in RecordLevelIndex(store, spec).partitions():
        files = index_files(store, partition)
        removed += len(_remove(store, _cleanable(files, visible, earliest, False)))
        removed += len(_remove(store, leftovers.of(files)))
        folders.append(store.path(RLI_DIR, partition))
    removed += _clean_temporary(store, visible, folders, spec.options.lock_lease_seconds)
    names = {"removed": data} if listed else {}
    txn.commit({"earliest-retained": earliest, "files-removed": removed, **names})
    return ServiceResult(Action.CLEAN, txn.id, 0, removed)


def _gone(
    store: TableStore,
    partition: str,
    files: list[DataFile],
    listed: Mapping[str, int],
    visible: Collection[str],
    earliest: str,
) -> list[str]:
    """Files the metadata table lists in ``partition`` that are not stored and that this
    clean would remove (no retained view reads them): a clean an earlier version completed
    after its executor was killed left such names listed (it named only what it removed
    itself). Named again, the listing drops them; a listed file that a retained view reads
    stays listed (lost, not cleaned: ``check`` reports it). Decided with the stored files,
    which are decided without them (a missing base never moves what is kept)."""
    stored = {posixpath.basename(f.path) for f in files}
    missing = [
        pafs.FileInfo(store.path(partition, name), pafs.FileType.File, size=0)
        for name in listed
        if name not in stored
    ]
    if not missing:
        return []
    ghosts = parsed_data_files(missing, adopted.load(store))
    out = _cleanable([*files, *ghosts], visible, earliest, True)
    paths = {f.path for f in ghosts}
    return [posixpath.join(partition, posixpath.basename(f.path)) for f in out if f.path in paths]


def _remove(store: TableStore, files: Sequence[Any]) -> list[str]:
    """Removes ``files`` in their order; returns their paths."""
    for f in files:
        store.delete(f.path)
    return [f.path for f in files]


def _replaced_groups(
    store: TableStore, timeline: Timeline, earliest: str | None
) -> list[tuple[str, str]]:
    """The files stored of the groups Hudi's replace commits before ``earliest`` replaced
    (Hudi's cleaner removes them; full path and path in the table each)."""
    if earliest is None:
        return []
    out = []
    for f in foreign_instants(timeline):
        if f.done and f.id < earliest:
            out += replaced_files(store, f)
    return out


class _RolledBack:
    """Files of instants that were rolled back, written after their rollback removed their
    files (a service's executor paused past its scheduler's lease, which wrote on when it
    woke up): never read (their instant is on no timeline), removed by a clean. An instant
    is one when it is on no timeline (``gone``) and its outcome says rolled back."""

    def __init__(self, store: TableStore, gone: Callable[[str], bool]) -> None:
        self.store, self.gone = store, gone
        self._decided: dict[str, bool] = {}

    def of(self, files: Iterable[Any]) -> list[Any]:
        """Those of ``files`` that are such files."""
        return [f for f in files if self.gone(f.instant) and self._rolled_back(f.instant)]

    def _rolled_back(self, instant: str) -> bool:
        if instant not in self._decided:
            found = outcome.read(self.store, instant)
            self._decided[instant] = found is not None and found.state == outcome.ROLLED_BACK
        return self._decided[instant]


def _cleanable(
    files: list[Any], visible: Collection[str], earliest: str, by_group: bool
) -> list[Any]:
    """The files no retained instant reads, in the order to remove them."""
    groups: dict[str, list[Any]] = {}
    for f in files:
        if f.instant in visible:
            groups.setdefault(f.file_id if by_group else "", []).append(f)
    out = []
    for group in groups.values():
        bases = [f for f in group if f.kind == "base" and f.instant <= earliest]
        newest = max(bases, key=lambda f: f.instant, default=None)
        floor = newest.instant if newest is not None else ""
        # An index base restates the instants before its ``until`` only: the deltas from it
        # on are read after it.
        covered = newest.restates_until if newest is not None else ""
        # Logs (index deltas) a merged one restates, once it is retained instead of them.
        runs = [
            (f.base_instant, f.merges_from, f.restates_until)
            for f in group
            if f.merges_from and f.instant <= earliest
        ]
        # Oldest first: a file is removed before any file that restates it, so that a
        # listing in between never sees a restated file without its restater.
        for f in sorted(group, key=lambda f: (f.instant, f.name)):
            # A log named on its slice's base (version 6) is restated by a merged log on
            # that base. One named by its own instant (version 8 on) is read on whichever
            # slice its instant falls in, and a merged log after it in that slice restates
            # it for every retained view (``slices.after_merged``).
            merged = f.kind != "base" and any(
                (f.base_instant in (b, f.instant)) and first <= f.instant < last
                for b, first, last in runs
            )
            # A log on a slice older than the floor's: written while the floor's compaction
            # ran, and carried onto its slice (no retained view reads the older slice), once
            # its writer is not retained (retained instants' files are all there).
            carried = by_group and f.kind == "log" and f.base_instant < floor < f.instant
            carried = carried and f.instant < earliest
            superseded = f.instant < (floor if f.kind == "base" else covered)
            # A log carried onto the floor's slice (or a later one) from a write pending
            # when its compaction was planned is older than its base, and read on it.
            superseded = superseded and not (
                by_group and f.kind == "log" and f.base_instant >= floor
            )
            if superseded or merged or carried:
                out.append(f)
    return out


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
        store.path(d)
        for d in (HOODIE_DIR, LAYOUT_2_DIR, META_DIR, TIMELINE_DIR, BUCKET_LAYOUT_DIR, SCHEMA_DIR)
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


class Clean(Service):
    """Hudi's clean: completed in ``execute`` (removing files below a horizon needs no
    lease: horizons only grow)."""

    action = Action.CLEAN

    def automatic(self, spec: TableSpec) -> bool:
        return spec.options.clean_automatic

    def due(
        self, spec: TableSpec, files: Sequence[WrittenFile], instants: Sequence[Instant]
    ) -> Scope | None:
        """Due once ``hoodie.clean.max.commits`` data commits followed the last clean."""
        since = 0
        for i in reversed(instants):
            if i.action == Action.CLEAN and i.completed:
                break
            since += i.action in (Action.COMMIT, Action.COMPACTION) and i.completed
        return AUTOMATIC if since >= spec.options.clean_max_commits else None

    def plan(self, store: TableStore, spec: TableSpec, scope: Scope) -> str | None:
        return schedule_clean(store, spec, scope.retain)

    def execute(self, store: TableStore, spec: TableSpec, instant: str, threads: int = 4) -> Any:
        return execute_clean(store, spec, instant)
