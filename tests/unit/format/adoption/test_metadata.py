"""Adoption's metadata table step (``adoption/metadata.py``): a Hudi 1.x table's metadata
table, kept by adoption, stays in step through many writes and services (its groups
rewritten as bases and its own instants archived by dynbucket's writer, in the schema
Hudi wrote it with), read through it by hudi-rs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dynbucket.format.file_group import adopted
from dynbucket.format.health.check import check
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.format.services.metadata_compaction import MetadataCompaction
from dynbucket.format.services.service import Scope, run_now
from dynbucket.format.storage.store import TableStore
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads, hudi_read
from tests.hudi_tables import unzipped


@pytest.mark.sample(1)
@pytest.mark.parametrize(
    "name",
    [
        "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
        "sample_table/mor/avro/v9_txns_simple_meta",
    ],
)
def test_a_kept_metadata_table_stays_in_step_through_many_writes(tmp_path: Path, name: str) -> None:
    root = unzipped(name, tmp_path)
    t = Table.adopt(str(root))
    record = adopted.load(t._store)
    assert record.metadata_kept == ("files", "record_index")
    names, key = t._spec.schema.names, t._spec.record_key[0]
    rows = t.to_arrow(columns=names).select(names)
    fields = list(dict.fromkeys([*t._spec.record_key, *t._spec.partition_by]))
    hudi_rows = rows.num_rows
    for i in range(45):  # updates, new keys, deletes: compactions, cleans, archival
        new = rows.slice(0, 3)
        new = new.set_column(
            names.index(key), key, pc.binary_join_element_wise(new.column(key), f"_n{i}", "")
        )
        t.upsert(pa.concat_tables([rows.slice(i % rows.num_rows, 1), new]))
        hudi_rows += 3
        if i % 15 == 7:
            t.delete(new.slice(0, 1).select(fields))
            hudi_rows -= 1
    # The metadata compaction beside the writes plans only while no other instant is
    # pending: on a busy machine the data services beside can hold it off for all 45
    # writes. The last word is the services': any compaction left pending finished, then
    # the metadata compaction run now (a no-op if the writes had it done already).
    t.wait_for_services()
    t.compact()
    run_now(MetadataCompaction(), t.store, t.spec, Scope())
    t.close()
    store = TableStore.at(str(root))
    report = check(store)  # files listed = files stored; record index = live rows
    assert report.healthy, [f.problem for f in report.findings]
    mdt = root / ".hoodie" / "metadata"
    # dynbucket's writer rewrote record index groups as bases and archived old instants.
    rewritten = re.compile(r"_0-(\d{17})-0_\1\.hfile$")  # Hudi names its own by Spark task
    assert any(rewritten.search(p.name) for p in (mdt / "record_index").glob("*.hfile"))
    assert list((mdt / ".hoodie" / "timeline" / "history").glob("*"))
    assert len(MetadataTable(store).record_index()) == hudi_rows
    t = Table.open(str(root))
    check_hudi_reads(t, time_travel=False)
    assert hudi_read(str(root)).num_rows == hudi_rows
    # hudi-rs lists files through it: a stray copy of a base file stays invisible.
    base = next(p for p in sorted(root.rglob("*.parquet")) if ".hoodie" not in p.parts)
    shutil.copy(
        base,
        base.with_name("0" * 8 + "-stray-4000-8000-000000000000-0_" + base.name.split("_", 1)[1]),
    )
    assert hudi_read(str(root)).num_rows == hudi_rows
    t.close()


def test_lookup_finds_a_global_tables_keys_through_hudis_record_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key lookup of a table whose record index is kept reads it (an HFile key lookup),
    not dynbucket's own index; as of an older instant it asks dynbucket's index."""
    from dynbucket.format.index.rli import RecordLevelIndex

    root = unzipped("quickstart_trips_table/mor/avro/v8_trips_8i3u1d", tmp_path)
    t = Table.adopt(str(root))
    names = t._spec.schema.names
    rows = t.to_arrow(columns=names).select(names)
    moved = rows.slice(0, 1).set_column(names.index("city"), "city", pa.array(["oslo"]))
    moved = moved.set_column(names.index("ts"), "ts", pc.add(moved.column("ts"), 1))
    before = t.latest_instant()
    t.upsert(moved)  # a key moves city: the record index follows it
    keys = pa.concat_tables([rows.slice(0, 3), rows.slice(0, 1)]).select(["uuid", "city"])
    keys = keys.set_column(0, "uuid", pa.array([*keys.column("uuid").to_pylist()[:3], "absent"]))

    def no_own_index(*args: object, **kwargs: object) -> None:
        raise AssertionError("dynbucket's own index was asked")

    monkeypatch.setattr(RecordLevelIndex, "lookup", no_own_index)
    found = {r["uuid"]: r["city"] for r in t.lookup(keys).to_pylist()}
    live = {r["uuid"]: r["city"] for r in t.to_arrow().to_pylist()}
    assert found == {k: live[k] for k in keys.column("uuid").to_pylist()[:3]}
    assert found[moved.column("uuid")[0].as_py()] == "oslo"
    with pytest.raises(AssertionError, match="own index was asked"):
        t.lookup(keys, as_of=before)  # the metadata table holds the newest state only
    monkeypatch.undo()
    old = {r["uuid"]: r["city"] for r in t.lookup(keys, as_of=before).to_pylist()}
    assert old[moved.column("uuid")[0].as_py()] == rows.column("city")[0].as_py()
    t.close()


