"""``ingest``'s two paths agree: what pyarrow reads in process (small inputs) is what Spark
reads, column types and rows, and the in-process writer with as many slots as Spark's
gives the same buckets, so a table created from a small file is the table the Spark path
creates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dynbucket.cli import ingest, ingest_local
from dynbucket.console import spark_tasks
from dynbucket.format.table.spec import TableSpec
from dynbucket.options import DynamicBucketIndex
from dynbucket.runtime import Runtime, RuntimeConfig
from dynbucket.table import Table


def _plain(t: pa.Table) -> list[dict[str, Any]]:
    """Rows with times as microseconds since the epoch (Spark's Arrow carries the session
    zone, pyarrow's UTC: the instants are what must agree)."""
    cols = {
        f.name: pc.cast(t.column(f.name), pa.int64())
        if pa.types.is_timestamp(f.type)
        else t.column(f.name)
        for f in t.schema
    }
    return pa.table(cols).to_pylist()


def test_pyarrow_reads_what_spark_reads(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    (tmp_path / "a.csv").write_text(
        "id,small,big,num,flag,text,empty,quoted\n"
        'k1,1,5000000000,1.5,true,hi,,""\n'
        'k2,-3,1,2,FALSE,"a,b",,x\n'
        "k3,,2,-0.25,false,,,y\n"
    )
    (tmp_path / "b.csv").write_text("id,small,big,num,flag,text,empty,quoted\nk4,4,3,7,true,z,,q\n")
    (tmp_path / "a.json").write_text(
        '{"z": 1, "at": "2024-01-01T00:00:00", "m": 1.5, "b": true, "s": "x"}\n'
        '{"z": 2, "at": "x", "m": 2, "b": false}\n'
    )
    pq.write_table(
        pa.table(
            {
                "id": pa.array(["k1", "k2"], pa.large_string()),
                "t": pa.array([1_000_000, 2_000_000], pa.timestamp("ns", tz="Europe/Paris")),
                "d": pa.array([1, 2], pa.decimal128(10, 2)),
                "n": pa.array([1, None], pa.int32()),
            }
        ),
        tmp_path / "a.parquet",
        coerce_timestamps="us",  # Spark refuses nanoseconds (so does the local path)
    )
    table = TableSpec(
        schema=pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64())]),
        record_key=("id",),
    )
    # Columns by the header's names, in another order than the schema's (and, without a
    # header, by position).
    (tmp_path / "typed.csv").write_text("v,id,ts\n1.5,k1,7\n,k2,8\n")
    (tmp_path / "bare.csv").write_text("k1,7,1.5\nk2,8,\n")
    (tmp_path / "typed.json").write_text('{"v": 2.5, "id": "k1", "ts": 9, "extra": 1}\n')
    (tmp_path / "dates.csv").write_text("id,day,n\nk1,2024-01-15,1\nk2,,2\nk3,2023-12-31,3\n")
    (tmp_path / "times.csv").write_text(
        "id,at\nk1,2024-01-15 10:00:00\nk2,\nk3,2023-12-31T23:59:59.123456\nk4,2024-02-01\n"
        "k5,1969-07-20 20:17:40.5\n"
    )
    (tmp_path / "days.csv").write_text("id,at\nk6,2024-03-01\n")  # a date file among times
    cases = [
        (["a.csv", "b.csv"], "csv", None, None),
        (["a.json"], "json", None, None),
        (["a.parquet"], "parquet", None, None),
        (["a.parquet"], "parquet", "id string, n int, missing double", None),
        (["typed.csv"], "csv", "id string, ts bigint, v double", None),
        (["typed.csv"], "csv", None, table),
        (["bare.csv"], "csv", "id string, ts bigint, v double", None),
        (["typed.json"], "json", None, table),
        (["dates.csv"], "csv", None, None),
        (["times.csv"], "csv", None, None),
        (["times.csv", "days.csv"], "csv", None, None),
        (["times.csv"], "csv", "id string, at timestamp", None),
        (["times.csv"], "csv", "id string, at timestamp_ntz", None),
    ]
    for inputs, fmt, schema, spec in cases:
        files = [str(tmp_path / n) for n in inputs]
        header = inputs != ["bare.csv"]
        ours = ingest_local.read(files, fmt, schema, spec.schema if spec else None, None, header)
        df = ingest.read(spark, files, fmt, schema, spec, header)
        if inputs in (["typed.csv"], ["bare.csv"]):
            assert sorted(ours.select(["id", "ts", "v"]).to_pylist(), key=str) == [
                {"id": "k1", "ts": 7, "v": 1.5},
                {"id": "k2", "ts": 8, "v": None},
            ]
        theirs = df._collect_as_arrow()
        theirs = pa.Table.from_batches(theirs, to_arrow_schema(df.schema)) if theirs else None
        assert ours.schema == to_arrow_schema(df.schema), (inputs, schema, df.schema)
        key = ours.column_names[0] if fmt == "json" and spec is None else "id"
        assert theirs is not None
        assert sorted(_plain(ours), key=lambda r: str(r[key])) == sorted(
            _plain(theirs), key=lambda r: str(r[key])
        ), (inputs, schema)


