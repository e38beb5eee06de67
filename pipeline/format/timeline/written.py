"""A file an instant wrote, as its commit metadata records it (:class:`WrittenFile`): what
a transaction collects, the conflict checks compare and the services return."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dynbucket.format.hudi.commit import WriteStat
from dynbucket.format.storage.store import TableStore


@dataclass
class WrittenFile:
    """A file an instant wrote, for its commit metadata (a Hudi write stat)."""

    partition: str
    path: str
    kind: str  # base | log | index
    rows: int
    size: int
    file_id: str = ""
    bucket: int = -1
    inserts: int = 0
    updates: int = 0
    """Upserts of known keys written (Hudi's ``numUpdateWrites``), stale ones included."""
    stale: int = 0
    """Of ``updates``, those that lose to the record the table has (a smaller ordering)."""
    deletes: int = 0
    prev_commit: str | None = None
    """The instant of the group's base file before this write (None: a new group)."""
    base_file: str = ""
    """A log file's slice: the name of its base file."""
    log_version: int | None = None
    slice_logs: int | None = None
    """A log file's slice: its logs after the newest merged log, this one included
    (``slices.unmerged``): what makes a compaction or a log compaction due."""
    base_bytes: int = 0
    """A log file's slice: its base file's bytes (0: none)."""
    log_bytes: int = 0
    """A log file's slice: its logs' bytes, this one's included (with ``base_bytes``: a
    compaction or a log compaction, ``compaction.full_due``)."""
    entries: pa.Table | None = field(default=None, repr=False, compare=False)
    """An index file: its entries, kept in memory by the process that wrote them (the
    commit's conflict check reads its own footprint from here, not from the file); never
    pickled: a Spark task's result carries no table."""

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "entries": None}

    def relative(self, store: TableStore) -> str:
        return self.path[len(store.root) :].lstrip("/")

    def write_stat(self, store: TableStore) -> WriteStat:
        return WriteStat(
            self.partition,
            self.file_id,
            self.relative(store),
            self.prev_commit,
            self.rows,
            self.inserts,
            self.updates,
            self.deletes,
            self.size,
            self.base_file or None,
            self.log_version,
        )
