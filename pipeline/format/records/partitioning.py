"""Hive-style partition paths (``field=value/field=value``) from partition field values.

Values are checked first (no null, no empty value, no ``/``, ``..`` or control character),
then escaped as Spark escapes partition values (``%XX`` for ``# % ' * : = ? \\ { [ ] ^ "``),
so that Spark and ``pyarrow.dataset`` (hive partitioning, URI segment decoding) read back the
values that were written; an escaped folder name must fit in 255 bytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.errors import InvalidPartitionValueError, SchemaMismatchError
from dynbucket.format.records.timestamp_partitions import TimestampPartitioning

#: Characters Spark escapes in partition values (besides '/' and control characters, which
#: dynbucket refuses). '%' comes first so that escapes are not escaped again.
_ESCAPED = ["%", '"', "#", "'", "*", ":", "=", "?", "\\", "{", "[", "]", "^"]
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
#: Bytes a folder name may have (NAME_MAX of Linux filesystems; object stores allow more).
MAX_SEGMENT_BYTES = 255
_SUPPORTED = "string, integer, boolean or date"


def check_partition_type(name: str, type_: pa.DataType) -> None:
    """Raises unless values of ``type_`` can name a partition."""
    if not (
        pa.types.is_string(type_)
        or pa.types.is_large_string(type_)
        or pa.types.is_integer(type_)
        or pa.types.is_boolean(type_)
        or pa.types.is_date32(type_)
    ):
        raise SchemaMismatchError(
            f"partition field {name!r} has type {type_}; partition fields must be {_SUPPORTED}"
        )


def partition_paths(
    table: pa.Table,
    fields: Sequence[str],
    hive_style: bool = True,
    timestamp: TimestampPartitioning | None = None,
) -> pa.Array:
    """The partition path of each row of ``table`` ("" when the table is unpartitioned):
    ``field=value/...``, or ``value/...`` without ``hive_style`` (a table Hudi wrote with
    ``hoodie.datasource.write.hive_style_partitioning=false``); with ``timestamp``, the
    path its one field's time makes (``timestamp_partitions.py``).

    Raises:
        InvalidPartitionValueError: a value is null, empty, or holds '/', '..' or a control
            character.
    """
    if not fields or table.num_rows == 0:
        return pa.array([""] * table.num_rows, pa.string())
    if timestamp is not None:
        (name,) = fields
        paths = timestamp.paths(name, table.column(name))
        return pc.binary_join_element_wise(f"{name}=", paths, "") if hive_style else paths
    parts = []
    for name in fields:
        column = table.column(name)
        check_partition_type(name, column.type)
        text = pc.cast(column, pa.string())
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        _check_nulls(name, text)
        # A batch holds few distinct partition values: check and escape each once.
        encoded = pc.dictionary_encode(text)
        _check_values(name, encoded.dictionary)
        prefix = f"{name}=" if hive_style else ""
        paths = pc.binary_join_element_wise(prefix, _escape(encoded.dictionary), "")
        _check_lengths(name, encoded.dictionary, paths)
        parts.append(pc.take(paths, encoded.indices))
    return parts[0] if len(parts) == 1 else pc.binary_join_element_wise(*parts, "/")


def _check_nulls(name: str, text: pa.Array) -> None:
    nulls = text.null_count
    if nulls:
        raise InvalidPartitionValueError(
            f"partition field {name!r} is null in {nulls} row(s); give every row a value "
            "(e.g. fill nulls with a placeholder such as 'unknown')"
        )


def _check_values(name: str, text: pa.ChunkedArray | pa.Array) -> None:
    bad = pc.or_(
        pc.or_(pc.equal(text, ""), pc.match_substring(text, "/")),
        pc.or_(pc.match_substring(text, ".."), pc.match_substring_regex(text, _CONTROL.pattern)),
    )
    if pc.any(bad).as_py():
        value = text.filter(bad)[0].as_py()
        raise InvalidPartitionValueError(
            f"partition field {name!r} has value {value!r}; partition values must be non-empty "
            "and hold no '/', '..' or control character: clean the value before writing"
        )


def _check_lengths(name: str, values: pa.Array, segments: pa.Array) -> None:
    sizes = pc.binary_length(segments)
    if pc.max(sizes).as_py() > MAX_SEGMENT_BYTES:
        at = pc.index(pc.greater(sizes, MAX_SEGMENT_BYTES), True).as_py()
        value = values[at].as_py()
        shown = value if len(value) <= 40 else f"{value[:40]}..."
        raise InvalidPartitionValueError(
            f"partition field {name!r} has a value of {len(value)} characters ({shown!r}); "
            f"its folder name '{name}=...' (escaped) takes {sizes[at].as_py()} bytes, over the "
            f"{MAX_SEGMENT_BYTES} bytes a folder name may have: shorten the values (e.g. "
            "partition by a prefix or a hash of them)"
        )


def _escape(text: pa.ChunkedArray | pa.Array) -> pa.ChunkedArray | pa.Array:
    for ch in _ESCAPED:
        text = pc.replace_substring(text, ch, f"%{ord(ch):02X}")
    return text


def parse_partition_path(
    path: str, fields: Sequence[str] = (), hive_style: bool = True
) -> dict[str, str]:
    """``"a=1/b=x%3Dy"`` -> ``{"a": "1", "b": "x=y"}``; without ``hive_style``, ``"1/x%3Dy"``
    of ``fields`` ``a, b`` says the same."""
    if not path:
        return {}
    if not hive_style:
        segments = path.split("/")
        if len(segments) != len(fields):
            raise InvalidPartitionValueError(
                f"partition path {path!r} has {len(segments)} segment(s) for the "
                f"{len(fields)} partition field(s) {list(fields)}"
            )
        return {name: unquote(v) for name, v in zip(fields, segments, strict=True)}
    out = {}
    for segment in path.split("/"):
        name, sep, value = segment.partition("=")
        if not sep:
            raise InvalidPartitionValueError(f"partition path segment {segment!r} has no '='")
        out[name] = unquote(value)
    return out


def partition_columns(
    path: str, schema: pa.Schema, fields: Sequence[str], rows: int, hive_style: bool = True
) -> list[pa.Array]:
    """Columns holding the partition values of ``path``, typed as in ``schema``."""
    if not fields:
        return []
    values = parse_partition_path(path, fields, hive_style)
    columns = []
    for name in fields:
        type_ = schema.field(name).type
        columns.append(pa.repeat(pa.scalar(values[name]).cast(type_), rows))
    return columns
