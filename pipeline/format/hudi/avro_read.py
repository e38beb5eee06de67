"""Reading Avro that Apache Hudi wrote: a table's Avro schema as Arrow, and Avro data blocks
(what Hudi's Spark writer puts in merge-on-read logs by default) as Arrow tables.

dynbucket itself writes Parquet data blocks (``avro.py`` only encodes what its own files
need); a table Hudi wrote holds Avro ones, whose records are decoded here by the schema the
block carries. A decoder is built once per schema (a closure per node of the schema), so a
block of many records costs one call per field, not a walk of the schema per value.
"""

from __future__ import annotations

import decimal
import json
import struct
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import pyarrow as pa

from dynbucket.base.errors import FormatError
from dynbucket.format.hudi.avro import read_long

Decoder = Callable[[memoryview, int], tuple[Any, int]]


# --- schemas ------------------------------------------------------------------------------


def arrow_schema(schema_json: str) -> pa.Schema:
    """The Arrow schema of records of the Avro record schema ``schema_json``, in the types
    Spark writes the same fields to Parquet as (so that rows of Avro and Parquet blocks of
    one table concatenate)."""
    doc = json.loads(schema_json)
    if not isinstance(doc, dict) or doc.get("type") != "record":
        raise FormatError(f"not an Avro record schema: {schema_json[:80]!r}")
    return pa.schema([_arrow_field(f) for f in doc["fields"]])


def _arrow_field(f: dict[str, Any]) -> pa.Field:
    t, nullable = _unwrap(f["type"])
    return pa.field(f["name"], _arrow_type(t), nullable)


def _unwrap(t: Any) -> tuple[Any, bool]:
    """A nullable union's other branch, and whether it was nullable."""
    if isinstance(t, list):
        others = [b for b in t if b != "null"]
        if len(others) != 1:
            raise FormatError(f"Avro union {t} has no Arrow form (only [null, T] unions do)")
        return others[0], len(others) < len(t)
    return t, False


def _arrow_type(t: Any) -> pa.DataType:
    if isinstance(t, str):
        return _PRIMITIVE[t]
    logical = t.get("logicalType")
    kind = t["type"]
    if logical == "decimal":
        return pa.decimal128(int(t["precision"]), int(t.get("scale", 0)))
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-micros", "local-timestamp-micros"):
        return pa.timestamp("us", "UTC" if logical == "timestamp-micros" else None)
    if logical in ("timestamp-millis", "local-timestamp-millis"):
        return pa.timestamp("ms", "UTC" if logical == "timestamp-millis" else None)
    if kind == "record":
        return pa.struct([_arrow_field(f) for f in t["fields"]])
    if kind == "array":
        item, nullable = _unwrap(t["items"])
        return pa.list_(pa.field("element", _arrow_type(item), nullable))
    if kind == "map":
        value, nullable = _unwrap(t["values"])
        return pa.map_(pa.string(), pa.field("value", _arrow_type(value), nullable))
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary(int(t["size"]))
    if isinstance(kind, (str, dict, list)):
        return _arrow_type(kind)
    raise FormatError(f"Avro type {t} has no Arrow form")


_PRIMITIVE = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


# --- records ------------------------------------------------------------------------------


def read_records(schema_json: str, records: Sequence[bytes]) -> pa.Table:
    """Avro-encoded ``records`` of the record schema ``schema_json`` as an Arrow table.

    Raises:
        FormatError: a record does not decode by the schema.
    """
    decode, schema = _compiled(schema_json)
    rows = []
    for raw in records:
        value, pos = decode(memoryview(raw), 0)
        if pos != len(raw):
            raise FormatError(f"Avro record of {len(raw)} bytes decoded in {pos}")
        rows.append(value)
    return pa.Table.from_pylist(rows, schema=schema)


@lru_cache(maxsize=64)
def _compiled(schema_json: str) -> tuple[Decoder, pa.Schema]:
    return decoder(json.loads(schema_json)), arrow_schema(schema_json)


def decoder(t: Any, maps_as_dicts: bool = False) -> Decoder:
    """A decoder of values of the Avro type ``t``: records as dicts, arrays as lists, maps
    as (key, value) pairs (as Arrow takes them) or, ``maps_as_dicts``, as dicts."""
    return _decoder(t, {}, maps_as_dicts)


