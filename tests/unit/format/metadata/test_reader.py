"""Our reader of a metadata table lists what hudi-rs lists: every table Apache Hudi wrote
with a metadata table, its ``files`` partition against hudi-rs's file slices (file by file,
with sizes) and its record index against the rows hudi-rs reads."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dynbucket.format.metadata import reader, records
from dynbucket.format.metadata.reader import Chunk, MetadataTable, merge
from dynbucket.format.storage.store import TableStore
from tests.hudi_readers import hudi_read
from tests.hudi_tables import DATA, unzipped


def _has_mdt(zip_path: Path) -> bool:
    with zipfile.ZipFile(zip_path) as z:
        return any("/.hoodie/metadata/files/" in n for n in z.namelist())


#: Every table with a metadata table whose rows carry Hudi's meta fields.
WITH_MDT = sorted(
    str(p.relative_to(DATA))[: -len(".zip")]
    for p in DATA.rglob("v[89]_*.zip")
    if "nometa" not in p.name and _has_mdt(p)
)


@pytest.mark.parametrize("name", WITH_MDT)
def test_the_files_partition_lists_what_hudi_rs_lists(tmp_path: Path, name: str) -> None:
    from hudi import HudiTableBuilder

    root = unzipped(name, tmp_path)
    mdt = MetadataTable(TableStore.at(str(root)))
    assert mdt.exists()
    listing = mdt.listing()
    slices = HudiTableBuilder.from_base_uri(str(root)).build().get_file_slices()
    assert slices
    for s in slices:
        files = listing[s.partition_path]
        assert files[s.base_file_name] == s.base_file_size
        assert [files[n] for n in s.log_file_names] == list(s.log_file_sizes)
    assert sorted(listing) == mdt.partitions()
    for partition, files in listing.items():  # and what it lists is on storage, that size
        for file_name, size in files.items():
            assert (root / partition / file_name).stat().st_size == size


@pytest.mark.parametrize("name", [n for n in WITH_MDT if "lance" not in n])
def test_the_record_index_holds_each_live_key_where_hudi_rs_reads_it(
    tmp_path: Path, name: str
) -> None:
    root = unzipped(name, tmp_path)
    mdt = MetadataTable(TableStore.at(str(root)))
    assert mdt.exists()
    rows = hudi_read(str(root)).to_pylist()
    where: dict[str, set[tuple[str, str]]] = {}
    for r in rows:
        file_id = r["_hoodie_file_name"].split("_")[0]
        where.setdefault(r["_hoodie_record_key"], set()).add((r["_hoodie_partition_path"], file_id))
    index = {k: loc for (_, k), loc in mdt.record_index().items()}  # Hudi's: global
    assert not mdt.partitioned()
    assert set(index) == set(where)
    # A key in two rows (``v9_nonpartitioned_rollback`` inserted one twice) is indexed at
    # one of them: the newest.
    assert all((loc.partition, loc.file_id) in where[k] for k, loc in index.items())
    some = sorted(index)[:3]
    assert mdt.lookup([*some, "no such key"]) == {k: index[k] for k in some}
    # A data partition's keys read as Arrow (what a slot bootstraps from): the same.
    for partition in {loc.partition for loc in index.values()}:
        located = mdt.record_locations(partition).to_pylist()
        assert {r["key"]: (r["file_id"], r["instant_millis"]) for r in located} == {
            k: (loc.file_id, loc.instant_millis)
            for k, loc in index.items()
            if loc.partition == partition
        }


@pytest.mark.parametrize("one_hash", [False, True])
def test_a_slice_merges_to_each_keys_newest_record_and_drops_deleted_keys(
    one_hash: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def binary(*values: bytes | None) -> pa.BinaryArray:
        return pa.array(values, pa.binary())

    if one_hash:  # every key's hash the same: the merge sorts the keys themselves
        monkeypatch.setattr(reader, "hash_columns", lambda c: np.zeros(len(c[0]), np.int64))
    chunks = [
        Chunk(binary(b"a", b"b", b"c"), binary(b"a1", b"b1", b"c1"), "old"),
        Chunk(binary(b"b", b"d"), None, None),  # a delete block: b goes, d was never
        Chunk(binary(b"a", b"b"), binary(b"a2", b"b2"), "new"),  # b comes back
        Chunk(binary(b"c", b"e"), binary(b"c3", b"e3"), "new"),
        Chunk(binary(b"e"), None, None),
    ]
    merged = merge(chunks)
    assert merged.keys.to_pylist() == [b"a", b"b", b"c"]
    assert merged.values.to_pylist() == [b"a2", b"b2", b"c3"]
    assert [merged.schemas[i] for i in merged.schema_at] == ["new", "new", "new"]
    unsorted = merge(chunks, sort_keys=False)
    assert sorted(zip(unsorted.keys.to_pylist(), unsorted.values.to_pylist(), strict=True)) == [
        (b"a", b"a2"),
        (b"b", b"b2"),
        (b"c", b"c3"),
    ]
    assert merge([]).keys.to_pylist() == []


def test_chunks_of_distinct_keys_merge_to_every_record() -> None:
    """A partition's keys written once each (no delete, no move): every record is live;
    unsorted, the records stay in their order (what a bootstrap reads, with no copy)."""
    chunks = [
        Chunk(pa.array([b"b", b"d"], pa.binary()), pa.array([b"b1", b"d1"], pa.binary()), "one"),
        Chunk(pa.array([b"a", b"c"], pa.binary()), pa.array([b"a2", b"c2"], pa.binary()), "two"),
    ]
    unsorted = merge(chunks, sort_keys=False)
    assert unsorted.keys.to_pylist() == [b"b", b"d", b"a", b"c"]
    assert unsorted.values.to_pylist() == [b"b1", b"d1", b"a2", b"c2"]
    assert [unsorted.schemas[i] for i in unsorted.schema_at] == ["one", "one", "two", "two"]
    assert merge(chunks).keys.to_pylist() == [b"a", b"b", b"c", b"d"]
    assert merge(chunks).values.to_pylist() == [b"a2", b"b1", b"c2", b"d1"]


def test_locations_written_in_two_schemas_read_in_record_order() -> None:
    """A group whose records were written with two schemas (the metadata table's schema
    changed between them): each record's location decoded with its own, in record order."""
    one = records.schema_json()
    two = json.dumps(json.loads(one))  # the same schema spelled otherwise: a second one
    where = [records.Location("p", f"f{i % 2}", 1000 + i) for i in range(4)]
    values = [records.record_index_record(w, one if i % 2 else two) for i, w in enumerate(where)]
    merged = reader.Merged(
        pa.array([b"a", b"b", b"c", b"d"]),
        pa.array(values, pa.binary()),
        np.array([1, 0, 1, 0]),
        (one, two),
    )
    located = merged.location_table().to_pylist()
    assert [(r["key"], r["file_id"], r["instant_millis"]) for r in located] == [
        ("a", "f0", 1000),
        ("b", "f1", 1001),
        ("c", "f0", 1002),
        ("d", "f1", 1003),
    ]
