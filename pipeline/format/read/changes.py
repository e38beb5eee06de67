"""Incremental reads: what the instants after one changed (Hudi's incremental query).

Downstream jobs of a lakehouse table read what changed since the point they last read,
not the whole table. Hudi's incremental query returns, for the instants of a range, the
latest version of each record they wrote, with its ``_hoodie_commit_time`` (``_instant``
here, as every read names it); a record deleted in the range is not returned (the query
reports no deletes). The range is read as hudi-rs reads it, by the table's version:

* **Timeline layout 1 (table version 6)**: by instant time (the time an instant was
  requested), ``start`` excluded, ``end`` included. Several writers finish out of order:
  a write requested before another may complete after it, with the older time. So a range
  never reaches past a write still pending: without an ``end``, it ends at the newest
  instant completed before the oldest pending write; an ``end`` past one is refused
  (``IncompleteRangeError``: Hudi 0.14's readers refuse it too). A consumer that passes the
  newest ``_instant`` it read (or the ``end`` it read up to, :func:`feed_end`) as its next
  ``start`` never skips a commit.
* **Timeline layout 2 (table versions 8 and 9)**: by completion time, as Hudi 1.x and
  hudi-rs range it: the instants completed after ``start`` up to ``end``. An instant's
  completion time is chosen at its commit point, after every one on the timeline, so a
  write that completes later is always after a range read before: a consumer that passes
  the ``end`` it read up to (:func:`feed_end`) as its next ``start`` never skips a commit.

The steps:

1. The range: the instants it takes (above), and the snapshot as of its end (the newest
   instant in it; an ``end`` cleaned or archived away is an error: ``Snapshot``).
2. ``start`` must not be older than the active timeline: before it, which file groups
   changed is not known (Hudi's readers refuse it too, unless told to scan the whole
   table). A ``start`` of zeros (Hudi's ``000``: from the beginning) reads every live
   record, as Hudi's full-table fallback does.
3. The file groups written in the range: the slices as of the end holding a file of an
   instant after ``start`` (a log, a base file, a merged log; a compaction in the range
   counts: its base restates records with their own commit times).
4. Those slices merged as of the end, and of their rows those whose commit is in the range.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.columns import INSTANT
from dynbucket.base.errors import ConfigError, IncompleteRangeError, InstantNotFoundError
from dynbucket.format.hudi.meta_fields import COMMIT_TIME
from dynbucket.format.read.snapshot import SliceRef, Snapshot
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.timeline import Timeline

_INSTANT = re.compile(r"\d{8,17}")
#: Hudi's "from the beginning" (``000``, the init instant ``00000000000000``).
_EARLIEST = re.compile(r"0{1,17}")
#: The action of data writes, whose pending instants a layout-1 range may not pass.
_WRITE = Action.COMMIT


@dataclass(frozen=True)
class _Range:
    """Step 1: which instants a read of (``start``, ``end``] takes."""

    as_of: str | None
    """The snapshot the rows are read from (None: nothing completed in the range)."""
    taken: frozenset[str]
    """The instant ids in the range (layout 2: completed in it)."""
    after_start: frozenset[str]
    """Instants whose files are new to a reader at ``start`` (step 3)."""

    @classmethod
    def of(cls, timeline: Timeline, start: str, end: str | None, earliest: bool) -> _Range:
        if end is not None and _EARLIEST.fullmatch(end):  # before every instant: nothing
            return cls(None, frozenset(), frozenset())
        completed = timeline.completed()
        if timeline.layout == 2:
            done = {i.id: timeline.completion_of(i) for i in completed}
            upto = end or max(done.values(), default="")
            within = [i for i, c in done.items() if c <= upto]
            taken = [i for i in within if earliest or done[i] > start]
            after = [i for i, c in done.items() if earliest or c > start]
            return cls(max(within, default=None), frozenset(taken), frozenset(after))
        pending = [i.id for i in timeline.pending() if i.action == _WRITE]
        oldest = min(pending, default=None)
        ids = [i.id for i in completed]
        if end is not None and oldest is not None and oldest < end:
            raise IncompleteRangeError(
                f"changes up to {end}: write {oldest} began before it and has not completed "
                f"yet (another writer's), so its rows are not there to read; read up to "
                f"{max((i for i in ids if i < oldest), default='000')} now (or without an "
                "end: a range stops below a pending write by itself), or again once it "
                "completes (or is rolled back)"
            )
        upto = end or max((i for i in ids if oldest is None or i < oldest), default="")
        taken = [i for i in ids if (earliest or i > start) and i <= upto]
        return cls(upto or None, frozenset(taken), frozenset(i for i in ids if i > start))


def feed_end(store: TableStore, spec: TableSpec) -> str:
    """The ``end`` a change feed reads up to now, and passes as its next ``start``: the
    newest completion time (layout 2), or the newest instant completed before the oldest
    pending write (layout 1); "000" when nothing is there to read yet."""
    timeline = Timeline(store, spec.options.merge_on_read)
    found = _Range.of(timeline, "000", None, earliest=True)
    if timeline.layout == 2:
        done = [timeline.completion_of(i) for i in timeline.completed() if i.id in found.taken]
        return max(done, default="000")
    return found.as_of or "000"


def changes(
    store: TableStore,
    spec: TableSpec,
    start: str,
    end: str | None = None,
    columns: Sequence[str] | None = None,
    meta_columns: bool = True,
    filter: pc.Expression | None = None,  # noqa: A002 (the name readers know)
) -> pa.Table:
    """The latest version of each record the instants of (``start``, ``end``] wrote (the
    module doc: by instant time on layout 1, by completion time on layout 2); with
    ``filter``, those it keeps (``filters.py``).

    Raises:
        ConfigError: ``start`` or ``end`` is not an instant time, or the table does not
            keep Hudi's meta fields (a record's commit time is what tells it changed).
        InstantNotFoundError: ``end`` is not a completed instant (layout 1), or was
            cleaned or archived; ``start`` is older than the active timeline.
        IncompleteRangeError: layout 1, ``end`` is past a write still pending.
    """
    earliest = _EARLIEST.fullmatch(start) is not None
    for name, value in (("start", start), ("end", end)):
        fine = value is None or _INSTANT.fullmatch(value) or _EARLIEST.fullmatch(value)
        if not fine:
            raise ConfigError(
                f"changes: {name} {value!r} is not an instant time; give one as the "
                "timeline names it, yyyyMMddHHmmssSSS (e.g. an instant from Table.history()), "
                "or 000 for every change from the beginning"
            )
    if COMMIT_TIME not in spec.meta_fields:
        raise ConfigError(
            "changes: the table does not keep Hudi's meta fields (populate_meta_fields="
            "False), so a record's commit time is unknown; read snapshots (to_arrow(as_of=...)) "
            "and compare them instead"
        )
    timeline = Timeline(store, spec.options.merge_on_read)
    window = _Range.of(timeline, start, end, earliest)  # 1.
    snapshot = Snapshot(store, spec, window.as_of)  # None: nothing in the range
    floor = snapshot.timeline.archived().floor
    if floor and start < floor and not earliest:  # 2.
        raise InstantNotFoundError(
            f"changes after {start}: the instants up to {floor} of {store.uri} were archived, "
            f"so what they changed is not known; start at {floor} or later, or read a "
            "snapshot (to_arrow) instead"
        )
    changed = [
        r for r in snapshot.slices() if earliest or _written_after(r, window.after_start)
    ]  # 3.
    rows = snapshot.to_arrow(columns, meta_columns=True, refs=changed, filter=filter)  # 4.
    times = rows.column(INSTANT)  # each row's commit time
    if earliest:  # archived instants too: every live record up to the end
        keep = pc.less_equal(times, window.as_of or "")
    else:
        keep = pc.is_in(times, value_set=pa.array(sorted(window.taken), pa.string()))
    rows = rows.filter(keep)
    return rows if meta_columns else rows.select(snapshot.output_schema(columns, False).names)


def _written_after(ref: SliceRef, after_start: frozenset[str]) -> bool:
    return any(f.instant in after_start for f in ref.slice.files)
