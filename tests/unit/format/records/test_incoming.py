"""The one rule for input types: a field must be the table's type or widen to it without loss."""

from __future__ import annotations

import pyarrow as pa
import pytest

from dynbucket.base.columns import DELETE, IS_DELETE, OP, UPSERT
from dynbucket.base.errors import ConfigError, InvalidInputError, SchemaMismatchError
from dynbucket.format.records.incoming import conform, dedupe, fit_types, prepare, widens
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.spec import TableSpec


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
SPEC = TableSpec(SCHEMA, ("id",))


def test_values_are_never_cast_by_value() -> None:
    with pytest.raises(SchemaMismatchError, match="field 'v' has type string; the table has int64"):
        conform(pa.table({"id": ["a"], "v": ["5"], "w": [1.0]}), SPEC)
    with pytest.raises(SchemaMismatchError, match="field 'id' has type int64"):
        conform(pa.table({"id": [42], "v": [5], "w": [1.0]}), SPEC)


def test_widening_fields_are_cast_and_absent_ones_are_null() -> None:
    data = pa.table(
        {"w": pa.array([1.5], pa.float32()), "id": ["a"], "v": pa.array([7], pa.int8())}
    )
    out = conform(data, SPEC)
    assert out.schema == SCHEMA and out.to_pylist() == [{"id": "a", "v": 7, "w": 1.5}]
    assert conform(pa.table({"id": ["a"]}), SPEC, required=["id"]).column("v").null_count == 1
    assert fit_types({"id": pa.string(), "v": pa.int32()}, SCHEMA, ["id"]) == ["v"]


# --- deletes marked in the records ---------------------------------------------------------

ORDERED = TableSpec(
    pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.string(), False)]),
    ("id",),
    ordering_field="ts",
    options=TableOptions(delete_field="op", delete_marker="d"),
)


def test_hudi_is_deleted_and_the_tables_delete_field_mark_deletes_and_are_not_stored() -> None:
    data = pa.table(
        {
            "id": ["a", "b", "c", "d"],
            "ts": [1, 2, 3, 4],
            "v": ["x", None, None, "y"],
            "_hoodie_is_deleted": [False, True, None, False],
            "op": ["u", "u", "d", None],
        }
    )
    rows = prepare(ORDERED, data)
    assert rows.column(OP).to_pylist() == [UPSERT, DELETE, DELETE, UPSERT]
    assert "_hoodie_is_deleted" not in rows.column_names and "op" not in rows.column_names
    assert IS_DELETE not in rows.column_names


def test_a_delete_needs_no_value_but_its_ordering_value() -> None:
    data = pa.table({"id": ["a"], "ts": pa.array([None], pa.int64()), "v": [None]})
    data = data.append_column("_hoodie_is_deleted", pa.array([True]))
    with pytest.raises(InvalidInputError, match="ordering field 'ts' is null"):
        prepare(ORDERED, data)
    # a non-null field may be null in a delete, never in an upsert
    ok = pa.table({"id": ["a", "b"], "ts": [1, 1], "v": [None, "x"], "op": ["d", "c"]})
    assert prepare(ORDERED, ok).column(OP).to_pylist() == [DELETE, UPSERT]
    with pytest.raises(InvalidInputError, match="field 'v'.* is null in 1 row"):
        prepare(ORDERED, ok.set_column(3, "op", pa.array(["c", "c"])))


def test_a_marker_that_is_not_boolean_and_deletes_in_an_insert_are_refused() -> None:
    data = pa.table({"id": ["a"], "ts": [1], "v": ["x"], "_hoodie_is_deleted": ["yes"]})
    with pytest.raises(SchemaMismatchError, match="'_hoodie_is_deleted' has type string.*bool"):
        prepare(ORDERED, data)
    data = pa.table({"id": ["a"], "ts": [1], "v": ["x"], "op": ["d"]})
    with pytest.raises(InvalidInputError, match="insert: 1 record.*marked as deletes.*upsert"):
        prepare(ORDERED, data, insert=True)
    with pytest.raises(ConfigError, match="hoodie.payload.delete.marker=None: give both"):
        TableOptions(delete_field="op")


def test_in_a_batch_the_largest_ordering_value_wins_deletes_alike() -> None:
    data = pa.table(
        {
            "id": ["a", "a", "b", "b", "c", "c"],
            "ts": [2, 1, 1, 2, 3, 3],
            "v": [None, "a1", None, "b2", "c1", None],
            "op": ["d", "u", "d", "u", "u", "d"],
        }
    )
    rows = dedupe(ORDERED, prepare(ORDERED, data), deletes=False)
    won = {r["id"]: (r["ts"], r[OP]) for r in rows.select(["id", "ts", OP]).to_pylist()}
    # a: the newer delete; b: the newer upsert; c: a tie goes to the last record
    assert won == {"a": (2, DELETE), "b": (2, UPSERT), "c": (3, DELETE)}


def test_an_upsert_missing_fields_names_the_partial_upsert_of_both_the_api_and_the_command() -> (
    None
):
    schema = pa.schema([("id", pa.string()), ("v", pa.int64()), ("w", pa.string())])
    with pytest.raises(SchemaMismatchError) as e:
        fit_types({"id": pa.string()}, schema)
    assert "['v', 'w']" in str(e.value)
    assert "upsert(..., partial=True)" in str(e.value) and "ingest --partial" in str(e.value)
    assert str(e.value).endswith("Nothing was written.")
