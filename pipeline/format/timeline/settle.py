"""Ending another writer's pending instant: published if its writer committed it, else
rolled back with every file it wrote.

A writer that begins, schedules or commits finds the instants others left pending: a
writer that died, or one paused past its lease (``lock.py``). Each is ended as its
outcome says (``outcome.py``; the taker decides "rolled back" when there is none yet, so a
stalled writer that wakes finds its commit refused), and the lease's line of takers
settles what an expired lease named (``WriterLock.superseded``).
"""

from __future__ import annotations

import logging
import posixpath
import re

from dynbucket.base.errors import CommitFailedError
from dynbucket.format.hudi import files as names
from dynbucket.format.hudi import properties
from dynbucket.format.hudi.files import PARTITION_METADATA
from dynbucket.format.index.file_names import index_instant
from dynbucket.format.storage.store import TableStore, final_name
from dynbucket.format.table.paths import BUCKET_LAYOUT_DIR, HOODIE_DIR, RLI_DIR, SCHEMA_DIR
from dynbucket.format.timeline import heartbeat, outcome
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.lock import WriterLock
from dynbucket.format.timeline.timeline import Instant, Timeline

log = logging.getLogger(__name__)


def settle_superseded(store: TableStore, timeline: Timeline, lock: WriterLock) -> dict[str, str]:
    """Settles the instants whose writers held the expired lease ``lock`` took over while
    committing them, or an expired lease before it that nobody settled (several writers:
    ``WriterLock.superseded``): each was past its checks, so it commits only if it had
    passed its commit point too."""
    owed = lock.superseded
    if not owed:
        return {}
    pending = {i.id: i for i in timeline.pending()}
    done = {}
    for instant_id in owed:
        found = pending.get(instant_id)
        if found is not None:
            done[found.id] = settle(store, timeline, found, lock.owner)
            heartbeat.forget(store, found.id)
    lock.settled(owed)
    return done


def settle(store: TableStore, timeline: Timeline, instant: Instant, writer: str) -> str:
    """Ends another writer's pending instant as its outcome says (deciding it rolled back
    if it has none yet); returns what was done: ``rolled back``, ``published`` or
    ``nothing`` (it was published in between)."""
    if instant.id <= timeline.archived().floor:
        # Archived as completed; a crash of the archival left a state file behind.
        timeline.forget_archived(instant)
        return "nothing"
    decided = outcome.decide_rollback(store, instant.id, writer)
    if decided is None:
        return "nothing"
    if decided.state == outcome.COMMITTED:
        assert decided.document is not None
        outcome.publish(store, timeline, instant, decided.document)
        log.info("published instant %s, which its writer had committed", instant.id)
        return "published"
    if timeline.is_published(instant) or instant.id <= timeline.archived().floor:
        # Its writer published and forgot its outcome after our look at the timeline (and
        # it may have been archived since, while this writer stalled).
        if decided.writer == writer:
            outcome.forget(store, instant.id)
        return "nothing"
    rollback_instant(store, timeline, instant)
    heartbeat.forget(store, instant.id)
    return "rolled back"


def rollback_instant(store: TableStore, timeline: Timeline, instant: Instant) -> list[str]:
    """Removes every data and index file of a pending instant, the partition metadata of
    partitions it created and the folders it leaves empty, then its timeline entries."""
    if instant.completed:
        raise CommitFailedError(f"instant {instant.id} is completed; it cannot be rolled back")
    removed = []
    # Base files end in ``_<id>.parquet``, log files' write tokens read ``-<id>-``, index
    # files start with ``<id>.``; temporary files of either keep the name.
    token = re.compile(rf"(^|[_.-]){instant.id}([._-]|$)")
    hoodie = store.path(HOODIE_DIR)
    # Inside .hoodie/, only the index entries and bucket layouts are an instant's files.
    own = tuple(store.path(d) + "/" for d in (RLI_DIR, BUCKET_LAYOUT_DIR, SCHEMA_DIR))
    listed = [
        (info, _parsed(info.base_name))
        for info in store.walk(store.root)
        if not info.path.startswith(hoodie + "/") or info.path.startswith(own)
    ]
    # A compaction's finish carries the logs written on a planned group's old slice while
    # it ran onto its new slice: copies, each beside its original (the same writer's log of
    # the same group on an older slice). A log with no original there is a writer's own,
    # put on the new slice after it saw a copy (``FileSlice.next_log``): it stays, and
    # reads on the slice before, as a log on a slice whose base never came does.
    originals = {
        (posixpath.dirname(info.path), p.file_id, p.instant)
        for info, p in listed
        if p is not None and p.kind == "log" and p.base_instant < instant.id
    }

    def written_by_it(path: str, parsed: names.ParsedName | None) -> bool:
        # A data file by its writer's instant only: a log another writer put on a slice
        # whose base instant is this one, or a merged log whose run starts at it, is theirs.
        if parsed is not None:
            carried = (
                instant.action == Action.COMPACTION
                and parsed.base_instant == instant.id
                and (posixpath.dirname(path), parsed.file_id, parsed.instant) in originals
            )
            return parsed.instant == instant.id or carried
        # An index file by its writer's instant too: a merged delta names the instants it
        # restates (``m<first>-<until>``), a pending write's among them.
        index = index_instant(final_name(posixpath.basename(path)))
        if index is not None:
            return index == instant.id
        return token.search(posixpath.basename(path).lstrip(".")) is not None

    for info, parsed in listed:
        if written_by_it(info.path, parsed) or (
            info.base_name == PARTITION_METADATA and _created_by(store, info.path, instant.id)
        ):
            store.delete(info.path)
            removed.append(info.path)
    store.remove_empty_dirs(posixpath.dirname(p) for p in removed)
    timeline.discard(instant)
    log.info("rolled back instant %s: %d file(s) removed", instant.id, len(removed))
    return removed


def _parsed(name: str) -> names.ParsedName | None:
    """What a data file's name says, a temporary one's by its final name."""
    final = final_name(name)
    return names.parse(final) or names.parse("." + final)


def _created_by(store: TableStore, path: str, instant: str) -> bool:
    """Whether a partition's metadata file was written by ``instant`` (the first write of
    the partition): a rolled-back first write leaves no partition behind."""
    try:
        return properties.loads(store.read_bytes(path)).get("commitTime") == instant
    except (OSError, ValueError):
        return False
