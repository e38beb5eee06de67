"""Avro, as much as Hudi's files need: schemas from Arrow, and the binary encoding.

Hudi keeps the table's schema as Avro JSON (``hoodie.table.create.schema``, a commit's
``extraMetadata.schema``, a log block's ``SCHEMA`` header) and writes delete blocks as Avro
binary. Only what those need is here: records, nullable unions, primitives and the logical
types Arrow types map to; zig-zag varints, strings, bytes, unions and arrays.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from dynbucket.base.errors import FormatError, SchemaMismatchError

# --- schemas ------------------------------------------------------------------------------


def schema_json(schema: pa.Schema, table_name: str, meta_fields: tuple[str, ...] = ()) -> str:
    """The Avro schema of a table's records, as Hudi writes it (fields nullable as
    ``["null", type]`` with default null; ``meta_fields`` as nullable strings first)."""
    fields: list[dict[str, Any]] = [
        {"name": n, "type": ["null", "string"], "default": None} for n in meta_fields
    ]
    fields += [_field(f, f"hoodie.{table_name}.{table_name}_record") for f in schema]
    doc = {
        "type": "record",
        "name": f"{table_name}_record",
        "namespace": f"hoodie.{table_name}",
        "fields": fields,
    }
    return json.dumps(doc, separators=(",", ":"))


#: The largest decimal precision Spark (DecimalType) and Hudi's readers read.
MAX_DECIMAL_PRECISION = 38


def _field(f: pa.Field, namespace: str) -> dict[str, Any]:
    t = _type(f.type, f.name, namespace)
    if f.nullable:
        return {"name": f.name, "type": ["null", t], "default": None}
    return {"name": f.name, "type": t}


def _type(t: pa.DataType, name: str, namespace: str) -> Any:
    if pa.types.is_dictionary(t):
        return _type(t.value_type, name, namespace)
    simple = _SIMPLE.get(str(t))
    if simple is not None:
        return simple
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        # Files store timestamps as UTC instants (as Spark and Hudi do), zone or not.
        logical = "timestamp-millis" if t.unit in ("s", "ms") else "timestamp-micros"
        return {"type": "long", "logicalType": logical}
    if pa.types.is_decimal(t):
        if t.precision > MAX_DECIMAL_PRECISION:
            raise SchemaMismatchError(
                f"field {name!r} has type {t}: Spark and Hudi's readers read decimals of at "
                f"most {MAX_DECIMAL_PRECISION} digits; use decimal128({MAX_DECIMAL_PRECISION}, "
                f"{min(t.scale, MAX_DECIMAL_PRECISION)}) if the values fit, or a string"
            )
        return {
            "type": "bytes",
            "logicalType": "decimal",
            "precision": t.precision,
            "scale": t.scale,
        }
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        item = t.value_field
        inner = _type(item.type, f"{name}_item", f"{namespace}.{name}")
        return {"type": "array", "items": ["null", inner] if item.nullable else inner}
    if pa.types.is_map(t):
        inner = _type(t.item_type, f"{name}_value", f"{namespace}.{name}")
        return {"type": "map", "values": ["null", inner]}
    if pa.types.is_struct(t):
        return {
            "type": "record",
            "name": name,
            "namespace": namespace,
            "fields": [_field(t.field(i), f"{namespace}.{name}") for i in range(t.num_fields)],
        }
    raise SchemaMismatchError(
        f"field {name!r} has type {t}, which has no Avro form for Hudi readers; use a "
        "string, number, boolean, date, timestamp, decimal, binary, list, map or struct"
    )


_SIMPLE = {
    "bool": "boolean",
    "int8": "int",
    "int16": "int",
    "int32": "int",
    "uint8": "int",
    "uint16": "int",
    "int64": "long",
    "uint32": "long",
    "float": "float",
    "halffloat": "float",
    "double": "double",
}


# --- binary encoding ----------------------------------------------------------------------


class Writer:
    """Avro binary encoder into a growing buffer."""

    def __init__(self) -> None:
        self.out = io.BytesIO()

    def long(self, value: int) -> None:
        n = (value << 1) ^ (value >> 63)
        while n & ~0x7F:
            self.out.write(bytes(((n & 0x7F) | 0x80,)))
            n >>= 7
        self.out.write(bytes((n,)))

    def bytes_(self, value: bytes) -> None:
        self.long(len(value))
        self.out.write(value)

    def string(self, value: str) -> None:
        self.bytes_(value.encode("utf-8"))

    def float_(self, value: float) -> None:
        self.out.write(struct.pack("<f", value))

    def double(self, value: float) -> None:
        self.out.write(struct.pack("<d", value))

    def array(self, items: list[Any], item: Callable[[Any], None]) -> None:
        """One block holding every item, then the end marker (an empty block)."""
        if items:
            self.long(len(items))
            for x in items:
                item(x)
        self.long(0)

    def getvalue(self) -> bytes:
        return self.out.getvalue()


def read_long(data: bytes | memoryview, pos: int) -> tuple[int, int]:
    """The zig-zag varint at ``pos`` of ``data`` and the position after it (one loop over
    the bytes, a 1-byte value, nearly every length, on the short path: the decoding of
    many small records rests on it).

    Raises:
        FormatError: the bytes end before the value does.
    """
    end = len(data)
    if pos >= end:
        raise FormatError(f"Avro data ends at byte {end}, needed {pos + 1}")
    b = data[pos]
    if b < 0x80:
        return (b >> 1) ^ -(b & 1), pos + 1
    n, shift = b & 0x7F, 7
    while True:
        pos += 1
        if pos >= end:
            raise FormatError(f"Avro data ends at byte {end}, needed {pos + 1}")
        b = data[pos]
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos + 1


class Reader:
    """Avro binary decoder over bytes.

    Raises:
        FormatError: the bytes end before a value does.
    """

    def __init__(self, data: bytes) -> None:
        self.data = memoryview(data)
        self.pos = 0

    def _take(self, n: int) -> memoryview:
        if self.pos + n > len(self.data):
            raise FormatError(f"Avro data ends at byte {len(self.data)}, needed {self.pos + n}")
        view = self.data[self.pos : self.pos + n]
        self.pos += n
        return view

    def long(self) -> int:
        value, self.pos = read_long(self.data, self.pos)
        return value

    def bytes_(self) -> bytes:
        return bytes(self._take(self.long()))

    def string(self) -> str:
        return self.bytes_().decode("utf-8")

    def float_(self) -> float:
        return float(struct.unpack("<f", self._take(4))[0])

    def double(self) -> float:
        return float(struct.unpack("<d", self._take(8))[0])

    def array(self, item: Callable[[], Any]) -> Iterator[Any]:
        while True:
            count = self.long()
            if count == 0:
                return
            if count < 0:  # a block with its byte size: the count is negated
                count = -count
                self.long()
            for _ in range(count):
                yield item()
