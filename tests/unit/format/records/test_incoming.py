"""The one rule for input types: a field must be the table's type or widen to it without loss."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dynbucket.base.errors import SchemaMismatchError
from dynbucket.format.records.incoming import conform, fit_types, widens


@pytest.mark.parametrize(
    ("have", "want", "ok"),
    [
        (pa.int32(), pa.int64(), True),
        (pa.int64(), pa.int32(), False),
        (pa.uint32(), pa.int64(), True),
        (pa.int32(), pa.uint64(), False),
        (pa.float32(), pa.float64(), True),
        (pa.int64(), pa.float64(), False),
        (pa.string(), pa.int64(), False),
        (pa.int64(), pa.string(), False),
        (pa.bool_(), pa.string(), False),
        (pa.large_string(), pa.string(), True),
        (pa.dictionary(pa.int32(), pa.string()), pa.string(), True),
        (pa.timestamp("ms"), pa.timestamp("us", "UTC"), True),
        (pa.timestamp("ns"), pa.timestamp("us"), False),
        (pa.null(), pa.int64(), True),
        (pa.date32(), pa.timestamp("us"), False),
    ],
)
def test_widening(have: pa.DataType, want: pa.DataType, ok: bool) -> None:
    assert widens(have, want) is ok


SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64()), ("w", pa.float64())])


def test_values_are_never_cast_by_value() -> None:
    with pytest.raises(SchemaMismatchError, match="field 'v' has type string; the table has int64"):
        conform(pa.table({"id": ["a"], "v": ["5"], "w": [1.0]}), SCHEMA)
    with pytest.raises(SchemaMismatchError, match="field 'id' has type int64"):
        conform(pa.table({"id": [42], "v": [5], "w": [1.0]}), SCHEMA)


def test_widening_fields_are_cast_and_absent_ones_are_null() -> None:
    data = pa.table(
        {"w": pa.array([1.5], pa.float32()), "id": ["a"], "v": pa.array([7], pa.int8())}
    )
    out = conform(data, SCHEMA)
    assert out.schema == SCHEMA and out.to_pylist() == [{"id": "a", "v": 7, "w": 1.5}]
    assert conform(pa.table({"id": ["a"]}), SCHEMA, required=["id"]).column("v").null_count == 1
    assert fit_types({"id": pa.string(), "v": pa.int32()}, SCHEMA, ["id"]) == ["v"]
