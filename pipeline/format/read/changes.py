"""Incremental reads: what the instants after one changed (Hudi's incremental query).

Downstream jobs of a lakehouse table read what changed since the instant they last read,
not the whole table. Hudi's incremental query returns, for the instants after ``start`` up
to ``end``, the latest version of each record they wrote, with its ``_hoodie_commit_time``
(``_instant`` here, as every read names it); a record deleted in the range is not returned
(the query reports no deletes). Read here as hudi-rs reads it:

1. The snapshot as of ``end`` (default: the latest completed instant); an ``end`` cleaned or
   archived away is an error (``Snapshot``).
2. ``start`` must not be older than the active timeline: before it, which file groups
   changed is not known (Hudi's readers refuse it too, unless told to scan the whole
   table). A ``start`` of zeros (Hudi's ``000``: from the beginning) reads every live
   record, as Hudi's full-table fallback does.
3. The file groups written in the range: the slices as of ``end`` holding a file of an
   instant after ``start`` (a log, a base file, a merged log; a compaction in the range
   counts: its base restates records with their own commit times).
4. Those slices merged as of ``end``, and of their rows those whose commit time is after
   ``start`` and at most ``end``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.columns import INSTANT
from dynbucket.base.errors import ConfigError, InstantNotFoundError
from dynbucket.format.hudi.meta_fields import COMMIT_TIME
from dynbucket.format.read.snapshot import SliceRef, Snapshot
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec

_INSTANT = re.compile(r"\d{8,17}")
#: Hudi's "from the beginning" (``000``, the init instant ``00000000000000``).
_EARLIEST = re.compile(r"0{1,17}")


def changes(
    store: TableStore,
    spec: TableSpec,
    start: str,
    end: str | None = None,
    columns: Sequence[str] | None = None,
    meta_columns: bool = True,
) -> pa.Table:
    """The latest version of each record written after instant ``start`` up to ``end``
    (the steps of the module doc).

    Raises:
        ConfigError: ``start`` or ``end`` is not an instant time, or the table does not
            keep Hudi's meta fields (a record's commit time is what tells it changed).
        InstantNotFoundError: ``end`` is not a completed instant, or was cleaned or
            archived; ``start`` is older than the active timeline.
    """
    earliest = _EARLIEST.fullmatch(start) is not None
    for name, value in (("start", start), ("end", end)):
        fine = value is None or _INSTANT.fullmatch(value) or (name == "start" and earliest)
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
    snapshot = Snapshot(store, spec, end)  # 1.
    floor = snapshot.timeline.archived().floor
    if floor and start < floor and not earliest:  # 2.
        raise InstantNotFoundError(
            f"changes after {start}: the instants up to {floor} of {store.uri} were archived, "
            f"so what they changed is not known; start at {floor} or later, or read a "
            "snapshot (to_arrow) instead"
        )
    upto = snapshot.instant or ""
    changed = [r for r in snapshot.slices() if _written_after(r, start)]  # 3.
    rows = snapshot.to_arrow(columns, meta_columns=True, refs=changed)  # 4.
    times = rows.column(INSTANT)  # each row's commit time
    rows = rows.filter(pc.and_(pc.greater(times, start), pc.less_equal(times, upto)))
    return rows if meta_columns else rows.select(snapshot.output_schema(columns, False).names)


def _written_after(ref: SliceRef, start: str) -> bool:
    return any(f.instant > start for f in ref.slice.files)