def test_a_record_index_is_kept_when_its_layout_is_the_adopting_index(tmp_path: Path) -> None:
    """Hudi 1.1's partitioned record index (here a version 9 table written by dynbucket
    with a partition-scoped index, then made Hudi's by removing ``.hoodie/.dynbucket/``)
    is set aside by an adoption with a global index, which would need one location per
    key, with the reason; adopted with a partition-scoped index, it is kept and stays in
    step, a key in two partitions indexed in both."""
    from dynbucket.options import DynamicBucketIndex, TableOptions

    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
    uri = str(tmp_path / "t")
    index = DynamicBucketIndex(max_keys_per_bucket=8)
    t = Table.create(uri, schema, "id", "day", "ts", index, TableOptions(table_version=9))
    t.upsert(
        pa.table(
            {
                "id": [f"k{i}" for i in range(12)],
                "day": [f"d{i % 2}" for i in range(12)],
                "ts": [1] * 12,
            },
            schema=schema,
        )
    )
    t.close()
    shutil.rmtree(tmp_path / "t" / ".hoodie" / ".dynbucket")
    t = Table.adopt(uri, index=DynamicBucketIndex(max_keys_per_bucket=8, global_index=True))
    record = adopted.load(t._store)
    assert record.metadata_kept == ("files",)
    assert "this record index has the partitioned layout" in record.metadata_removed["record_index"]
    t.close()
    Table.undo_adoption(uri)
    t = Table.adopt(uri, index=index)
    assert adopted.load(t._store).metadata_kept == ("files", "record_index")
    t.upsert(pa.table({"id": ["k0", "k99"], "day": ["d1", "d0"], "ts": [2, 2]}, schema=schema))
    live = {(r["_partition"], r["id"]): r["_file_id"] for r in t.to_arrow().to_pylist()}
    indexed = {k: loc.file_id for k, loc in MetadataTable(t._store).record_index().items()}
    assert indexed == live and ("day=d0", "k0") in live and ("day=d1", "k0") in live
    t.close()


def test_a_record_index_missing_a_writes_keys_is_reported_and_set_aside(tmp_path: Path) -> None:
    """A record index that lost a write's entries (its folder restored from before that
    write): ``check`` names the missing keys, and an adoption sets it aside as not whole,
    keeping ``files``; a key the index places elsewhere is named as such."""
    from dynbucket.options import DynamicBucketIndex, TableOptions

    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
    uri = str(tmp_path / "t")
    index = DynamicBucketIndex(max_keys_per_bucket=4)
    t = Table.create(uri, schema, "id", "day", "ts", index, TableOptions(table_version=9))
    t.upsert(pa.table({"id": ["a", "b"], "day": ["d0", "d1"], "ts": [1, 1]}, schema=schema))
    folder = tmp_path / "t" / ".hoodie" / "metadata" / "record_index"
    shutil.copytree(folder, tmp_path / "before")
    t.upsert(pa.table({"id": ["c", "d", "e"], "day": ["d0"] * 3, "ts": [2] * 3}, schema=schema))
    t.close()
    shutil.rmtree(folder)
    shutil.copytree(tmp_path / "before", folder)
    report = check(TableStore.at(uri))
    [problem] = [f.problem for f in report.findings if "record index" in f.problem]
    assert problem.startswith("3 live key(s) missing from the metadata table's record index")
    assert '["day=d0", "c"]' in problem
    shutil.rmtree(tmp_path / "t" / ".hoodie" / ".dynbucket")
    t = Table.adopt(uri, index=index)
    record = adopted.load(t._store)
    assert record.metadata_kept == ("files",)
    assert record.metadata_removed["record_index"] == (
        "it is not whole: 3 key(s) missing, e.g. ('day=d0', 'c')"
    )
    assert t.to_arrow().num_rows == 5
    t.close()
