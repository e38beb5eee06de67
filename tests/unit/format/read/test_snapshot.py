"""Reads: as of an earlier instant, after cleaning, point lookups, any pyarrow filesystem."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from dynbucket.actors import DynamicBucketIndex
from dynbucket.base.errors import (
    InstantNotFoundError,
    SchemaMismatchError,
    TableCorruptedError,
    UnsupportedStorageError,
)
from dynbucket.format.file_group import merge
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.options import TableOptions
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


def _rows(**cols: list) -> pa.Table:
    return pa.table(cols, schema=SCHEMA)


def _ids(t: pa.Table) -> dict[str, int]:
    return {r["id"]: r["v"] for r in t.to_pylist()}


@pytest.fixture()
def table(tmp_path: Path) -> Table:
    return Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", index=DynamicBucketIndex(max_keys_per_bucket=2)
    )


def test_read_as_of_an_earlier_instant(table: Table) -> None:
    first = table.upsert(_rows(id=["a", "b"], day=["d", "d"], v=[1, 2])).instant
    table.upsert(_rows(id=["a", "c"], day=["d", "d"], v=[10, 3]))
    table.delete(pa.table({"id": ["b"], "day": ["d"]}))
    table.compact()
    assert _ids(table.to_arrow(as_of=first)) == {"a": 1, "b": 2}
    assert _ids(table.to_arrow()) == {"a": 10, "c": 3}
    with pytest.raises(InstantNotFoundError, match="no completed instant 19990101000000000"):
        table.to_arrow(as_of="19990101000000000")


def test_clean_keeps_retained_instants_readable_and_refuses_older_ones(table: Table) -> None:
    instants = [table.upsert(_rows(id=["a"], day=["d"], v=[i])).instant for i in range(4)]
    # Reading as of the last upsert needs the first base and every delta: nothing may go.
    assert table.clean(retain=2).files_removed == 0
    assert _ids(table.to_arrow(as_of=instants[3])) == {"a": 3}
    compaction = table.compact().instant
    # Keeping only the compaction: its base alone is needed, the first base and deltas go.
    assert table.clean(retain=1).files_removed == 4
    assert _ids(table.to_arrow()) == {"a": 3}
    assert _ids(table.to_arrow(as_of=compaction)) == {"a": 3}
    with pytest.raises(InstantNotFoundError, match="was cleaned"):
        table.to_arrow(as_of=instants[3])


def test_a_lookup_without_the_partition_field_says_what_a_key_is(table: Table) -> None:
    table.upsert(_rows(id=["a"], day=["d"], v=[1]))
    with pytest.raises(SchemaMismatchError, match=r"\['day'\].*Nothing was looked up") as e:
        table.lookup(pa.table({"id": ["a"]}))
    assert "written" not in str(e.value)


def test_lookup_opens_only_the_keys_file_groups(
    table: Table, monkeypatch: pytest.MonkeyPatch
) -> None:
    table.upsert(
        _rows(id=[f"k{i}" for i in range(10)], day=["d"] * 5 + ["e"] * 5, v=list(range(10)))
    )
    opened: list[int] = []
    real = merge.read_slice_of_keys

    def counting(store, spec, fslice, *args, **kwargs):  # type: ignore[no-untyped-def]
        opened.append(fslice.bucket)
        return real(store, spec, fslice, *args, **kwargs)

    monkeypatch.setattr("dynbucket.format.read.snapshot.read_slice_of_keys", counting)
    found = table.lookup(pa.table({"id": ["k3", "k7", "zz"], "day": ["d", "e", "d"]}))
    assert _ids(found) == {"k3": 3, "k7": 7}
    assert len(opened) == 2  # one file group per found key, of the 8 the table has
    assert set(found.column("_bucket").to_pylist()) == set(opened)


def test_a_filesystem_without_an_exclusive_create_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    # SubTreeFileSystem is neither local nor S3: no O_EXCL, no conditional write. A
    # check-then-put would let two writers both take the table: it fails closed instead.
    (tmp_path / "bucket").mkdir()
    fs = pafs.SubTreeFileSystem(str(tmp_path / "bucket"), pafs.LocalFileSystem())
    with pytest.raises(UnsupportedStorageError, match="SubTreeFileSystem offers none"):
        Table.create("warehouse/t", SCHEMA, "id", "day", filesystem=fs)
    assert list((tmp_path / "bucket").rglob("*")) == []


@pytest.mark.parametrize("which", ["base", "log"])
def test_a_missing_file_of_a_completed_commit_is_an_error_naming_it(
    tmp_path: Path, which: str
) -> None:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    t.upsert(_rows(id=["a", "b"], day=["d", "d"], v=[1, 2]))
    t.upsert(_rows(id=["a"], day=["d"], v=[5]))
    pattern = "*.parquet" if which == "base" else ".*.log.*"
    [gone] = list((tmp_path / "t" / "day=d").glob(pattern))
    gone.unlink()
    with pytest.raises(TableCorruptedError, match=rf"{gone}.*missing"):
        t.to_arrow()


def _listed_then_compacted(tmp_path: Path, table_type: str = "MERGE_ON_READ") -> tuple[Table, Any]:
    """Three writes; a snapshot that listed its slices; then a write and a compaction after
    which clean(retain=1) removes what the snapshot lists."""
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", options=TableOptions(table_type=table_type)
    )
    for v in range(3):
        t.upsert(_rows(id=["a", "b"], day=["d", "d"], v=[v, v]))
    snapshot = t.snapshot()
    snapshot.slices()
    t.upsert(_rows(id=["a"], day=["d"], v=[9]))
    t.compact()
    return t, snapshot


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_reader_whose_files_a_clean_removed_is_told_the_instant_is_gone(
    tmp_path: Path, table_type: str
) -> None:
    """clean(retain=1) racing a reader: the reader took its snapshot, then a write, a
    compaction and a clean removed the slices it lists."""
    t, snapshot = _listed_then_compacted(tmp_path, table_type)
    clean = t.clean(retain=1).instant
    for read in (snapshot.to_arrow, lambda: snapshot.lookup(pa.table({"id": ["a"], "day": ["d"]}))):
        with pytest.raises(
            InstantNotFoundError,
            match=f"instant {snapshot.instant} is no longer "
            f"retained: clean {clean}.*read the table again",
        ):
            read()
    assert _ids(t.to_arrow()) == {"a": 9, "b": 2}


def test_a_reader_racing_a_running_clean_is_told_the_instant_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The clean has removed the files and not yet completed: the reader sees only a
    pending clean, whose plan says what it keeps."""
    t, snapshot = _listed_then_compacted(tmp_path)
    seen: list[BaseException] = []
    commit = Transaction.commit

    def read_then_commit(self: Transaction, metadata: dict | None = None) -> dict:
        if self.instant.action == "clean":  # its files are gone, its instant is inflight
            with pytest.raises(InstantNotFoundError) as e:
                snapshot.to_arrow()
            seen.append(e.value)
        return commit(self, metadata)

    monkeypatch.setattr(Transaction, "commit", read_then_commit)
    clean = t.clean(retain=1)
    assert clean.files_removed > 0 and len(seen) == 1
    assert re.search(
        rf"instant {snapshot.instant} is no longer retained: clean {clean.instant}, "
        r"running while this read ran.*read the table again",
        str(seen[0]),
    )