def _decoder(t: Any, named: dict[str, Any], dicts: bool) -> Decoder:
    """A decoder of values of Avro type ``t`` (``named``: record and fixed types seen so
    far, by name, for schemas that refer back to them)."""
    if isinstance(t, list):
        branches = [_decoder(b, named, dicts) for b in t]

        def union(data: memoryview, pos: int) -> tuple[Any, int]:
            branch, pos = read_long(data, pos)
            return branches[branch](data, pos)

        return union
    if isinstance(t, str):
        if t in _PRIMITIVE_DECODERS:
            return _PRIMITIVE_DECODERS[t]
        return _decoder(named[t], named, dicts)
    kind, logical = t["type"], t.get("logicalType")
    if "name" in t:
        named[t["name"]] = t
        if "namespace" in t:
            named[f"{t['namespace']}.{t['name']}"] = t
    if logical == "decimal":
        scale = int(t.get("scale", 0))
        raw = _decoder({k: v for k, v in t.items() if k != "logicalType"}, named, dicts)

        def dec(data: memoryview, pos: int) -> tuple[Any, int]:
            b, pos = raw(data, pos)
            return decimal.Decimal(int.from_bytes(b, "big", signed=True)).scaleb(-scale), pos

        return dec
    if kind == "record":
        fields = [(f["name"], _decoder(f["type"], named, dicts)) for f in t["fields"]]

        def record(data: memoryview, pos: int) -> tuple[Any, int]:
            out = {}
            for name, field in fields:
                out[name], pos = field(data, pos)
            return out, pos

        return record
    if kind in ("array", "map"):
        item = _decoder(t["items"] if kind == "array" else t["values"], named, dicts)
        blocks = _blocks(item, kind == "map")
        if kind != "map" or not dicts:
            return blocks

        def as_dict(data: memoryview, pos: int) -> tuple[Any, int]:
            pairs, pos = blocks(data, pos)
            return dict(pairs), pos

        return as_dict
    if kind == "enum":
        symbols = t["symbols"]

        def enum(data: memoryview, pos: int) -> tuple[Any, int]:
            i, pos = read_long(data, pos)
            return symbols[i], pos

        return enum
    if kind == "fixed":
        size = int(t["size"])
        return lambda data, pos: (bytes(data[pos : pos + size]), pos + size)
    return _decoder(kind, named, dicts)


def _blocks(item: Decoder, keyed: bool) -> Decoder:
    """An array's or a map's decoder: blocks of items until an empty one."""

    def items(data: memoryview, pos: int) -> tuple[Any, int]:
        out: list[Any] = []
        while True:
            count, pos = read_long(data, pos)
            if count == 0:
                return out, pos
            if count < 0:  # a block with its byte size
                count = -count
                _, pos = read_long(data, pos)
            for _ in range(count):
                if keyed:
                    key, pos = _string(data, pos)
                    value, pos = item(data, pos)
                    out.append((key, value))
                else:
                    value, pos = item(data, pos)
                    out.append(value)

    return items


def _bytes(data: memoryview, pos: int) -> tuple[bytes, int]:
    size, pos = read_long(data, pos)
    if pos + size > len(data):
        raise FormatError(f"Avro data ends at byte {len(data)}, needed {pos + size}")
    return bytes(data[pos : pos + size]), pos + size


def _string(data: memoryview, pos: int) -> tuple[str, int]:
    b, pos = _bytes(data, pos)
    return b.decode("utf-8"), pos


def _struct(fmt: str, width: int) -> Decoder:
    def read(data: memoryview, pos: int) -> tuple[Any, int]:
        return struct.unpack_from(fmt, data, pos)[0], pos + width

    return read


_PRIMITIVE_DECODERS: dict[str, Decoder] = {
    "null": lambda data, pos: (None, pos),
    "boolean": lambda data, pos: (data[pos] != 0, pos + 1),
    "int": read_long,
    "long": read_long,
    "float": _struct("<f", 4),
    "double": _struct("<d", 8),
    "bytes": _bytes,
    "string": _string,
}
