"""Spark reads what the table layer writes, and hashes keys exactly as keyhash does.

Plain Parquet readers see every base file on disk; once compaction and cleaning have run,
those are exactly the snapshot's rows.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pytest

from dynbucket.actors import DynamicBucketIndex
from dynbucket.base.keyhash import hash_columns
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.date32()), ("v", pa.int64())])


@pytest.fixture()
def compacted(tmp_path: Path) -> Table:
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", index=DynamicBucketIndex(max_keys_per_bucket=40)
    )
    days = [dt.date(2024, 1, 1), dt.date(2024, 1, 2)]
    t.upsert(
        pa.table(
            {
                "id": [f"k{i}" for i in range(100)],
                "day": [days[i % 2] for i in range(100)],
                "v": list(range(100)),
            },
            schema=SCHEMA,
        )
    )
    t.upsert(
        pa.table(
            {"id": ["k1", "k2", "new"], "day": [days[1], days[0], days[0]], "v": [-1, -2, -3]},
            schema=SCHEMA,
        )
    )
    t.delete(pa.table({"id": ["k3"], "day": [days[1]]}, schema=SCHEMA.remove(2)))
    t.compact()  # every live row now sits in a base file
    assert t.clean(retain=1).files_removed > 0  # superseded slices go: plain readers see one
    return t


def _rows(table: pa.Table) -> set[tuple[str, dt.date, int]]:
    return {(r["id"], r["day"], r["v"]) for r in table.to_pylist()}


def test_spark_read_parquet_reads_the_base_files(spark, compacted: Table) -> None:  # type: ignore[no-untyped-def]
    expected = _rows(compacted.to_arrow(meta_columns=False))
    assert len(expected) == 100  # 100 + 1 new - 1 deleted
    df = spark.read.parquet(compacted.uri)
    got = {(r["id"], r["day"], r["v"]) for r in df.select("id", "day", "v").collect()}
    assert got == expected


def test_pyarrow_dataset_with_hive_partitioning_reads_the_base_files(compacted: Table) -> None:
    ds = pads.dataset(
        compacted.uri,
        format="parquet",
        partitioning=pads.partitioning(pa.schema([("day", pa.date32())]), flavor="hive"),
    )
    assert _rows(ds.to_table(columns=["id", "day", "v"])) == _rows(compacted.to_arrow())


def test_to_spark_equals_to_arrow_with_meta_columns(spark, compacted: Table) -> None:  # type: ignore[no-untyped-def]
    # A delta after the compaction, so Spark tasks must merge slices too.
    compacted.upsert(
        pa.table({"id": ["k5"], "day": [dt.date(2024, 1, 2)], "v": [555]}, schema=SCHEMA)
    )
    arrow = compacted.to_arrow()
    df = compacted.to_spark(spark)
    got = {tuple(r) for r in df.collect()}
    assert got == {tuple(r.values()) for r in arrow.to_pylist()}
    assert df.columns == ["id", "day", "v", "_partition", "_bucket", "_file_id", "_instant"]


def test_keyhash_equals_spark_xxhash64(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    data = pa.table(
        {
            "s": [f"key-{i}" * (i % 9) for i in range(300)],
            "i": pa.array([i * 7919 - 10**6 for i in range(300)], pa.int32()),
            "l": pa.array([i * 10**15 - 2**62 for i in range(300)], pa.int64()),
            "d": pa.array([dt.date(2000, 1, 1) + dt.timedelta(days=i) for i in range(300)]),
            "b": [i % 2 == 0 for i in range(300)],
        }
    )
    df = spark.createDataFrame(data.to_pandas())
    for cols in (["s"], ["i"], ["l"], ["d"], ["b"], ["s", "l"], ["d", "s", "i"]):
        got = hash_columns([data.column(c) for c in cols]).tolist()
        want = [r[0] for r in df.select(F.xxhash64(*cols)).collect()]
        assert got == want, cols
