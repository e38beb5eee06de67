"""Both write paths take and refuse the same input: one table of good and bad records, run
through an in-process write (pyarrow) and a Spark write of the same rows and types."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.actors.errors import (
    DynBucketError,
    InvalidPartitionValueError,
    NullKeyError,
    SchemaMismatchError,
)
from dynbucket.pipeline.runtime import Runtime
from dynbucket.pipeline.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64()),
                    ("w", pa.float64())])  # fmt: skip
GOOD = {"id": (pa.string(), ["a", "b"]), "day": (pa.string(), ["d1", "d2"]),
        "v": (pa.int64(), [1, 2]), "w": (pa.float64(), [0.5, 1.5])}  # fmt: skip

#: (case, fields changed from GOOD (None drops a field), expected error or None, message)
CASES: list[tuple[str, dict[str, Any], type[DynBucketError] | None, str]] = [
    ("same types", {}, None, ""),
    ("int32 widens to int64", {"v": (pa.int32(), [1, 2])}, None, ""),
    ("float32 widens to float64", {"w": (pa.float32(), [0.5, 1.5])}, None, ""),
    ("a string of digits is not an int", {"v": (pa.string(), ["5", "6"])}, SchemaMismatchError,
     "field 'v' has type string; the table has int64"),
    ("an int is not a string", {"id": (pa.int64(), [42, 43])}, SchemaMismatchError,
     "field 'id' has type int64; the table has string"),
    ("a double does not narrow to int", {"v": (pa.float64(), [5.0, 6.0])}, SchemaMismatchError,
     "field 'v' has type double"),
    ("a boolean is not an int", {"v": (pa.bool_(), [True, False])}, SchemaMismatchError,
     "field 'v' has type bool"),
    ("an extra field", {"x": (pa.int64(), [1, 2])}, SchemaMismatchError,
     r"\['x'\] are not in the table schema"),
    ("a missing field", {"w": None}, SchemaMismatchError, r"\['w'\] of the table schema"),
    ("a null key", {"id": (pa.string(), ["a", None])}, NullKeyError,
     "record key field 'id' is null in 1 row"),
    ("a partition value leaving the table", {"day": (pa.string(), ["d1", "../x"])},
     InvalidPartitionValueError, "'../x'"),
]  # fmt: skip


def _input(changes: dict[str, Any]) -> pa.Table:
    fields = {**GOOD, **changes}
    return pa.table(
        {name: pa.array(values, type_) for name, spec in fields.items() if spec
         for type_, values in [spec]}
    )  # fmt: skip


def _outcome(t: Table, data: Any) -> tuple[type[BaseException] | None, str, list[Any]]:
    try:
        t.upsert(data, assigner_slots=1)
    except DynBucketError as e:
        return type(e), str(e), []
    return None, "", sorted(t.to_arrow(meta_columns=False).to_pylist(), key=str)


@pytest.mark.parametrize(("case", "changes", "error", "message"), CASES,
                         ids=[c[0] for c in CASES])  # fmt: skip
def test_both_paths_take_and_refuse_the_same_input(
    spark: Any, runtime: Runtime, tmp_path: Path, case: str, changes: dict[str, Any],
    error: type[DynBucketError] | None, message: str,
) -> None:  # fmt: skip
    from pyspark.sql.pandas.types import from_arrow_schema

    data = _input(changes)
    local = Table.create(str(tmp_path / "local"), SCHEMA, "id", "day")
    remote = Table.create(str(tmp_path / "spark"), SCHEMA, "id", "day", runtime=runtime)
    df = spark.createDataFrame(data.to_pylist(), from_arrow_schema(data.schema))
    with remote:
        by_arrow, by_spark = _outcome(local, data), _outcome(remote, df)
    assert by_arrow[0] is error, by_arrow
    assert by_spark[0] is error, by_spark
    if error is None:
        assert by_arrow[2] == by_spark[2] and len(by_arrow[2]) == 2
        return
    assert re.search(message, by_arrow[1]) and re.search(message, by_spark[1])
    if error is SchemaMismatchError:  # checked on the driver by the same function
        assert by_arrow[1] == by_spark[1]
    for t in (local, remote):  # nothing written
        assert t.history() == []
