"""Bare Parquet scans read by the driver (``write/file_scan.py``): the rows, types, order and
key hashes Spark would collect, and Spark still reads anything that is not a bare scan."""

from __future__ import annotations

import datetime as dt
import decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.format.records.incoming import required_fields
from dynbucket.format.table.spec import TableSpec
from dynbucket.options import DynamicBucketIndex
from dynbucket.runtime import Runtime, RuntimeConfig
from dynbucket.table import Table
from dynbucket.write.driver import collect_hashed
from dynbucket.write.file_scan import bare_file_stream, read_scanned
from dynbucket.write.spark import conform_spark

UTC = dt.UTC
#: The table: a composite key, a field the files carry narrower (int32), one they may lack.
TABLE = pa.schema(
    [
        ("id", pa.string()),
        ("n", pa.int32()),
        ("day", pa.date32()),
        ("v", pa.int64()),
        ("price", pa.decimal128(9, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
        ("note", pa.string()),
    ]
)
FILE = pa.schema(
    [
        ("id", pa.string()),
        ("n", pa.int32()),
        ("day", pa.date32()),
        ("v", pa.int32()),
        ("price", pa.decimal128(9, 2)),
        ("at", pa.timestamp("us", tz="UTC")),
    ]
)


def _rows(first: int, count: int, note: bool = False) -> pa.Table:
    ids = range(first, first + count)
    rows = pa.table(
        {
            "id": [f"k{i % 7}" if i % 5 else None for i in ids],
            "n": [i % 3 for i in ids],
            "day": [dt.date(2026, 1, 1 + i % 28) for i in ids],
            "v": list(ids),
            "price": [decimal.Decimal(i) / 4 for i in ids],
            "at": [dt.datetime(2026, 1, 1, tzinfo=UTC) + dt.timedelta(seconds=i) for i in ids],
        },
        schema=FILE,
    )
    return rows.append_column("note", pa.array([f"#{i}" for i in ids])) if note else rows


def _spec(tmp_path: Path, runtime: Runtime) -> TableSpec:
    t = Table.create(
        str(tmp_path / "t"),
        TABLE,
        ["id", "n"],
        "day",
        "v",
        DynamicBucketIndex(assigner_slots=2),
        runtime=runtime,
    )
    t.close()
    return t._spec


def _spark_collects(df: Any, spec: TableSpec, deletes: bool = False) -> pa.Table:
    conformed = conform_spark(df, spec, required_fields(spec, deletes))
    return pa.Table.from_batches(collect_hashed(conformed, spec.record_key))


def _same(ours: list[pa.RecordBatch] | None, spark: pa.Table) -> None:
    assert ours is not None
    got = pa.Table.from_batches(ours)
    assert got.schema.names == spark.schema.names
    assert got.cast(spark.schema).equals(spark)  # values, nulls and order, hash included


def test_files_read_in_the_driver_equal_what_spark_collects(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    spec = _spec(tmp_path, runtime)
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(_rows(0, 30, note=True), folder / "a.parquet")
    pq.write_table(_rows(30, 300, note=True), folder / "b.parquet", row_group_size=64)
    df = spark.read.parquet(str(folder))
    _same(read_scanned(df, spec, None), _spark_collects(df, spec))
    # Deletes may leave fields out: they become nulls on both sides.
    pq.write_table(_rows(0, 40), tmp_path / "c.parquet")
    one = spark.read.parquet(str(tmp_path / "c.parquet"))
    _same(
        read_scanned(one, spec, required_fields(spec, True)),
        _spark_collects(one, spec, deletes=True),
    )
    # A path Spark encodes in its URIs reads the same file.
    spaced = tmp_path / "a b%"
    spaced.mkdir()
    pq.write_table(_rows(5, 10, note=True), spaced / "c d.parquet")
    odd = spark.read.parquet(str(spaced))
    _same(read_scanned(odd, spec, None), _spark_collects(odd, spec))


#: Spark's file splits of about 1 kB.
_SPLIT = {"spark.sql.files.maxPartitionBytes": "1024", "spark.sql.files.openCostInBytes": "0"}


def test_a_file_spark_splits_into_pieces_read_one_after_the_other_is_read_whole(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """Spark splits a file larger than its split size (4 MiB at least; the input's bytes over
    its default parallelism): pieces of one file, read from its start to its end, give the
    file's rows in its order (a 7 MB input of 500k rows fell back to a Spark collect for
    this in a run that split it: 2.0-3.4 s, against a read of 0.2-0.5 s)."""
    spec = _spec(tmp_path, runtime)
    folder = tmp_path / "in"
    folder.mkdir()
    pq.write_table(_rows(0, 200, note=True), folder / "a.parquet", row_group_size=20)
    df = spark.read.parquet(str(folder))
    for key, value in _SPLIT.items():
        spark.conf.set(key, value)
    try:
        assert df.rdd.getNumPartitions() > 2  # pieces of the one file
        _same(read_scanned(df, spec, None), _spark_collects(df, spec))
    finally:
        for key in _SPLIT:
            spark.conf.unset(key)


@pytest.mark.parametrize(
    "case",
    [
        "filter",
        "project",
        "partition folders",
        "ms timestamps",
        "unsigned ints",
        "missing field",
        "renamed case",
        "field ids",
        "two split files",
    ],
)
def test_anything_but_a_bare_scan_of_matching_files_is_left_to_spark(
    spark: Any, runtime: Runtime, tmp_path: Path, case: str
) -> None:
    spec = _spec(tmp_path, runtime)
    folder = tmp_path / "in"
    folder.mkdir()
    rows = _rows(0, 20, note=True)
    if case == "partition folders":
        (folder / "region=eu").mkdir()
        pq.write_table(rows, folder / "region=eu" / "a.parquet")
    elif case == "ms timestamps":
        pq.write_table(
            rows.set_column(5, "at", rows["at"].cast(pa.timestamp("ms", tz="UTC"))),
            folder / "a.parquet",
        )
    elif case == "unsigned ints":
        pq.write_table(rows.set_column(3, "v", rows["v"].cast(pa.uint32())), folder / "a.parquet")
    elif case == "renamed case":
        pq.write_table(rows.rename_columns(["ID", *rows.column_names[1:]]), folder / "a.parquet")
    elif case == "two split files":  # Spark splits both into pieces of ~1 kB, ordered by
        # size: the last pieces of both come after every full one, so a's rows and b's
        # interleave in Spark's order
        pq.write_table(rows, folder / "a.parquet", row_group_size=5)
        pq.write_table(rows, folder / "b.parquet", row_group_size=5)
    else:
        pq.write_table(rows, folder / "a.parquet")
    if case == "missing field":
        pq.write_table(rows.drop_columns(["price"]), folder / "b.parquet")
    reader = spark.read
    if case in ("missing field", "renamed case"):  # Spark reads them only with a schema
        reader = reader.schema(
            "id string, n int, day date, v int, price decimal(9,2), at timestamp, note string"
        )
    df = reader.parquet(str(folder))
    if case == "filter":
        df = df.filter("v > 3")
    elif case == "project":
        df = df.select("id", "n", "day", "v", "price", "at", df.id.alias("note"))
    confs = {
        "field ids": {"spark.sql.parquet.fieldId.read.enabled": "true"},
        "two split files": _SPLIT,
    }.get(case, {})
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        assert read_scanned(df, spec, None) is None
        if case == "two split files":  # the scan Spark plans really has pieces of a file
            assert df.rdd.getNumPartitions() > 2
    finally:
        for key in confs:
            spark.conf.unset(key)
    if case != "partition folders":  # its extra field is refused by the schema check
        assert _spark_collects(df, spec).num_rows > 0  # and Spark reads it


def test_a_bare_file_stream_is_written_without_spark_jobs_and_a_filtered_one_is_filtered(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    schema = pa.schema(
        [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
    )
    incoming = tmp_path / "in"
    incoming.mkdir()
    for b in range(3):
        ids = range(b * 5, b * 5 + 10)
        pq.write_table(
            pa.table(
                {"id": [f"k{i}" for i in ids], "day": ["d0"] * 10, "v": [b] * 10, "ts": [b] * 10},
                schema=schema,
            ),
            incoming / f"b{b}.parquet",
        )
    source = (
        spark.readStream.schema("id string, day string, v long, ts long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(incoming))
    )
    filtered = source.filter("id != 'k7'")
    assert bare_file_stream(source) and not bare_file_stream(filtered)
    assert not bare_file_stream(spark.readStream.format("rate").load())
    laps: dict[str, list[str]] = {"bare": [], "filtered": []}
    live = {}
    for name, stream in (("bare", source), ("filtered", filtered)):
        t = Table.create(
            str(tmp_path / name),
            schema,
            "id",
            "day",
            "ts",
            DynamicBucketIndex(max_keys_per_bucket=4, assigner_slots=2),
            runtime=runtime,
        )
        t._spark_writer().driver_max_bytes = RuntimeConfig().driver_write_max_bytes
        t.stream(
            stream,
            str(tmp_path / f"ckpt-{name}"),
            trigger={"availableNow": True},
            on_batch=lambda i, r, n=name: laps[n].append(  # type: ignore[misc]
                "read" if "read" in r.seconds else "collect"
            ),
        ).awaitTermination()
        live[name] = {r["id"]: r["v"] for r in t.to_arrow().to_pylist()}
        t.close()
    assert laps == {"bare": ["read"] * 3, "filtered": ["collect"] * 3}
    assert len(live["bare"]) == 20 and live["bare"]["k7"] == 1 and live["bare"]["k19"] == 2
    assert (
        "k7" not in live["filtered"]
        and {k: v for k, v in live["bare"].items() if k != "k7"} == live["filtered"]
    )
