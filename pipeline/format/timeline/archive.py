"""Archival: old instants leave the active timeline, so that its cost stays flat.

A table that takes a micro-batch every few seconds makes thousands of instants a day; every
write and read lists the active timeline, so it must stay short. As Hudi does
(``hoodie.keep.min.commits`` / ``hoodie.keep.max.commits``): once more than ``keep_max``
instants are active, the oldest go until ``keep_min`` are left, never one at or after the
earliest pending instant (a pending compaction included), nor the newest commit before
that instant (so that no pending instant's files are older than the active timeline's
first commit, which readers take for an archived, committed one's), nor one after the
earliest instant the last clean retains.

1. Under the writer lease, pick the instants; the newest of them is the **floor**.
2. Write them to Hudi's archived timeline (``hudi/archived.py``), so Hudi's tools still
   list the history.
3. Record what readers and writers still need of them in ``.hoodie/.dynbucket/archive/
   <floor>.json`` (an exclusive create: a stalled archiver never lowers the floor, the
   newest record is the one in force): the floor; the instants at or below it that were
   rolled back (their leftover files stay invisible); each stream's last batch; the slot
   counts of archived commits; the cleaning horizon.
4. Check the lease, then remove the instants' files from the active timeline, oldest
   first, then older archive records (the next archival removes what a crash left).

Every instant at or below the floor was completed when it was archived, so a file of one
is visible (Hudi's rule too: a file older than the active timeline is committed), unless
its instant was rolled back. A crash between 3 and 4 leaves instants both archived and
active: both say completed.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass

from dynbucket.format.hudi import archived, lsm_history
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi.instant_files import HUDI_ACTIONS, HudiAction, State, suffix
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import ARCHIVE_DIR, OUTCOME_DIR
from dynbucket.format.timeline import outcome
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.archive_record import Archived, load
from dynbucket.format.timeline.lock import WriterLock
from dynbucket.format.timeline.timeline import (
    HudiInstant,
    Instant,
    Timeline,
    document_of,
    file_name,
    hudi_instants,
)

#: An instant id: 17 digits (an outcome file's whole name).
_INSTANT_ID = re.compile(r"^\d{17}$")


@dataclass(frozen=True)
class ArchiveResult:
    """What an archival did (``floor`` empty: nothing to archive)."""

    archived: int = 0
    floor: str = ""


def due(timeline: Timeline, keep_max: int) -> bool:
    """Whether the active timeline holds more than ``keep_max`` instants."""
    return len(timeline.instants()) > keep_max


def archive(
    store: TableStore,
    merge_on_read: bool,
    keep_min: int,
    keep_max: int,
    lease_seconds: float,
    wait_seconds: float = 0.0,
) -> ArchiveResult:
    """Archives the oldest instants once more than ``keep_max`` are active (module doc)."""
    timeline = Timeline(store, merge_on_read)
    if not due(timeline, keep_max):
        return ArchiveResult()
    with WriterLock(store, lease_seconds, wait_seconds) as lock:
        before = load(store)
        # An archival that crashed in step 4 left some of its instants active.
        for stray in [i for i in timeline.instants() if i.id <= before.floor]:
            timeline.forget_archived(stray)
        # 1.
        foreign = foreign_instants(timeline)
        chosen = _choose(timeline, keep_min, foreign)
        if not chosen:
            return ArchiveResult()
        record = _record(store, timeline, before, chosen)
        theirs = [f for f in foreign if f.done and f.id <= record.floor]
        # 2. (a group a replace commit replaced goes first, as Hudi's cleaner removes it
        # before its archiver moves the replace commit that hides it from readers)
        for f in theirs:
            remove_replaced(store, f)
        hudi = [i for i in chosen if i.action in HUDI_ACTIONS]
        if timeline.layout == 2 and (hudi or theirs):
            _write_lsm_history(store, timeline, hudi, theirs)
        elif hudi or theirs:
            _write_hudi_archive(store, hudi, merge_on_read, record.floor, theirs)
        # 3.
        store.create_exclusive(store.path(ARCHIVE_DIR, f"{record.floor}.json"), record.to_json())
        # 4.
        lock.verify()
        for f in theirs:
            for name in sorted(f.files, key=lambda n: n == f.done):  # completed last
                store.delete(store.path(timeline.hudi_dir, name))
        for instant in chosen:
            timeline.forget_archived(instant)
        for info in store.list_files(store.path(ARCHIVE_DIR)):
            if info.base_name.endswith(".json") and info.base_name < f"{record.floor}.json":
                store.delete(info.path)
    return ArchiveResult(len(chosen), record.floor)


def foreign_instants(timeline: Timeline) -> list[HudiInstant]:
    """The instants of Hudi's timeline folder that dynbucket's timeline does not read."""
    ours = {i.id for i in timeline.instants() if i.action in HUDI_ACTIONS}
    return [h for h in hudi_instants(timeline.store) if h.id not in ours]


def replaced_files(store: TableStore, f: HudiInstant) -> list[tuple[str, str]]:
    """The files stored of the groups a completed replace commit replaced: (full path,
    path in the table) each."""
    if f.action != HudiAction.REPLACE_COMMIT:
        return []
    doc = document_of(store.read_bytes(store.path(Timeline(store).hudi_dir, f.done)))
    out = []
    for partition, ids in (doc.get("partitionToReplaceFileIds") or {}).items():
        gone = set(ids)
        for info in store.list_files(store.path(partition)):
            parsed = names.parse(info.base_name)
            if parsed is not None and parsed.file_id in gone:
                out.append((info.path, posixpath.join(partition, info.base_name)))
    return out


def remove_replaced(store: TableStore, f: HudiInstant) -> list[str]:
    """Removes the files of the groups a completed replace commit replaced; returns them
    (paths in the table)."""
    found = replaced_files(store, f)
    for path, _ in found:
        store.delete(path)
    return [name for _, name in found]


def _choose(timeline: Timeline, keep_min: int, foreign: list[HudiInstant]) -> list[Instant]:
    instants = timeline.instants()
    # A pending instant holds archival back, Hudi's own as well.
    pending = [i.id for i in instants if not i.completed] + [f.id for f in foreign if not f.done]
    limit = min(pending, default=None)
    completed = [i for i in instants if i.completed]
    horizon = None
    for clean in reversed(timeline.completed(Action.CLEAN)):
        horizon = timeline.metadata(clean).get("earliest-retained")
        if horizon:
            break
    if limit is not None:
        # A reader takes a file older than the active timeline's first completed commit
        # for an archived one's, committed (Hudi's rule; hudi-rs 0.5 checks no more on a
        # version 6 table): with every commit below the earliest pending instant archived,
        # that instant's files (a compaction whose executor died, a dead writer's) would
        # read as committed. The newest commit below it stays active.
        below = [i.id for i in completed if i.id < limit and Action(i.action).on_commits_timeline]
        limit = below[-1] if below else limit
    chosen = []
    for i in completed[: max(0, len(completed) - keep_min)]:
        if (limit is not None and i.id >= limit) or (horizon and i.id >= horizon):
            break
        chosen.append(i)
    return chosen


def _record(
    store: TableStore, timeline: Timeline, before: Archived, chosen: list[Instant]
) -> Archived:
    floor = chosen[-1].id
    streams = dict(before.streams)
    slots = set(before.slots)
    earliest = before.earliest_retained
    deletes = dict(before.deletes)
    for instant in chosen:
        if instant.action in HUDI_ACTIONS:
            stats = timeline.raw(instant).get("partitionToWriteStats") or {}
            for partition, group_stats in stats.items():
                for stat in group_stats:
                    if stat.get("numDeletes"):
                        key = f"{partition}/{stat['fileId']}"
                        deletes[key] = deletes.get(key, 0) + int(stat["numDeletes"])
        meta = timeline.metadata(instant)
        if instant.action == Action.COMMIT:
            stream = meta.get("stream")
            if stream:
                streams[stream["id"]] = max(streams.get(stream["id"], -1), int(stream["batch"]))
            slots.add(meta.get("slots"))
        if instant.action == Action.CLEAN and meta.get("earliest-retained"):
            earliest = max(earliest or "", meta["earliest-retained"])
    rolled_back = set(before.rolled_back)
    for info in store.list_files(store.path(OUTCOME_DIR)):
        name = info.base_name
        # An instant's outcome is named by its id; a temporary file a killed exclusive
        # create left (``.<id>.tmp-...``, empty) is no outcome, and sorts below any floor.
        if _INSTANT_ID.match(name) and name <= floor and name not in rolled_back:
            found = outcome.read(store, name)
            if found is not None and found.state == outcome.ROLLED_BACK:
                rolled_back.add(name)
    return Archived(
        floor,
        frozenset(rolled_back),
        streams,
        frozenset(slots),
        earliest,
        before.instants + len(chosen),
        deletes,
    )


def _write_lsm_history(
    store: TableStore, timeline: Timeline, instants: list[Instant], theirs: list[HudiInstant]
) -> None:
    """Step 2 for timeline layout 2: Hudi 1.x's LSM history (``hudi/lsm_history.py``), each
    instant with its completion time, its completed file and its requested file."""
    named = [
        (timeline.completed_name(i), file_name(i, State.REQUESTED, bool(timeline.merge_on_read)))
        for i in instants
    ]
    named += [(f.done, next((n for n in f.files if n.endswith(".requested")), "")) for f in theirs]
    entries = []
    for done, requested in sorted(named):
        head, _, action = done.partition(".")
        try:
            plan = store.read_bytes(store.path(timeline.hudi_dir, requested.rpartition("/")[2]))
        except (FileNotFoundError, IsADirectoryError):
            plan = b""
        data = store.read_bytes(store.path(timeline.hudi_dir, done))
        entries.append(lsm_history.Entry(head[:17], head[18:], action, data, plan))
    lsm_history.append(store, entries)


def _write_hudi_archive(
    store: TableStore,
    instants: list[Instant],
    merge_on_read: bool,
    floor: str,
    theirs: Sequence[HudiInstant] = (),
) -> None:
    entries = []
    for instant in instants:
        for state in (State.REQUESTED, State.INFLIGHT, State.COMPLETED):
            action = suffix(instant.action, state, merge_on_read).split(".")[0]
            if action == "inflight":  # a copy-on-write write's inflight file
                action = Action.COMMIT
            entries.append((instant.id, action, state.name))
    for f in theirs:
        for name in ("REQUESTED", "INFLIGHT", "COMPLETED"):
            entries.append((f.id, f.action, name))
    entries.sort()
    archived.append(store, archived.entries_file(entries, floor))
