"""A slot of a version 9 table bootstraps from Hudi's partitioned record index (the metadata
table's ``record_index``): the same keys, buckets and counts as dynbucket's own index gives,
through inserts, deletes, keys in two partitions, a deleted key coming back and
compactions; and it is what a slot reads (with dynbucket's index of a partition gone, its
keys are still updated in place)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from dynbucket import DynamicBucketIndex, Table, TableOptions
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.format.table.context import TableRef
from dynbucket.write.index_source import MetadataIndexSource, RLIIndexSource, index_source

SCHEMA = pa.schema(
    [("id", pa.string()), ("n", pa.int32()), ("day", pa.string()), ("v", pa.int64())]
)


def _rows(ids: range, v: int, day: str | None = None) -> pa.Table:
    return pa.table(
        {
            "id": [f"k{i:03d}" for i in ids],
            "n": [i % 3 for i in ids],
            "day": [day or f"d{i % 2}" for i in ids],
            "v": [v] * len(ids),
        },
        schema=SCHEMA,
    )


def _same_loads(t: Table, partitions: list[str]) -> None:
    table = TableRef.of(t._store, t._spec)
    ours, hudis = RLIIndexSource(table), MetadataIndexSource(table)
    for partition in partitions:
        for slots in (1, 3):
            for slot in range(slots):
                want = ours.load(partition, slot, slots)
                got = hudis.load(partition, slot, slots)
                assert np.array_equal(got.keys, want.keys), (partition, slot, slots)
                assert np.array_equal(got.buckets, want.buckets)
                n = max(len(got.bucket_keys), len(want.bucket_keys))
                assert np.array_equal(
                    np.pad(got.bucket_keys, (0, n - len(got.bucket_keys))),
                    np.pad(want.bucket_keys, (0, n - len(want.bucket_keys))),
                )


def test_a_slot_loads_from_hudis_record_index_what_dynbuckets_index_holds(
    tmp_path: Path,
) -> None:
    opts = TableOptions(table_version=9, compaction_delta_commits=2)
    index = DynamicBucketIndex(max_keys_per_bucket=6)
    # A composite key of a string and an int: its text (``id:k001,n:1``) read back.
    t = Table.create(str(tmp_path / "t"), SCHEMA, ["id", "n"], "day", "v", index, opts)
    assert index_source(TableRef.of(t._store, t._spec)).func is MetadataIndexSource
    t.upsert(_rows(range(0, 30), 1))
    t.upsert(_rows(range(0, 3), 2, day="d1"))  # k000 and k002 in both partitions
    t.delete(_rows(range(0, 12, 2), 3))  # tombstones
    t.upsert(_rows(range(0, 4), 4))  # k000, k002 come back: new keys again
    t.compact()
    _same_loads(t, ["day=d0", "day=d1", "day=d9"])
    # Loaded again while the partition's record index is the same files, dynbucket's index
    # answers (it agreed); once a write inserts keys there, the record index is read again.
    source = MetadataIndexSource(TableRef.of(t._store, t._spec))
    first = source.load("day=d0", 0, 1)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(MetadataTable, "record_locations", lambda *a: pytest.fail("read again"))
        again = source.load("day=d0", 0, 1)
        assert np.array_equal(again.keys, first.keys)
        t.upsert(_rows(range(3, 30, 2), 6))  # updates only: the record index is as it was
        source.load("day=d0", 0, 1)
    t.upsert(_rows(range(100, 104), 7))  # new keys in both partitions
    read = []
    record_locations = MetadataTable.record_locations
    with pytest.MonkeyPatch.context() as m:
        m.setattr(
            MetadataTable, "record_locations", lambda *a: read.append(1) or record_locations(*a)
        )
        assert len(source.load("day=d0", 0, 1).keys) == len(first.keys) + 2 and read == [1]
    # With dynbucket's index of day=d0 gone, a new writer's slots still know its keys:
    # an update lands on the key's row, no second row.
    shutil.rmtree(tmp_path / "t" / ".hoodie" / ".dynbucket" / "rli" / "day=d0")
    assert (
        RecordLevelIndex(t._store, t._spec)
        .record_index_locations("day=d0", t.snapshot().timeline.visible())
        .num_rows
        == 0
    )
    t.close()
    again = Table.open(str(tmp_path / "t"))
    again.upsert(_rows(range(0, 30, 2), 5, day="d0"))
    rows = again.to_arrow().to_pylist()
    d0 = [(r["id"], r["n"]) for r in rows if r["day"] == "d0"]
    assert len(d0) == len(set(d0)) == 17  # 15, and k100 and k102
    assert {r["v"] for r in rows if r["day"] == "d0" and int(r["id"][1:]) < 30} == {5}
    again.close()


def test_a_write_completed_while_a_slot_reads_the_record_index_is_no_disagreement(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two writers on one table: the other writer's commit landing between the record
    index's read and dynbucket's index's read made the two views of two moments, and
    every load warned that the indexes differ (and read the record index whole again)."""
    opts = TableOptions(table_version=9)
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day", "v", options=opts)
    t.upsert(_rows(range(0, 30), 1))
    other = Table.open(str(tmp_path / "t"))
    source = MetadataIndexSource(TableRef.of(t._store, t._spec))
    record_locations = MetadataTable.record_locations

    beside: list[int] = []

    def with_a_commit_beside(mdt: MetadataTable, partition: str) -> pa.Table:
        located = record_locations(mdt, partition)
        if not beside:  # once (the other writer's own loads come here too)
            beside.append(1)
            other.upsert(_rows(range(200, 210), 2))  # new keys in day=d0 and day=d1
        return located

    with caplog.at_level("WARNING"), pytest.MonkeyPatch.context() as m:
        m.setattr(MetadataTable, "record_locations", with_a_commit_beside)
        load = source.load("day=d0", 0, 1)
    assert len(load.keys) == 15  # the record index as read, before the commit beside
    assert not [r for r in caplog.records if "differs" in r.getMessage()]
    # Not remembered as agreed: the next load reads the record index, the commit's keys in.
    assert len(source.load("day=d0", 0, 1).keys) == 20
    other.close()
    t.close()
