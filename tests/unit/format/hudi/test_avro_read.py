"""Avro that Hudi writes, read as Arrow: schemas (nullable unions either way round, logical
types, nested records, arrays, maps) and the records of Avro data blocks."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from dynbucket.format.hudi import log_file
from dynbucket.format.hudi.avro import Writer
from dynbucket.format.hudi.avro_read import arrow_schema, read_records

SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "id", "type": ["int", "null"]},
            {"name": "name", "type": ["null", "string"]},
            {
                "name": "price",
                "type": [
                    {
                        "type": "fixed",
                        "name": "fixed",
                        "size": 5,
                        "logicalType": "decimal",
                        "precision": 10,
                        "scale": 2,
                    },
                    "null",
                ],
            },
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "tags", "type": {"type": "array", "items": ["string", "null"]}},
            {"name": "attrs", "type": {"type": "map", "values": "double"}},
            {
                "name": "inner",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "inner",
                        "fields": [
                            {"name": "ok", "type": "boolean"},
                            {
                                "name": "kind",
                                "type": {"type": "enum", "name": "kind", "symbols": ["A", "B"]},
                            },
                        ],
                    },
                ],
            },
        ],
    }
)


def test_a_schema_reads_as_the_arrow_types_spark_writes() -> None:
    schema = arrow_schema(SCHEMA)
    assert schema.field("id").type == pa.int32() and schema.field("id").nullable
    assert schema.field("price").type == pa.decimal128(10, 2)
    assert schema.field("day").type == pa.date32() and not schema.field("day").nullable
    assert schema.field("at").type == pa.timestamp("us", "UTC")
    assert schema.field("tags").type == pa.list_(pa.field("element", pa.string()))
    assert schema.field("attrs").type == pa.map_(
        pa.string(), pa.field("value", pa.float64(), False)
    )
    assert schema.field("inner").type.field("kind").type == pa.string()
    with pytest.raises(ValueError, match="not an Avro record schema"):
        arrow_schema('"string"')


def _record(price_cents: int | None, with_inner: bool) -> bytes:
    w = Writer()
    w.long(0)  # id: the int branch
    w.long(7)
    w.long(1)  # name: the string branch
    w.string("anna")
    if price_cents is None:
        w.long(1)  # the null branch
    else:
        w.long(0)
        w.out.write(price_cents.to_bytes(5, "big", signed=True))
    w.long(19448)  # 2023-04-01
    w.long(1_680_350_460_000_000)
    w.array(["x", None], lambda v: (w.long(1), None) if v is None else (w.long(0), w.string(v)))
    w.long(1)  # one map entry
    w.string("k")
    w.double(2.5)
    w.long(0)
    if with_inner:
        w.long(1)
        w.out.write(b"\x01")
        w.long(1)  # symbol B
    else:
        w.long(0)
    return w.getvalue()


def test_records_of_an_avro_data_block_decode_by_the_block_schema() -> None:
    block = log_file.avro_data_block([_record(-12345, True), _record(None, False)], "1", SCHEMA)
    (read,) = log_file.read_blocks(block)
    rows = read_records(read.header[log_file.SCHEMA], log_file.avro_records(read))
    first, second = rows.to_pylist()
    assert first["id"] == 7 and first["name"] == "anna"
    assert first["price"] == decimal.Decimal("-123.45") and second["price"] is None
    assert first["day"] == dt.date(2023, 4, 1)
    assert first["at"] == dt.datetime(2023, 4, 1, 12, 1, tzinfo=dt.UTC)
    assert first["tags"] == ["x", None] and first["attrs"] == [("k", 2.5)]
    assert first["inner"] == {"ok": True, "kind": "B"} and second["inner"] is None
    with pytest.raises(ValueError, match="decoded in"):
        read_records(SCHEMA, [_record(1, True) + b"\x00"])
