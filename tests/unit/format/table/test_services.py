"""Cleaning: what it removes and what it must leave."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pyarrow as pa

from dynbucket.format.file_group.slices import data_files
from dynbucket.format.hudi import files as names
from dynbucket.format.table import services
from dynbucket.format.table.options import TableOptions
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
MANUAL = TableOptions(compaction_async=False, clean_automatic=False, archive_automatic=False,
                      index_compaction_automatic=False, lock_lease_seconds=30.0)  # fmt: skip


def test_a_clean_leaves_a_temporary_file_younger_than_a_lease(tmp_path: Path) -> None:
    """A temporary file named for a completed instant may be a copy on its way (a
    compaction carrying that instant's log onto its slice, under the lease): a clean
    removes it only once it is older than any lease could be."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", options=MANUAL)
    t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [1]}, schema=SCHEMA))
    t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [2]}, schema=SCHEMA))
    log = next(f for f in data_files(t.store, "day=d1") if f.kind == "log")
    carried = names.log_name(log.file_id, "20991231000000000", 1, log.instant)
    copy = Path(t.store.path("day=d1", f".{carried}.tmp-0123abcd"))
    copy.write_bytes(b"on its way")
    assert services.clean(t.store, t.spec, retain=1).instant is not None
    assert copy.exists()  # young: it may be a live copy
    old = time.time() - 31
    os.utime(copy, (old, old))
    t.upsert(pa.table({"id": ["b"], "day": ["d1"], "v": [3]}, schema=SCHEMA))
    assert services.clean(t.store, t.spec, retain=1).instant is not None
    assert not copy.exists()  # left by a writer that died: gone
