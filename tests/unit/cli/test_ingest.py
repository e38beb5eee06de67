"""``dynbucket ingest``'s checks before Ray and Spark start: the inputs and the table's
definition (pyarrow only; what Spark reads is tests/integration/test_cli.py's)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.base.errors import (
    ConfigError,
    InvalidInputError,
    NotATableError,
    SchemaMismatchError,
)
from dynbucket.cli import ingest_local
from dynbucket.cli.ingest import (
    Definition,
    check_header_option,
    csv_header,
    input_format,
    table_definition,
)
from dynbucket.options import TableOptions
from dynbucket.table import Table


@pytest.fixture()
def inputs(tmp_path: Path) -> Path:
    (tmp_path / "a.csv").write_text("id,v\n1,2\n")
    (tmp_path / "b.CSV.gz").write_bytes(b"\x1f\x8b")
    (tmp_path / "c.jsonl").write_text('{"id": 1}\n')
    pq.write_table(pa.table({"id": [1]}), tmp_path / "d.parquet")
    (tmp_path / "fake.parquet").write_text("id,v\n1,2\n")
    (tmp_path / "notes.txt").write_text("x")
    (tmp_path / "day=1").mkdir()
    pq.write_table(pa.table({"id": [1]}), tmp_path / "day=1" / "part-0.parquet")
    (tmp_path / "day=1" / "_SUCCESS").write_text("")
    return tmp_path


@pytest.mark.parametrize(
    ("files", "given", "fmt"),
    [
        (["a.csv"], None, "csv"),
        (["a.csv", "b.CSV.gz"], None, "csv"),
        (["c.jsonl"], None, "json"),
        (["d.parquet", "day=1"], None, "parquet"),
        (["notes.txt"], "csv", "csv"),
    ],
)
def test_the_format_is_the_given_one_or_the_one_the_names_say(
    inputs: Path, files: list[str], given: str | None, fmt: str
) -> None:
    assert input_format([str(inputs / f) for f in files], given) == fmt


@pytest.mark.parametrize(
    ("files", "given", "message"),
    [
        (["missing.csv"], None, r"input '.*missing.csv' does not exist"),
        (
            ["notes.txt"],
            None,
            r"cannot tell the format of '.*notes.txt' from its name: give "
            r"--format \(parquet, csv, json\)",
        ),
        (["a.csv", "d.parquet"], None, r"several formats \(csv, parquet\)"),
        (
            ["a.csv"],
            "parquet",
            r"'.*a.csv' is not a Parquet file \(its name says csv: give "
            "--format csv",
        ),
        (["fake.parquet"], None, r"'.*fake.parquet' is not a Parquet file"),
    ],
)
def test_inputs_that_cannot_be_read_are_refused_before_any_start(
    inputs: Path, files: list[str], given: str | None, message: str
) -> None:
    with pytest.raises(InvalidInputError, match=message):
        input_format([str(inputs / f) for f in files], given)


def test_the_command_line_must_agree_with_an_existing_table(tmp_path: Path) -> None:
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
    uri = str(tmp_path / "t")
    with pytest.raises(NotATableError, match="give --key"):
        table_definition(uri, Definition())
    assert table_definition(uri, Definition(key=("id",))) is None  # to be created
    spec = Table.create(
        uri, schema, "id", "day", "ts", options=TableOptions(table_type="COPY_ON_WRITE")
    )._spec
    assert table_definition(uri, Definition()) == spec
    assert table_definition(uri, Definition(("id",), ("day",), "ts", "COPY_ON_WRITE")) == spec
    for given, message in [
        (Definition(key=("day",)), "--key day disagrees with the table at .*, whose value is id"),
        (Definition(partition_by=()), "--partition-by (none) disagrees .* whose value is day"),
        (Definition(ordering="day"), "--ordering day disagrees .* whose value is ts"),
        (Definition(table_type="MERGE_ON_READ"), "--table-type MERGE_ON_READ disagrees"),
    ]:
        with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
            table_definition(uri, given)


ORDERS = pa.schema(
    [("order_id", pa.string()), ("ts", pa.int64()), ("day", pa.string()), ("amount", pa.float64())]
)


def test_csv_columns_are_taken_by_their_header_names(tmp_path: Path) -> None:
    """A header in another order than the table's fields: each value lands in the column its
    header names (it was taken by position: amount 3000.0 read into ts)."""
    (tmp_path / "a.csv").write_text("order_id,day,ts,amount\no1,2024-01-02,14,3000.0\n")
    (tmp_path / "b.csv").write_text("order_id,day,ts,amount\no2,2024-01-03,15,1.5\n")
    files = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    data = ingest_local.read(files, "csv", None, ORDERS)
    rows = {r["order_id"]: r for r in data.to_pylist()}
    assert rows["o1"] == {"order_id": "o1", "day": "2024-01-02", "ts": 14, "amount": 3000.0}
    assert rows["o2"]["ts"] == 15 and rows["o2"]["day"] == "2024-01-03"
    # The same through the in-process writer: the table's fields in the table's order.
    t = Table.create(str(tmp_path / "t"), ORDERS, "order_id", "day", "ts")
    t.upsert(data)
    assert t.to_arrow(meta_columns=False).sort_by("order_id").to_pylist()[0] == rows["o1"]


@pytest.mark.parametrize(
    ("text", "schema", "message"),
    [
        # A header naming a column the table lacks: the Python API's words, and the fix.
        (
            "order_id,day,ts,amount,coupon\no1,d,1,2.0,x\n",
            None,
            r"field\(s\) \['coupon'\] of the CSV header are not in the table schema",
        ),
        ("order_id,day,day,amount\no1,d,d,2.0\n", None, r"names column\(s\) \['day'\] more"),
        (
            "a,b\no1,1\n",
            "order_id string, ts bigint",
            r"field\(s\) \['a', 'b'\] of the CSV header are not in --schema",
        ),
    ],
)
def test_a_csv_header_the_schema_does_not_explain_is_refused(
    tmp_path: Path, text: str, schema: str | None, message: str
) -> None:
    (tmp_path / "a.csv").write_text(text)
    with pytest.raises(SchemaMismatchError, match=message):
        ingest_local.read([str(tmp_path / "a.csv")], "csv", schema, ORDERS)


def test_csv_files_of_two_headers_are_refused_on_both_paths(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("order_id,day,ts,amount\no1,d,1,2.0\n")
    (tmp_path / "b.csv").write_text("order_id,ts,day,amount\no2,1,d,2.0\n")
    files = [str(tmp_path / "a.csv"), str(tmp_path / "b.csv")]
    with pytest.raises(InvalidInputError, match="headers differ"):
        ingest_local.read(files, "csv", None, ORDERS)
    with pytest.raises(InvalidInputError, match="headers differ"):
        csv_header(files)  # the Spark path's check, before Spark reads
    assert csv_header(files[:1]) == ["order_id", "day", "ts", "amount"]


def test_no_header_takes_columns_by_position_and_needs_a_schema(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("o1,7,d\n")
    data = ingest_local.read(
        [str(tmp_path / "a.csv")],
        "csv",
        "order_id string, ts bigint, day string",
        ORDERS,
        header=False,
    )
    assert data.to_pylist() == [{"order_id": "o1", "ts": 7, "day": "d"}]
    with pytest.raises(ConfigError, match="--no-header .* give --schema"):
        check_header_option("csv", None, header=False)
    with pytest.raises(ConfigError, match="--no-header is for CSV files"):
        check_header_option("json", "id string", header=False)


def test_a_change_file_creates_a_table_without_the_marker_and_applies_its_deletes(
    tmp_path: Path,
) -> None:
    from dynbucket.cli import main

    first = pa.table({"id": ["a", "b"], "ts": [1, 1], "_hoodie_is_deleted": [False, False]})
    second = pa.table({"id": ["a", "c"], "ts": [2, 2], "_hoodie_is_deleted": [True, False]})
    pq.write_table(first, tmp_path / "1.parquet")
    pq.write_table(second, tmp_path / "2.parquet")
    uri = str(tmp_path / "t")
    assert (
        main(["ingest", uri, str(tmp_path / "1.parquet"), "--key", "id", "--ordering", "ts"]) == 0
    )
    assert main(["ingest", uri, str(tmp_path / "2.parquet")]) == 0
    t = Table.open(uri)
    assert t.schema.names == ["id", "ts"]  # the marker is not a column
    assert sorted(t.to_arrow().column("id").to_pylist()) == ["b", "c"]


def test_a_delete_says_how_many_keys_it_did_not_find_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A key is unique within its partition: a delete naming another partition finds
    nothing, and ``ingest`` says so (with a global index the key alone finds its row)."""
    from dynbucket.cli import main

    rows = pa.table({"id": ["a", "b"], "day": ["d1", "d1"], "ts": [1, 1]})
    pq.write_table(rows, tmp_path / "rows.parquet")
    pq.write_table(pa.table({"id": ["a"], "day": ["d2"]}), tmp_path / "gone.parquet")
    uri = str(tmp_path / "t")
    # The options first, the files after them: an option takes one value.
    ingest = ["--verbose", "ingest", "--key", "id", "--partition-by", "day", "--ordering", "ts"]
    assert main([*ingest, uri, str(tmp_path / "rows.parquet")]) == 0
    capsys.readouterr()
    delete = ["--verbose", "ingest", uri, str(tmp_path / "gone.parquet"), "--operation", "delete"]
    assert main(delete) == 0
    out = capsys.readouterr().out
    assert "1 key(s) to delete were not found in the partition the records name" in out
    assert sorted(Table.open(uri).to_arrow().column("id").to_pylist()) == ["a", "b"]


def test_a_table_made_from_a_csv_of_small_numbers_takes_epoch_milliseconds_later(
    tmp_path: Path,
) -> None:
    """Inferred types widen on create (Spark users' id and ordering columns are longs): a
    CSV of small numbers infers ``int``, a later file of epoch milliseconds must fit."""
    from dynbucket.cli import main

    (tmp_path / "1.csv").write_text("id,ts,n\na,1,2\nb,2,3\n")
    (tmp_path / "2.csv").write_text("id,ts,n\na,1764201600000,4\n")
    uri = str(tmp_path / "t")
    assert main(["ingest", "--key", "id", "--ordering", "ts", uri, str(tmp_path / "1.csv")]) == 0
    assert Table.open(uri).schema == pa.schema(
        [("id", pa.string()), ("ts", pa.int64()), ("n", pa.int64())]
    )
    assert main(["ingest", uri, str(tmp_path / "2.csv")]) == 0
    rows = {r["id"]: r["ts"] for r in Table.open(uri).to_arrow().to_pylist()}
    assert rows == {"a": 1764201600000, "b": 2}
