"""``dynbucket ingest``'s checks before Ray and Spark start: the inputs and the table's
definition (pyarrow only; what Spark reads is tests/integration/test_cli.py's)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.base.errors import ConfigError, InvalidInputError, NotATableError
from dynbucket.ingest import Definition, input_format, table_definition
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
    ).spec
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
