"""``createDataFrame`` of local rows taken by the driver from their collection
(``write/local_rows.py``): the rows, types, order and key hashes Spark would collect, no
Spark job for a small write, and Spark still reads anything else; and a small snapshot
handed to Spark as Arrow: the rows Spark tasks read."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from dynbucket.format.records.incoming import required_fields
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from dynbucket.write.local_rows import read_local, relation_batches
from tests.integration.write.test_file_scan import _same, _spark_collects, _spec

DDL = "id string, n int, day date, v long, price decimal(9,2), at timestamp, note string"
MAX = 8 << 20


def _local(first: int, count: int) -> list[tuple[Any, ...]]:
    return [
        (
            f"k{i % 7}" if i % 5 else None,
            i % 3,
            dt.date(2026, 1, 1 + i % 28),
            i,
            decimal.Decimal(i) / 4,
            dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i),
            None if i % 4 else f"#{i}",
        )
        for i in range(first, first + count)
    ]


def test_local_rows_taken_in_the_driver_equal_what_spark_collects(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, runtime)
    df = spark.createDataFrame(_local(0, 700), DDL)
    _same(read_local(df, spec, None, MAX), _spark_collects(df, spec))
    keys = spark.createDataFrame(
        [(f"k{i}", i % 3, dt.date(2026, 1, 2)) for i in range(9)], "id string, n int, day date"
    )
    deletes = required_fields(spec, True)
    _same(read_local(keys, spec, deletes, MAX), _spark_collects(keys, spec, deletes=True))
    # Not exactly the local rows, or too many of them: Spark reads it.
    rdd = spark.sparkContext.parallelize(_local(0, 20)).map(lambda r: (*r[:3], r[3] + 1, *r[4:]))
    assert read_local(spark.createDataFrame(rdd, DDL), spec, None, MAX) is None
    assert read_local(df.filter("v > 3"), spec, None, MAX) is None
    assert read_local(df, spec, None, 1_000) is None
    nested = spark.createDataFrame([("a", [1, 2])], "id string, tags array<int>")
    assert read_local(nested, spec, None, MAX) is None


def test_a_small_delete_from_local_rows_runs_no_spark_job(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema, "id", "day", "ts", runtime=runtime)
    t._spark_writer().driver_max_bytes = MAX  # the session's runtime says 0
    try:
        rows = [(f"k{i}", f"d{i % 2}", 1) for i in range(300)]
        t.upsert(spark.createDataFrame(rows, "id string, day string, ts long"))
        gone = spark.createDataFrame(
            [(f"k{i}", f"d{i % 2}") for i in range(0, 300, 3)], "id string, day string"
        )
        tracker = spark.sparkContext.statusTracker()
        jobs = len(tracker.getJobIdsForGroup(None))
        result = t.delete(gone)
        assert len(tracker.getJobIdsForGroup(None)) == jobs
        assert "driver" in result.seconds
        assert t.to_arrow().num_rows == 200
    finally:
        t.close()


def test_rows_the_drivers_jvm_holds_are_converted_there_as_spark_collects_them(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    import pandas as pd
    from pyspark.sql import functions as F

    rows = pa.table(
        {
            "id": [f"k{i % 7}" if i % 5 else None for i in range(700)],
            "n": pa.array([i % 3 for i in range(700)], pa.int32()),
            "day": [dt.date(2026, 1, 1 + i % 28) for i in range(700)],
            "price": [decimal.Decimal(i) / 4 for i in range(700)],
            "at": pa.array(
                [
                    dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(seconds=i)
                    for i in range(700)
                ],
                pa.timestamp("us", "UTC"),
            ),
            "note": [None if i % 4 else f"#{i}" for i in range(700)],
        }
    )
    df = spark.createDataFrame(rows.to_pandas()).withColumn("_hash", F.xxhash64("id", "n"))
    tracker = spark.sparkContext.statusTracker()
    jobs = len(tracker.getJobIdsForGroup(None))
    held = relation_batches(df)
    assert len(tracker.getJobIdsForGroup(None)) == jobs  # no job
    assert held is not None
    collected = pa.Table.from_batches(df._collect_as_arrow())  # a job's tasks convert them
    assert pa.Table.from_batches(held).equals(collected)  # types, values, nulls, order
    # Rows the JVM does not hold: Spark collects them.
    assert relation_batches(spark.range(10)) is None
    assert relation_batches(spark.createDataFrame(pd.DataFrame({"a": [1]})).repartition(2)) is None
    # A small write of a pandas frame through Spark: no job, the rows as given.
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema, "id", "day", "ts", runtime=runtime)
    t._spark_writer().driver_max_bytes = MAX  # the session's runtime says 0
    try:
        given = pd.DataFrame({"id": [f"k{i}" for i in range(300)], "day": "d0", "ts": 1})
        jobs = len(tracker.getJobIdsForGroup(None))
        result = t.upsert(spark.createDataFrame(given))
        assert len(tracker.getJobIdsForGroup(None)) == jobs
        assert result.keys_inserted == 300
        assert sorted(t.to_arrow().column("id").to_pylist()) == sorted(given["id"])
    finally:
        t.close()


def test_a_small_snapshot_handed_to_spark_as_arrow_equals_what_tasks_read(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    from tests.integration.write.test_file_scan import TABLE, _rows

    t = Table.create(str(tmp_path / "t"), TABLE, ["id", "n"], "day", "v")
    try:
        rows = _rows(0, 200, note=True).filter(pa.compute.is_valid(pa.compute.field("id")))
        t.upsert(rows)
        t.delete(rows.slice(0, 5).select(["id", "n", "day"]))
        keys = {(r["id"], r["n"], r["day"]) for r in rows.to_pylist()}  # in each day
        live = len(keys - {(r["id"], r["n"], r["day"]) for r in rows.slice(0, 5).to_pylist()})
        by_key = [("id", "ascending"), ("n", "ascending"), ("at", "ascending")]
        for columns, meta in ((None, True), (["id", "n", "price", "at"], False)):
            handed = t.to_spark(spark, columns=columns, meta_columns=meta, driver_max_bytes=MAX)
            plan = handed._jdf.queryExecution().optimizedPlan().getClass().getSimpleName()
            assert plan == "LocalRelation"  # the Arrow batches, not a job of Python tasks
            tasks = t.to_spark(spark, columns=columns, meta_columns=meta)
            assert handed.schema == tasks.schema
            ours = pa.Table.from_batches(handed._collect_as_arrow()).sort_by(by_key)
            theirs = pa.Table.from_batches(tasks._collect_as_arrow()).sort_by(by_key)
            assert ours.num_rows == live > 0
            assert ours.equals(theirs)
        assert t.to_spark(spark, driver_max_bytes=1).count() == handed.count()
    finally:
        t.close()