def test_a_latest_snapshot_reads_whole_when_a_clean_removes_what_it_supersedes(
    tmp_path: Path,
) -> None:
    """The snapshot was taken before the clean and lists the table after it: the files the
    clean removed are of slices the snapshot does not read (it is at the horizon)."""
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    for v in range(3):
        t.upsert(_rows(id=["a", "b"], day=["d", "d"], v=[v, v]))
    t.compact()
    snapshot = t.snapshot()  # not listed yet
    assert t.clean(retain=1).files_removed > 0
    assert _ids(snapshot.to_arrow()) == {"a": 2, "b": 2}


def test_a_data_file_lost_while_reading_is_named(table: Table) -> None:
    table.upsert(_rows(id=["a", "b"], day=["d", "d"], v=[1, 2]))
    snapshot = table.snapshot()
    (base,) = [r.slice.base for r in snapshot.slices()]
    Path(base.path).unlink()  # no clean: the table lost it
    with pytest.raises(TableCorruptedError, match=f"{base.name}.*restore it from a backup"):
        snapshot.to_arrow()


def test_after_a_delete_every_read_shape_reads_without_meta_columns(table: Table) -> None:
    """The README's sequence on merge-on-read: a log that starts with a delete block must
    not add a meta column the read did not ask for."""
    table.upsert(_rows(id=["a", "b"], day=["d", "d"], v=[1, 2]))
    table.delete(pa.table({"id": ["b"], "day": ["d"]}))
    plain = table.to_arrow(meta_columns=False)
    assert plain.column_names == ["id", "day", "v"] and _ids(plain) == {"a": 1}
    assert table.to_arrow(columns=["id"]).column("id").to_pylist() == ["a"]
    found = table.lookup(pa.table({"id": ["a", "b"], "day": ["d", "d"]}), meta_columns=False)
    assert _ids(found) == {"a": 1}


