"""A table of version 9 written through Spark tasks and the slot actors: Hudi's metadata
table lists exactly its files and holds each live key's location, and hudi-rs reads it
through the metadata table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from dynbucket.format.file_group.slices import data_files
from dynbucket.format.metadata.reader import MetadataTable
from dynbucket.options import DynamicBucketIndex, TableOptions
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
DDL = "id string, day string, v long"


def test_spark_writes_keep_the_metadata_table(spark: Any, runtime: Runtime, tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "v",
        DynamicBucketIndex(max_keys_per_bucket=10),
        TableOptions(table_version=9),
        runtime=runtime,
    )
    t.upsert(spark.createDataFrame([(f"k{i}", f"d{i % 3}", i) for i in range(60)], DDL), 2)
    t.upsert(spark.createDataFrame([(f"k{i}", f"d{i % 3}", -i) for i in range(0, 80, 7)], DDL), 2)
    t.delete(spark.createDataFrame([("k3", "d0"), ("k4", "d1")], "id string, day string"))
    mdt = MetadataTable(t._store)
    snapshot = t.snapshot()
    listing = mdt.listing()
    for partition in snapshot.partitions():
        stored = {
            f.name: f.size for f in data_files(t._store, partition) if f.instant in snapshot.visible
        }
        assert listing[partition] == stored
    rows = t.to_arrow().to_pylist()
    assert len(rows) == 60 + 3 - 2  # k63, k70, k77 new; k3, k4 deleted
    located = {k: loc.file_id for k, loc in mdt.record_index().items()}
    assert located == {(r["_partition"], r["id"]): r["_file_id"] for r in rows}
    assert t.check().healthy
    check_hudi_reads(t)
    t.close()
