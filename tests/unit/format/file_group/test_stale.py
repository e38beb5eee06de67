"""Stale updates: counted as a reader would merge them, reading only what can decide it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.format.file_group import stale
from dynbucket.format.file_group.slices import FileSlice, data_files, file_slices
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.options import TableOptions
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("ts", pa.int64())])


def _table(tmp_path: Path, table_type: str) -> Table:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        ordering_field="ts",
        options=TableOptions(table_type=table_type),
    )
    # One group: a base file of 1000 keys at ts 10, then a log (or a new base) raising
    # k0..k9 to ts 20.
    t.upsert(pa.table({"id": [f"k{i}" for i in range(1000)], "ts": [10] * 1000}))
    t.upsert(pa.table({"id": [f"k{i}" for i in range(10)], "ts": [20] * 10}))
    return t


def _only_slice(t: Table) -> FileSlice:
    visible = {i.id for i in t._timeline.completed()}
    (fslice,) = file_slices(data_files(t._store, ""), visible)
    return fslice


def _updates(ids: list[str], ts: list[int]) -> pa.Table:
    return pa.table({"id": ids, "ts": pa.array(ts, pa.int64())})


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_counts_the_updates_that_lose_by_ordering_value(tmp_path: Path, table_type: str) -> None:
    t = _table(tmp_path, table_type)
    updates = _updates(["k0", "k1", "k5", "k500", "k501", "k502"], [19, 20, 21, 9, 10, 11])
    # k0: 19 < 20 loses; k1: a tie wins; k5: 21 wins; k500: 9 < 10 loses; k501 ties; k502 wins
    assert stale.stale_updates(t._store, t._spec, _only_slice(t), updates, "99999999999999999") == 2


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_no_record_is_read_when_every_update_is_at_or_above_the_largest_value(
    tmp_path: Path, table_type: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path, table_type)

    def refuse(*args: Any, **kw: Any) -> None:
        raise AssertionError("records read where the statistics decide")

    monkeypatch.setattr(stale, "read_base", refuse)
    monkeypatch.setattr(stale, "read_deltas", refuse)
    updates = _updates(["k0", "k700"], [20, 25])  # 20 is the slice's largest value
    assert stale.stale_updates(t._store, t._spec, _only_slice(t), updates, "99999999999999999") == 0


def test_only_the_records_of_suspect_keys_are_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path, "MERGE_ON_READ")
    merged: list[int] = []
    real_merge = stale.merge

    def counting_merge(spec: Any, base: pa.Table | None, logs: list[pa.Table]) -> pa.Table:
        merged.append((base.num_rows if base is not None else 0) + sum(x.num_rows for x in logs))
        return real_merge(spec, base, logs)

    monkeypatch.setattr(stale, "merge", counting_merge)
    # k3 and k600 are suspects (below 20); k9 at 30 is not and is not merged.
    updates = _updates(["k3", "k600", "k9"], [15, 12, 30])
    assert stale.stale_updates(t._store, t._spec, _only_slice(t), updates, "99999999999999999") == 1
    # k3: its base row, its log row and the update; k600: its base row and the update.
    assert merged == [5]


def test_without_an_ordering_field_the_latest_commit_wins(tmp_path: Path) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id")
    t.upsert(pa.table({"id": ["a", "b"], "ts": [5, 5]}))
    updates = _updates(["a", "b"], [1, 2])
    assert stale.stale_updates(t._store, t._spec, _only_slice(t), updates, "99999999999999999") == 0


def test_a_slices_largest_value_is_read_once_per_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The largest ordering value of a log this process wrote, or already read, is not read
    again: a write's stale check costs the same after 5 logs on a slice as after 500."""
    t = _table(tmp_path, "MERGE_ON_READ")  # a base and a log this process wrote
    fslice = _only_slice(t)
    read: list[str] = []
    real = TableStore.read_buffer

    def reading(store: TableStore, path: str) -> Any:
        read.append(path)
        return real(store, path)

    monkeypatch.setattr(TableStore, "read_buffer", reading)
    updates = _updates(["k0", "k1"], [19, 25])  # k0 loses to the log's 20
    assert stale.stale_updates(t._store, t._spec, fslice, updates, "99999999999999999") == 1
    assert [p for p in read if ".log." in p] == [fslice.logs[0].path]  # merged: k0's record
    read.clear()
    stale._LARGEST.clear()  # as a new process: the log's value is read from its footer
    above = _updates(["k2"], [30])
    assert stale.stale_updates(t._store, t._spec, fslice, above, "99999999999999999") == 0
    assert read == [fslice.logs[0].path]
    read.clear()
    assert stale.stale_updates(t._store, t._spec, fslice, above, "99999999999999999") == 0
    assert read == []  # the second time, from what the process remembers


def test_a_slices_records_are_read_once_per_file_and_a_new_log_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A writer whose updates lag another writer's (all below the slice's largest value)
    checks the same slice at every write: each file's records are read once per process,
    a log written since is read alone, and the count is the one a fresh read gives."""
    t = _table(tmp_path, "MERGE_ON_READ")  # k0..k9 at 20 in a log over a base at 10
    read: list[str] = []
    real_base, real_deltas = stale.read_base, stale.read_deltas

    def reading_base(store: TableStore, spec: Any, f: Any, columns: Any) -> pa.Table:
        read.append(f.path)
        return real_base(store, spec, f, columns)

    def reading_deltas(store: TableStore, spec: Any, logs: Any, columns: Any) -> list[pa.Table]:
        read.extend(f.path for f in logs)
        return real_deltas(store, spec, logs, columns)

    monkeypatch.setattr(stale, "read_base", reading_base)
    monkeypatch.setattr(stale, "read_deltas", reading_deltas)
    updates = _updates(["k0", "k1", "k500"], [15, 25, 5])  # k0 and k500 lose
    fslice = _only_slice(t)
    assert stale.stale_updates(t._store, t._spec, fslice, updates, "99999999999999999") == 2
    assert sorted(read) == sorted(f.path for f in fslice.files)
    read.clear()
    assert stale.stale_updates(t._store, t._spec, fslice, updates, "99999999999999999") == 2
    assert read == []  # from what the process kept
    t.upsert(pa.table({"id": ["k1"], "ts": [30]}))  # a new log: k1 at 30 now wins over 25
    fslice = _only_slice(t)
    assert stale.stale_updates(t._store, t._spec, fslice, updates, "99999999999999999") == 3
    assert read == [fslice.logs[-1].path]
    read.clear()
    stale._RECORDS.clear()  # a new process: every file read again, the same count
    assert stale.stale_updates(t._store, t._spec, fslice, updates, "99999999999999999") == 3
    assert sorted(read) == sorted(f.path for f in fslice.files)
