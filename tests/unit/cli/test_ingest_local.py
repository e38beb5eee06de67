"""The pyarrow reader of small ``ingest`` inputs: Spark's types, without Spark.

That Spark reads the same files to the same rows and types is
tests/integration/test_ingest_paths.py.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.base.errors import ConfigError, InvalidInputError
from dynbucket.cli.ingest import refuse_text_ordering
from dynbucket.cli.ingest_local import (
    NeedsSpark,
    ddl_schema,
    input_bytes,
    input_files,
    read,
    spark_type_names,
)


def test_csv_columns_are_inferred_as_spark_infers_them(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text(
        "id,small,big,num,flag,text,empty,quoted\n"
        'k1,1,5000000000,1.5,true,hi,,""\n'
        'k2,-3,1,2,FALSE,"a,b",,x\n'
    )
    t = read([str(tmp_path / "a.csv")], "csv", None, None)
    assert spark_type_names(t.schema) == [
        ("id", "string"),
        ("small", "int"),
        ("big", "bigint"),
        ("num", "double"),
        ("flag", "boolean"),
        ("text", "string"),
        ("empty", "string"),
        ("quoted", "string"),
    ]
    assert t.to_pylist()[0] == {
        "id": "k1",
        "small": 1,
        "big": 5_000_000_000,
        "num": 1.5,
        "flag": True,
        "text": "hi",
        "empty": None,
        "quoted": None,
    }
    assert t.column("text").to_pylist() == ["hi", "a,b"]


def test_csv_files_widen_to_one_type_per_column(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,v\nk1,1\n")
    (tmp_path / "b.csv").write_text("id,v\nk2,2.5\n")
    (tmp_path / "c.csv").write_text("id,v\nk3,x\n")
    two = read([str(tmp_path / "a.csv"), str(tmp_path / "b.csv")], "csv", None, None)
    assert two.schema.field("v").type == pa.float64() and two.column("v").to_pylist() == [1, 2.5]
    three = read([str(tmp_path / n) for n in ("a.csv", "b.csv", "c.csv")], "csv", None, None)
    assert three.column("v").to_pylist() == ["1", "2.5", "x"]


def test_what_only_spark_decides_takes_the_spark_path(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("id,day\nk1,2024-01-01 10:00\n")
    (tmp_path / "n.json").write_text('{"id": "k1", "inner": {"b": 1}}\n')
    (tmp_path / "h.csv").write_text("id,v\nk1,123456789012345678901234\n")
    pq.write_table(pa.table({"t": pa.array([1], pa.timestamp("ms"))}), tmp_path / "t.parquet")
    for name, fmt, schema, why in [
        ("d.csv", "csv", None, "column 'day' looks like dates or times"),
        ("n.json", "json", None, "field 'inner' is nested JSON"),
        ("h.csv", "csv", None, "column 'v': integers beyond 64 bits"),
        ("t.parquet", "parquet", None, "column 't': a timestamp without a zone"),
        ("d.csv", "csv", "id string, day timestamp", "column 'day': times in a form Spark"),
        ("n.json", "json", "id string, day timestamp", "reads 'day' as a time from text"),
        ("d.csv", "csv", "id string, day map<string, int>", "a nested type"),
        ("d.csv", "csv", "id string, day interval", "type 'interval' of 'day'"),
    ]:
        with pytest.raises(NeedsSpark, match=why):
            read([str(tmp_path / name)], fmt, schema, None)


def test_a_csv_column_of_dates_is_a_date_column(tmp_path: Path) -> None:
    (tmp_path / "d.csv").write_text("id,day\nk1,2024-01-15\nk2,\nk3,2023-12-31\n")
    t = read([str(tmp_path / "d.csv")], "csv", None, None)
    assert spark_type_names(t.schema) == [("id", "string"), ("day", "date")]
    assert [str(d) if d else None for d in t.column("day").to_pylist()] == [
        "2024-01-15",
        None,
        "2023-12-31",
    ]
    # Not every value a calendar date, or not in Spark's date form: Spark decides.
    for bad in ("2024-02-30", "2024-1-5"):
        (tmp_path / "b.csv").write_text(f"id,day\nk1,2024-01-15\nk2,{bad}\n")
        with pytest.raises(NeedsSpark, match="looks like dates or times"):
            read([str(tmp_path / "b.csv")], "csv", None, None)


def test_a_csv_column_of_dates_and_times_is_a_timestamp_column_read_in_utc(
    tmp_path: Path,
) -> None:
    (tmp_path / "t.csv").write_text(
        "id,at\nk1,2024-01-15 10:00:00\nk2,\nk3,2023-12-31T23:59:59.123456\nk4,2024-02-01\n"
    )
    (tmp_path / "d.csv").write_text("id,at\nk5,2024-03-01\n")
    t = read([str(tmp_path / "t.csv"), str(tmp_path / "d.csv")], "csv", None, None)
    assert spark_type_names(t.schema) == [("id", "string"), ("at", "timestamp")]
    assert [str(d) if d else None for d in t.column("at").to_pylist()] == [
        "2024-01-15 10:00:00+00:00",
        None,
        "2023-12-31 23:59:59.123456+00:00",
        "2024-02-01 00:00:00+00:00",
        "2024-03-01 00:00:00+00:00",
    ]
    # A table's (or --schema's) timestamp column reads the same forms, zone or none.
    typed = read([str(tmp_path / "t.csv")], "csv", "id string, at timestamp_ntz", None)
    assert typed.column("at").type == pa.timestamp("us")
    assert typed.column("at")[2].as_py().isoformat() == "2023-12-31T23:59:59.123456"
    # No calendar's time, another form, a zone, or a time of day alone: Spark decides.
    for bad in (
        "2024-02-30 10:00:00",
        "2024-01-15 24:00:00",
        "2024-01-15 10:00",
        "2024-01-15 10:00:00Z",
        "2024-01-15 10:00:00.1234567",
        "10:00:00",
    ):
        (tmp_path / "b.csv").write_text(f"id,at\nk1,2024-01-15 10:00:00\nk2,{bad}\n")
        with pytest.raises(NeedsSpark, match="looks like dates or times"):
            read([str(tmp_path / "b.csv")], "csv", None, None)
        with pytest.raises(NeedsSpark, match="column 'at': times in a form Spark"):
            read([str(tmp_path / "b.csv")], "csv", "id string, at timestamp", None)


def test_json_numbers_are_bigint_and_fields_sorted_by_name(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text(
        '{"z": 1, "at": "2024-01-01T00:00:00", "m": 1.5, "b": true}\n{"z": 2, "at": "x", "m": 2}\n'
    )
    t = read([str(tmp_path / "a.json")], "json", None, None)
    assert t.schema == pa.schema(
        [("at", pa.string()), ("b", pa.bool_()), ("m", pa.float64()), ("z", pa.int64())]
    )
    assert t.column("at").to_pylist() == ["2024-01-01T00:00:00", "x"]  # text stays text


def test_a_schema_types_csv_and_json_by_name(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("ts,id\n7,k1\n")
    (tmp_path / "bare.csv").write_text("k1,7\n")
    (tmp_path / "a.json").write_text('{"ts": 7, "id": "k1", "extra": 1}\n')
    ddl = "id string, ts bigint"
    assert read([str(tmp_path / "a.csv")], "csv", ddl, None).to_pylist() == [{"ts": 7, "id": "k1"}]
    bare = read([str(tmp_path / "bare.csv")], "csv", ddl, None, header=False)  # by position
    assert bare.to_pylist() == [{"id": "k1", "ts": 7}]
    by_table = read([str(tmp_path / "a.json")], "json", None, ddl_schema(ddl))
    assert by_table.to_pylist() == [{"id": "k1", "ts": 7}]


def test_a_bad_value_is_one_error_naming_the_file(tmp_path: Path) -> None:
    (tmp_path / "bad.csv").write_text("id,ts\na,1\nb,two\n")
    with pytest.raises(InvalidInputError, match=r"could not read .*bad.csv as csv: .*'two'"):
        read(
            [str(tmp_path / "bad.csv")],
            "csv",
            None,
            pa.schema([("id", pa.string()), ("ts", pa.int64())]),
        )


def test_parquet_takes_spark_types(tmp_path: Path) -> None:
    zoned = pa.array([1_000_000], pa.timestamp("ns", tz="Europe/Paris"))
    rows = pa.table({"id": pa.array(["k"], pa.large_string()), "t": zoned})
    pq.write_table(rows, tmp_path / "ns.parquet")
    with pytest.raises(NeedsSpark, match="a timestamp in nanoseconds"):  # Spark refuses them
        read([str(tmp_path / "ns.parquet")], "parquet", None, None)
    pq.write_table(rows, tmp_path / "p.parquet", coerce_timestamps="us")
    t = read([str(tmp_path / "p.parquet")], "parquet", None, None)
    assert t.schema == pa.schema([("id", pa.string()), ("t", pa.timestamp("us", tz="UTC"))])
    assert t.column("t")[0].value == 1_000  # microseconds: the same instant


def test_ddl_schemas_and_their_errors() -> None:
    assert ddl_schema("id string, `ts` BIGINT, d decimal(10, 2), day date, f float") == pa.schema(
        [
            ("id", pa.string()),
            ("ts", pa.int64()),
            ("d", pa.decimal128(10, 2)),
            ("day", pa.date32()),
            ("f", pa.float32()),
        ]
    )
    with pytest.raises(InvalidInputError, match="is not a Spark DDL schema .*'id'"):
        ddl_schema("id, ts bigint")


def test_inputs_are_the_visible_files_of_folders(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    for name in ("b.csv", "a.csv", "_SUCCESS", ".a.csv.crc"):
        (tmp_path / "in" / name).write_text("id\nk\n")
    files = input_files([str(tmp_path / "in")])
    assert [Path(f).name for f in files] == ["a.csv", "b.csv"]
    assert input_bytes(files) == 10


def test_a_new_tables_text_ordering_is_refused_with_a_schema_that_reads_it() -> None:
    columns = [("id", "string"), ("ts", "string")]
    with pytest.raises(ConfigError, match="--schema 'id string, ts bigint'"):
        refuse_text_ordering(columns, "ts", "csv", None)
    refuse_text_ordering(columns, "ts", "csv", "id string, ts string")  # said so: taken
    refuse_text_ordering(columns, "ts", "json", None)  # JSON text is text on purpose


def test_a_schema_picks_parquet_columns_by_name_and_a_missing_one_is_null(tmp_path: Path) -> None:
    pq.write_table(pa.table({"ts": [7], "id": ["k1"], "extra": [1]}), tmp_path / "p.parquet")
    t = read([str(tmp_path / "p.parquet")], "parquet", "id string, ts bigint, v double", None)
    assert t.schema == pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.float64())])
    assert t.to_pylist() == [{"id": "k1", "ts": 7, "v": None}]
    with pytest.raises(NeedsSpark, match=r"reads Parquet column 'ts' \(int64\) as int32"):
        read([str(tmp_path / "p.parquet")], "parquet", "id string, ts int", None)
