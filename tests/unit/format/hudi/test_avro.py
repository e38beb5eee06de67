"""Avro: the table's schema as Hudi carries it, and the binary encoding of delete blocks."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from dynbucket.base.errors import SchemaMismatchError
from dynbucket.format.hudi.avro import Reader, Writer, schema_json


def test_schema_with_meta_fields_and_logical_types() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            ("n", pa.int32()),
            ("ts", pa.timestamp("us", "UTC")),
            ("d", pa.date32()),
            ("price", pa.decimal128(10, 2)),
            ("tags", pa.list_(pa.string())),
        ]
    )
    doc = json.loads(schema_json(schema, "trips", ("_hoodie_commit_time",)))
    assert doc["name"] == "trips_record" and doc["namespace"] == "hoodie.trips"
    fields = {f["name"]: f["type"] for f in doc["fields"]}
    assert fields["_hoodie_commit_time"] == ["null", "string"]
    assert fields["id"] == "string"  # not nullable: no union
    assert fields["n"] == ["null", "int"]
    assert fields["ts"] == ["null", {"type": "long", "logicalType": "timestamp-micros"}]
    assert fields["d"] == ["null", {"type": "int", "logicalType": "date"}]
    assert fields["price"][1]["logicalType"] == "decimal"
    assert fields["tags"] == ["null", {"type": "array", "items": ["null", "string"]}]


def test_a_type_without_avro_form_names_the_field() -> None:
    with pytest.raises(SchemaMismatchError, match="field 'x' has type duration"):
        schema_json(pa.schema([("x", pa.duration("s"))]), "t")


@pytest.mark.parametrize("value", [0, 1, -1, 63, -64, 64, 2**31, -(2**63), 2**63 - 1])
def test_longs_are_zigzag_varints(value: int) -> None:
    w = Writer()
    w.long(value)
    assert Reader(w.getvalue()).long() == value
    if value == -64:
        assert w.getvalue() == b"\x7f"  # zig-zag: -64 -> 127, one byte


def test_strings_arrays_and_truncation() -> None:
    w = Writer()
    w.array(["a", "é", ""], w.string)
    r = Reader(w.getvalue())
    assert list(r.array(r.string)) == ["a", "é", ""]
    cut = Reader(w.getvalue()[:3])
    with pytest.raises(ValueError, match="ends"):
        list(cut.array(cut.string))