def _buckets(t: Table) -> dict[str, tuple[str, int]]:
    """Each key's partition and bucket."""
    rows = t.to_arrow().select(["id", "_partition", "_bucket"]).to_pylist()
    return {r["id"]: (r["_partition"], r["_bucket"]) for r in rows}


def test_an_in_process_write_with_n_slots_gives_the_buckets_of_a_spark_write(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """The in-process writer with ``assigner_slots`` slots routes each row as Spark does,
    so a small ingest's table has the buckets the Spark path gives the same file (read by
    the driver, in order: a slot's new keys take buckets in the order they reach it): first
    write, then updates and new keys, over buckets that fill (3 keys each) and partitions
    of different sizes."""
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
    index = DynamicBucketIndex(max_keys_per_bucket=3)

    def rows(ids: range, v: int) -> pa.Table:
        return pa.table(
            {
                "id": [f"k{i}" for i in ids],
                "day": [f"d{i % 3 // 2}" for i in ids],
                "v": [v] * len(ids),
            },
            schema=schema,
        )

    local = Table.create(str(tmp_path / "local"), schema, "id", "day", index=index)
    through_spark = Table.create(
        str(tmp_path / "spark"), schema, "id", "day", index=index, runtime=runtime
    )
    # The default of a runtime (the session's says 0: always Spark tasks).
    through_spark._spark_writer().driver_max_bytes = RuntimeConfig().driver_write_max_bytes
    for n, batch in enumerate((rows(range(0, 14), 1), rows(range(8, 30), 2))):
        local.upsert(batch, assigner_slots=2)
        pq.write_table(batch, tmp_path / f"batch-{n}.parquet")
        df = spark.read.parquet(str(tmp_path / f"batch-{n}.parquet"))
        assert "read" in through_spark.upsert(df, assigner_slots=2).seconds  # by the driver
    ours = _buckets(local)
    assert ours == _buckets(through_spark)
    assert len(ours) == 30 and len(set(ours.values())) > 4  # several buckets per partition
    local.close()
    through_spark.close()


@pytest.mark.parametrize("every", [0.05, 60.0])
def test_spark_tasks_reports_the_tasks_of_the_blocks_jobs(spark: Any, every: float) -> None:
    """Every task of the block's jobs, also of a stage that started and ended between two
    polls (60 s: none but the last, after the jobs ended; a CI run once saw 1 of 5)."""
    told: list[tuple[int, int]] = []
    with spark_tasks(spark, lambda done, total: told.append((done, total)), every=every):
        spark.range(0, 10_000, numPartitions=4).selectExpr("sum(id)").collect()
    assert told[-1] == (5, 5)  # the 4 tasks of the scan, and the sum's


def test_spark_refuses_csv_headers_the_table_does_not_explain(spark: Any, tmp_path: Path) -> None:
    """What the in-process path refuses by name (tests/unit/test_ingest.py), Spark's path
    refuses too: a column the table lacks, and a file whose header differs from the first's
    (Spark itself checks every file's header against the names it was given)."""
    import pytest

    from dynbucket.base.errors import InvalidInputError, SchemaMismatchError

    table = TableSpec(
        schema=pa.schema([("id", pa.string()), ("ts", pa.int64())]), record_key=("id",)
    )
    (tmp_path / "extra.csv").write_text("id,ts,coupon\nk1,1,x\n")
    with pytest.raises(SchemaMismatchError, match=r"\['coupon'\] of the CSV header"):
        ingest.read(spark, [str(tmp_path / "extra.csv")], "csv", None, table)
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "a.csv").write_text("id,ts\nk1,1\n")
    (tmp_path / "other" / "b.csv").write_text("ts,id\n2,k2\n")
    with pytest.raises(InvalidInputError, match="headers differ"):
        ingest.read(spark, [str(tmp_path / "other")], "csv", None, table)


def test_a_bad_csv_on_spark_is_one_error_and_nothing_is_written(
    runtime: Runtime, tmp_path: Path
) -> None:
    """``ingest``'s Spark path: a value Spark cannot read as the table's type fails Spark's
    job; what reaches the user is one ``InvalidInputError`` naming the file and Spark's
    reason (the command prints it as one line, ``test_cli.py`` shows that for the
    in-process path), and the table has no instant."""
    import sys

    import pytest

    from dynbucket.base.errors import InvalidInputError
    from dynbucket.cli.commands import _ingest_on_spark, parser

    uri = str(tmp_path / "t")
    Table.create(
        uri, pa.schema([("id", pa.string()), ("ts", pa.int64())]), "id", ordering_field="ts"
    ).close()
    (tmp_path / "bad.csv").write_text("id,ts\na,1\nb,two\n")
    args = parser().parse_args(["ingest", uri, str(tmp_path / "bad.csv")])
    args.terminal = sys.stderr  # where ``main`` sends progress reports
    spec = ingest.table_definition(uri, ingest.Definition(None, None, None, None))
    with pytest.raises(InvalidInputError, match=r"could not read .*bad.csv.*Malformed") as e:
        _ingest_on_spark(runtime, args, spec, "csv", inferred=False)
    assert "\n" not in str(e.value)
    assert Table.open(uri).history() == []
