"""What a write returns."""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass, field, fields

from dynbucket.format.timeline.transaction import WrittenFile


@dataclass(frozen=True)
class WriteResult:
    """One committed instant of a write.

    ``keys_updated`` counts keys the table holds a row of whose record the write replaced
    (a key deleted earlier and written again counts as inserted); ``keys_stale`` the
    updates that lost to the record the table has (a smaller ordering value: written, but
    readers keep the old record); ``keys_deleted`` counts delete markers written for known keys, and
    ``keys_not_found`` deletes of keys the table never had (with a global index: of keys
    not in any partition). ``keys_moved``: with a global index, the updated keys whose
    partition value changed (each written in its new partition, deleted from its old).
    """

    instant: str
    operation: str
    rows_written: int
    keys_inserted: int = 0
    keys_updated: int = 0
    keys_stale: int = 0
    keys_deleted: int = 0
    keys_not_found: int = 0
    keys_moved: int = 0
    buckets_created: int = 0
    files_written: int = 0
    written_again: int = 0
    """Several writers: how often the write ran again (from the table as it then was) after
    its commit conflicted with another writer's; the time those attempts took is
    ``seconds['again']``."""
    seconds: dict[str, float] = field(default_factory=dict)
    """Wall time per step of the instant: in process ``prepare``, ``assign``, ``write``; for
    a Spark DataFrame ``prepare`` and ``spark`` (Spark tasks), or ``collect`` (``read`` when
    the driver read its Parquet files itself), ``prepare`` and ``driver`` (a small one,
    written by the driver); then ``commit``, ``snapshot`` and the ``total``. Besides the
    steps, with several writers: ``lease``, the part of them spent waiting for another
    writer's commit lease (at the begin and the commit), and ``again``, the attempts that
    ran again after a conflict (in ``total``, not in the steps)."""
    stages: dict[str, float] = field(default_factory=dict)
    """Seconds per stage of the work on rows, summed over the threads and Spark tasks that
    ran it (a stage's sum can exceed the wall time of its step): ``check`` (records),
    ``tag`` (the assigner), ``group`` (rows sorted into file groups), ``list`` (the
    partitions' current slices), ``take`` (a group's rows), ``dedupe`` (one record per
    key), ``stale`` (updates losing by ordering value), ``encode`` (Parquet into staged
    files), ``merge`` (copy-on-write rewrites), ``index`` (index files), ``flush`` (the
    staged files flushed and put in place). The commit is in ``seconds``."""

    services: tuple[str, ...] = ()
    """The table services that ran after the write, each ``<action> <instant>`` (a
    compaction beside the writes says ``scheduled``)."""
    written: tuple[WrittenFile, ...] = field(default=(), compare=False, repr=False)
    """The files the instant wrote: the table's services decide from them which services
    the write made due (``format/services/due.py``)."""

    def __str__(self) -> str:
        """One line a person reads: what the instant did to keys, what it wrote, how long
        it took (``repr`` keeps every field)."""
        if not self.instant:  # nothing written: an empty input, or a micro-batch done before
            return self.operation
        counts = (
            (self.keys_inserted, "inserted"),
            (self.keys_updated, "updated"),
            (self.keys_moved, "moved"),
            (self.keys_stale, "stale"),
            (self.keys_deleted, "deleted"),
            (self.keys_not_found, "not found"),
        )
        keys = ", ".join(f"{n:,} {what}" for n, what in counts if n) or "no key changed"
        new = f", {self.buckets_created} new bucket(s)" if self.buckets_created else ""
        total = self.seconds.get("total")
        took = f"; {total:.2f} s" if total is not None else ""
        if self.seconds.get("lease", 0.0) >= 0.01:
            took += f", {self.seconds['lease']:.2f} s of it waiting for the commit lease"
        if self.written_again:
            took += (
                f", written again {self.written_again} time(s) after a conflict "
                f"({self.seconds.get('again', 0.0):.2f} s)"
            )
        services = f"; then {', '.join(self.services)}" if self.services else ""
        return (
            f"{self.operation} {self.instant}: {keys} ({self.rows_written:,} rows in "
            f"{self.files_written} file(s){new}){took}{services}"
        )

    def as_dict(self) -> dict[str, object]:
        # Field by field: ``asdict`` would copy every written file only to drop them.
        return {
            f.name: copy.deepcopy(getattr(self, f.name))
            for f in fields(self)
            if f.name != "written"
        }


class Laps:
    """Wall time per stage of a write: ``lap(name)`` closes the stage that just ran."""

    def __init__(self) -> None:
        self.start = self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name] = round(now - self.last, 4)
        self.laps["total"] = round(now - self.start, 4)
        self.last = now