MANUAL = TableOptions(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
    compaction_log_size_ratio=1e6,
)


@pytest.mark.parametrize("service", ["compaction", "logcompaction", "index-compaction"])
def test_a_latest_snapshot_reads_its_rows_when_a_service_it_did_not_see_completes_and_a_clean_runs(
    tmp_path: Path, service: str
) -> None:
    """A service pending when the snapshot was taken completes, then clean(retain=1)
    removes what that service supersedes: the snapshot's own view of its instant reads
    those files (it returned 5 of 100 rows after a compaction, stale values after a log
    compaction, and a lookup found 50 of 150 keys after an index compaction). A reader
    gets its snapshot's rows."""
    from dynbucket.format.services import compaction, index_compaction, log_compaction

    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        options=MANUAL,
        index=DynamicBucketIndex(max_keys_per_bucket=50),
    )
    ids = [f"k{i}" for i in range(150)]
    model = dict.fromkeys(ids, 0)
    t.upsert(_rows(id=ids, day=["d"] * 150, v=[0] * 150))
    for v in (1, 2):  # updates, and new keys: index files to merge
        new = [f"n{v}-{i}" for i in range(5)]
        batch = ids[: 50 * v] + new
        t.upsert(_rows(id=batch, day=["d"] * len(batch), v=[v] * len(batch)))
        model.update(dict.fromkeys(batch, v))
    store, spec = t._store, t._spec
    if service == "compaction":
        planned = compaction.schedule(store, spec, 1)
    elif service == "logcompaction":
        planned = log_compaction.schedule_log(store, spec, 2)
    else:
        planned = index_compaction.schedule_index_compaction(store, spec, 2)
    assert planned is not None
    t.upsert(_rows(id=ids[:10], day=["d"] * 10, v=[3] * 10))  # the latest instant, after it
    model.update(dict.fromkeys(ids[:10], 3))
    snapshot = t.snapshot()
    if service == "compaction":
        compaction.run(store, spec, planned)
    elif service == "logcompaction":
        log_compaction.run_log(store, spec, planned)
    else:
        index_compaction.execute_index_compaction(store, spec, planned)
    assert t.clean(retain=1).files_removed > 0
    assert _ids(snapshot.to_arrow()) == model
    keys = list(model)
    found = snapshot.lookup(
        _rows(id=keys, day=["d"] * len(keys), v=[0] * len(keys)).select(["id", "day"])
    )
    assert _ids(found) == model
    assert _ids(t.to_arrow()) == model
