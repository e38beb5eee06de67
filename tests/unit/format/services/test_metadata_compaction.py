"""The metadata table's compaction as a service beside the writes
(``services/metadata_compaction.py``, ``metadata/compaction.py``): planned under the lease,
executed without it, completed once; a write between its plan and its execution lands in
the new slice, which hudi-rs and dynbucket both read."""

from __future__ import annotations

from pathlib import Path

import pytest

from dynbucket import Table, TableOptions
from dynbucket.format.metadata import compaction as metadata_compaction
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.format.services.metadata_compaction import (
    execute_metadata_compaction,
    schedule_metadata_compaction,
)
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.format.timeline.transaction import Transaction
from tests.hudi_readers import check_hudi_reads
from tests.unit.format.metadata.test_writer import SCHEMA, _listed_is_stored, _rows


@pytest.fixture
def due_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Table:
    """A version 9 table whose metadata groups are due after two writes (the service
    switched off: the test runs its steps)."""
    monkeypatch.setattr(metadata_compaction, "MAX_DELTAS", 2)
    monkeypatch.setattr(metadata_compaction, "LOG_RATIO", 0.0)
    monkeypatch.setattr(metadata_compaction, "REWRITES_PER_INSTANT", 2)  # both partitions
    opts = TableOptions(table_version=9, metadata_compaction_automatic=False)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "ts", options=opts)
    t.upsert(_rows(range(0, 10), 1))
    t.upsert(_rows(range(5, 15), 2))
    return t


def _completed(t: Table, instant: str) -> list[str]:
    folder = Path(t.uri) / ".hoodie" / "metadata" / ".hoodie" / "timeline"
    return sorted(p.name for p in folder.glob(f"{instant}_*"))


def test_a_write_between_the_plan_and_the_execution_is_in_the_new_slice(
    due_table: Table,
) -> None:
    """The plan takes the slices as of the writes before it; a write that completes while
    it is pending appends its logs after it (its completion time is later), so they
    belong to the new slice: the new bases hold the first writes' keys only, and
    dynbucket's reader, its lookups and hudi-rs through the metadata table all see the
    third write too."""
    t = due_table
    planned = schedule_metadata_compaction(t._store, t._spec)
    assert planned is not None
    third = t.upsert(_rows(range(12, 20), 3)).instant
    assert third > planned
    execute_metadata_compaction(t._store, t._spec, planned)
    assert [n.split(".")[1] for n in _completed(t, planned)] == ["commit"]
    mdt = MetadataTable(t._store)
    for file_slice in mdt.file_groups("record_index").values():
        assert file_slice.base is not None and planned in file_slice.base
        assert [third in log for log in file_slice.logs] == [True]
    in_bases = {
        key
        for file_slice in mdt.file_groups("record_index").values()
        for key, _, _ in mdt.slice_records("record_index", type(file_slice)(file_slice.base, ()))
    }
    assert in_bases == {f"k{i:03d}" for i in range(15)}
    _listed_is_stored(t)  # listing, record index and lookups: the third write's keys too
    check_hudi_reads(t)
    assert t.check().healthy
    t.close()


def test_none_is_planned_while_another_instant_is_pending(due_table: Table) -> None:
    """A pending write may have passed its commit point already, its delta still to come
    with a completion time before the compaction's: a base written now would miss it."""
    t = due_table
    pending = Transaction.begin(t._store, t._spec, "commit", "upsert", hold=False)
    assert schedule_metadata_compaction(t._store, t._spec) is None
    pending.abort()
    assert schedule_metadata_compaction(t._store, t._spec) is not None
    t.close()


def test_a_paused_executor_completes_nothing_a_second_time(due_table: Table) -> None:
    """Two executors of one plan (the first paused after writing its bases, the second
    run by the next process): the bases are the same bytes, and the metadata table's
    instant completes once, with the document of the executor that decided it."""
    t = due_table
    planned = schedule_metadata_compaction(t._store, t._spec)
    assert planned is not None
    found = next(i for i in Timeline(t._store, True).pending() if i.id == planned)
    paused = Transaction.resume(t._store, t._spec, found, "paused")
    paused_entries = metadata_compaction.execute(t._store, planned, paused.plan)
    execute_metadata_compaction(t._store, t._spec, planned)  # the second executor
    (done,) = _completed(t, planned)
    paused.commit(paused_entries)  # wakes up: finds the instant decided
    assert _completed(t, planned) == [done]
    assert not [i for i in Timeline(t._store, True).pending() if i.id == planned]
    _listed_is_stored(t)
    t.close()
