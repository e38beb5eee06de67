"""``dynbucket ingest`` of small inputs: read with pyarrow and written in this process.

Starting Ray and Spark costs about twenty seconds; a file of a few megabytes is read and
written in well under one. Below ``--local-max-mb`` the command reads its inputs with
pyarrow and writes them through the in-process writer (the same buckets, files and result
as the Spark path: both hand Arrow batches to the same writer). The types are Spark's, so
that a table created from a small file is the table the Spark path would create:

* ``--schema`` (Spark DDL) or an existing table's schema types CSV and JSON columns by
  name (CSV by its header's names; by position only with ``--no-header``);
* otherwise CSV columns are inferred as Spark's ``inferSchema`` does: ``int`` when every
  value fits 32 bits, else ``bigint``, ``double``, ``boolean``, ``date``, ``timestamp``
  (in their plainest forms, ``infer_csv_column``), else ``string``; JSON
  numbers are ``bigint`` or ``double``, and JSON fields are sorted by name, as Spark sorts
  them; an empty CSV value, quoted or not, is null;
* Parquet columns take the types Spark gives them (``timestamp`` with a zone becomes
  microseconds in UTC, ``large_string`` becomes ``string``).

What only Spark decides takes the Spark path, whatever the size, and the command says why
(:class:`NeedsSpark`): dates and times read from text in other forms, and JSON's (Spark's
time-zone and pattern rules), times of day, Parquet timestamps without a zone, nested
JSON, DDL types this module does not map, compressions pyarrow does not stream.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq

from dynbucket.base.errors import InvalidInputError
from dynbucket.cli.ingest import _resolve, check_header_option, csv_columns
from dynbucket.cli.ingest import input_files as input_files  # the name tests and scripts use

#: Input size under which ``ingest`` writes in process (``--local-max-mb``).
LOCAL_MAX_MB = 128


class NeedsSpark(Exception):
    """The input is read as Spark would only by Spark (the message says why)."""


def input_bytes(files: Sequence[str]) -> int:
    """The inputs' size on storage."""
    total = 0
    for name in files:
        fs, path = _resolve(name)
        total += int(fs.get_file_info(path).size or 0)
    return total


def read(
    files: Sequence[str],
    fmt: str,
    schema: str | None,
    table_schema: pa.Schema | None,
    progress: Callable[[int, int], None] | None = None,
    header: bool = True,
) -> pa.Table:
    """The files as one Arrow table, typed as the Spark path types them (module doc);
    ``progress`` is told (files read, files) after each.

    Raises:
        NeedsSpark: only Spark reads these as Spark would.
        InvalidInputError: a file cannot be read as ``fmt`` with these types (nothing is
            written).
    """
    check_header_option(fmt, schema, header)
    given = ddl_schema(schema) if schema is not None else None
    typed = given if given is not None else table_schema
    source = "--schema" if given is not None else "table"
    first_header: list[str] | None = None
    if typed is not None and fmt in ("csv", "json"):
        _no_text_times(typed, "the schema", timestamps=fmt == "json")
    parts = []
    for name in files:
        try:
            from_file = _read_one(name, fmt, typed, header, source)
            if fmt == "csv" and header and typed is not None:
                if first_header is None:
                    first_header = from_file.column_names
                elif from_file.column_names != first_header:  # as Spark refuses them
                    raise InvalidInputError(
                        f"the CSV files' headers differ ({files[0]}: {first_header}; {name}: "
                        f"{from_file.column_names}); ingest files of one header at a time"
                    )
            if fmt == "parquet" and given is not None:  # Spark reads the columns named
                from_file = _columns_of(from_file, given)
            parts.append(from_file)
            if progress is not None:
                progress(len(parts), len(files))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
            reason = str(e).strip().splitlines()[0][:300]
            raise InvalidInputError(
                f"could not read {name} as {fmt}: {reason}; check the files, --format and --schema"
            ) from e
    if typed is None:
        parts = _common(parts)
    try:
        return pa.concat_tables(parts, promote_options="default") if parts else pa.table({})
    except pa.ArrowInvalid as e:
        raise InvalidInputError(
            f"the inputs do not have the same columns ({e}); ingest them one at a time"
        ) from e


def _columns_of(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns that ``schema`` names; a column the file lacks is null (as Spark
    reads Parquet with a schema).

    Raises:
        NeedsSpark: a column of another type than the schema's (Spark decides whether it
            converts or fails).
    """
    for f in schema:
        if f.name in table.column_names and table.schema.field(f.name).type != f.type:
            found = table.schema.field(f.name).type
            raise NeedsSpark(f"--schema reads Parquet column {f.name!r} ({found}) as {f.type}")
    columns = [
        table.column(f.name) if f.name in table.column_names else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _read_one(
    name: str, fmt: str, typed: pa.Schema | None, header: bool = True, source: str = "table"
) -> pa.Table:
    fs, path = _resolve(name)
    if fmt == "parquet":
        return spark_types(pq.read_table(path, filesystem=fs, partitioning=None))
    lowered = name.lower()
    if lowered.endswith((".snappy", ".lz4")):
        raise NeedsSpark(f"{os.path.basename(name)}: Hadoop's {lowered.rsplit('.', 1)[1]} framing")
    compression = "detect" if lowered.endswith((".gz", ".bz2", ".zst")) else None
    with fs.open_input_stream(path, compression=compression) as stream:
        if fmt == "csv":
            return _read_csv(stream, typed, header, source)
        return _read_json(stream, typed)


def _read_csv(
    stream: pa.NativeFile, typed: pa.Schema | None, header: bool = True, source: str = "table"
) -> pa.Table:
    # Spark reads an empty value as null, of any type, quoted ("") or not.
    convert = dict(null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True)
    data = stream.read()
    if typed is not None:
        if header:  # columns by the header's names, each of its type in the schema
            names = pacsv.open_csv(pa.BufferReader(data)).schema.names
            typed = pa.schema([typed.field(n) for n in csv_columns(names, typed.names, source)])
        # Timestamps as text first: pyarrow's parser reads forms Spark's does not.
        as_read = pa.schema(
            [f.with_type(pa.string()) if pa.types.is_timestamp(f.type) else f for f in typed]
        )
        read = pacsv.read_csv(
            pa.BufferReader(data),
            read_options=pacsv.ReadOptions(column_names=typed.names, skip_rows=int(header)),
            convert_options=pacsv.ConvertOptions(
                column_types=as_read, true_values=_TRUE, false_values=_FALSE, **convert
            ),
        )
        for i, f in enumerate(typed):
            if pa.types.is_timestamp(f.type):
                times = text_timestamps(read.column(i), f.type)
                if times is None:
                    raise NeedsSpark(f"column {f.name!r}: times in a form Spark's rules read")
                read = read.set_column(i, f, times)
        return read
    names = pacsv.open_csv(pa.BufferReader(data)).schema.names
    text = pacsv.read_csv(
        pa.BufferReader(data),
        convert_options=pacsv.ConvertOptions(
            column_types={n: pa.string() for n in names}, **convert
        ),
    )
    return pa.table({n: infer_csv_column(n, text.column(n)) for n in text.column_names})


_TRUE = ["true", "True", "TRUE"]
_FALSE = ["false", "False", "FALSE"]
_INTEGER = r"^[+-]?\d+$"
_LOOKS_LIKE_TIME = r"^\d{4}-\d{1,2}-\d{1,2}|^\d{1,2}:\d{2}"
_DATE = r"^\d{4}-\d{2}-\d{2}$"
#: What Spark's default timestamp parser reads (``DateTimeUtils.stringToTimestamp``), in its
#: plainest form: a date, or a date and a time to the second with at most six fractional
#: digits, no zone (the session's, UTC, applies). Any other form: the Spark path decides.
_TIMESTAMP = r"^\d{4}-\d{2}-\d{2}([T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?)?$"


def infer_csv_column(name: str, text: pa.ChunkedArray) -> pa.ChunkedArray:
    """A CSV column read as text, typed as Spark's ``inferSchema`` types it.

    1. No value: ``string``.
    2. Every value an integer: ``int`` if all fit 32 bits, else ``bigint`` (beyond 64
       bits, Spark's decimal: the Spark path).
    3. Every value a number: ``double``.
    4. Every value ``true``/``false`` (any case): ``boolean``.
    5. Every value a date ``yyyy-MM-dd`` (Spark's ``dateFormat``, taken as a date when
       inferring: ``prefersDate``): ``date``.
    6. Every value a date or a date and time ``yyyy-MM-dd[( |T)HH:mm:ss[.SSSSSS]]``, one
       with a time: ``timestamp``, read in the session's zone (UTC), as Spark infers and
       parses it (a date and a timestamp in one column make a timestamp).
    7. Another value that looks like a date or a time: the Spark path (its patterns and
       time zone decide).
    8. Otherwise ``string``.
    """
    values = pc.drop_null(text)
    # 1.
    if len(values) == 0:
        return text
    # 2.
    if pc.all(pc.match_substring_regex(values, _INTEGER)).as_py():
        try:
            wide = pc.cast(text, pa.int64())
        except pa.ArrowInvalid as e:
            raise NeedsSpark(f"column {name!r}: integers beyond 64 bits (Spark's decimal)") from e
        low, high = pc.min_max(wide).values()
        fits = low.as_py() >= -(2**31) and high.as_py() < 2**31
        return pc.cast(wide, pa.int32()) if fits else wide
    # 3.
    try:
        return pc.cast(text, pa.float64())
    except pa.ArrowInvalid:
        pass
    # 4.
    lowered = pc.utf8_lower(values)
    if pc.all(pc.is_in(lowered, pa.array(["true", "false"]))).as_py():
        return pc.equal(pc.utf8_lower(text), "true")
    # 5.
    if pc.all(pc.match_substring_regex(values, _DATE)).as_py():
        try:
            return pc.cast(text, pa.date32())  # strict: 2024-02-30 does not parse
        except pa.ArrowInvalid:
            pass  # not a calendar date (2024-02-30): Spark decides
    # 6.
    times = text_timestamps(text, _SPARK_TIMESTAMP)
    if times is not None:
        return times
    # 7.
    if pc.any(pc.match_substring_regex(values, _LOOKS_LIKE_TIME)).as_py():
        raise NeedsSpark(f"column {name!r} looks like dates or times (Spark's patterns and zone)")
    # 8.
    return text


#: Spark's ``timestamp`` as its Arrow batches carry it (the session's zone is UTC).
_SPARK_TIMESTAMP = pa.timestamp("us", tz="UTC")


def text_timestamps(text: pa.ChunkedArray, kind: pa.DataType) -> pa.ChunkedArray | None:
    """A text column's values as timestamps of ``kind`` (with a zone: the text read in
    UTC), when each is in the form Spark's default parser and this one read alike
    (``_TIMESTAMP``); None when one is a date and time no calendar has (2024-02-30,
    24:00:00, a leap second): Spark decides what it is."""
    values = pc.drop_null(text)
    if not pc.all(pc.match_substring_regex(values, _TIMESTAMP)).as_py():
        return None
    try:
        # A naive time taken as UTC (the session's zone); a cast that would lose digits
        # (a table's millisecond column) fails rather than truncates: Spark decides.
        return pc.cast(text, pa.timestamp("us")).cast(kind)
    except pa.ArrowInvalid:
        return None


def _read_json(stream: pa.NativeFile, typed: pa.Schema | None) -> pa.Table:
    if typed is not None:
        parse = pajson.ParseOptions(explicit_schema=typed, unexpected_field_behavior="ignore")
        return pajson.read_json(stream, parse_options=parse).select(typed.names)
    data = stream.read()
    inferred = pajson.read_json(pa.BufferReader(data)).schema
    fields = []
    for f in sorted(inferred, key=lambda f: f.name):  # Spark sorts a JSON schema's fields
        if pa.types.is_nested(f.type):
            raise NeedsSpark(f"field {f.name!r} is nested JSON (Spark's inference)")
        if pa.types.is_integer(f.type):
            fields.append(pa.field(f.name, pa.int64()))
        elif pa.types.is_floating(f.type) or pa.types.is_boolean(f.type):
            fields.append(f)
        else:  # text, and what pyarrow would read as times: Spark keeps them as text
            fields.append(pa.field(f.name, pa.string()))
    schema = pa.schema(fields)
    parse = pajson.ParseOptions(explicit_schema=schema)
    return pajson.read_json(pa.BufferReader(data), parse_options=parse).select(schema.names)


def spark_types(table: pa.Table) -> pa.Table:
    """A Parquet file's rows with the types Spark reads them as.

    Raises:
        NeedsSpark: a column Spark types by its own rules (times without a zone) or a type
            Arrow and Spark do not exchange.
    """
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    for f in table.schema:
        if pa.types.is_timestamp(f.type) and f.type.tz is None:
            raise NeedsSpark(f"column {f.name!r}: a timestamp without a zone (Spark's rules)")
        if pa.types.is_timestamp(f.type) and f.type.unit == "ns":  # Spark refuses them
            raise NeedsSpark(f"column {f.name!r}: a timestamp in nanoseconds")
    try:
        schema = to_arrow_schema(from_arrow_schema(table.schema))
    except Exception as e:  # pyspark's PySparkTypeError: no such Spark type
        raise NeedsSpark(f"a column type Spark converts by its own rules ({e})") from e
    return table.cast(schema)


def _common(parts: list[pa.Table]) -> list[pa.Table]:
    """Inferred parts with one type per column: the widest of the parts' (Spark infers one
    schema over all files)."""
    if len(parts) <= 1:
        return parts
    types: dict[str, pa.DataType] = {}
    for part in parts:
        for f in part.schema:
            have = types.get(f.name)
            types[f.name] = f.type if have is None else _wider(have, f.type)
    return [p.cast(pa.schema([(n, types[n]) for n in p.column_names])) for p in parts]


def _wider(a: pa.DataType, b: pa.DataType) -> pa.DataType:
    if a == b:
        return a
    for order in ([pa.int32(), pa.int64(), pa.float64()], [pa.date32(), _SPARK_TIMESTAMP]):
        if a in order and b in order:  # a date among timestamps: midnight, as Spark reads it
            return order[max(order.index(a), order.index(b))]
    return pa.string()


def spark_type_names(schema: pa.Schema) -> list[tuple[str, str]]:
    """Each column's name and Spark type name (as Spark's ``simpleString`` says it)."""
    names = {v: k for k, v in reversed(list(_DDL_TYPES.items()))}
    return [(f.name, names.get(f.type, str(f.type))) for f in schema]


def _no_text_times(schema: pa.Schema, what: str, timestamps: bool = True) -> None:
    """Refuses times of day (and, with ``timestamps``, timestamps) read from text: Spark's
    patterns and zone decide them (a CSV's timestamps in ``_TIMESTAMP``'s form are read
    here, ``_read_csv``)."""
    for f in schema:
        if (timestamps and pa.types.is_timestamp(f.type)) or pa.types.is_time(f.type):
            raise NeedsSpark(f"{what} reads {f.name!r} as a time from text (Spark's zone)")


#: Spark DDL type names and the Arrow types the Spark path ends with.
_DDL_TYPES = {
    "string": pa.string(),
    "varchar": pa.string(),
    "char": pa.string(),
    "int": pa.int32(),
    "integer": pa.int32(),
    "bigint": pa.int64(),
    "long": pa.int64(),
    "smallint": pa.int16(),
    "short": pa.int16(),
    "tinyint": pa.int8(),
    "byte": pa.int8(),
    "double": pa.float64(),
    "float": pa.float32(),
    "real": pa.float32(),
    "boolean": pa.bool_(),
    "date": pa.date32(),
    "binary": pa.binary(),
    "timestamp": pa.timestamp("us", tz="UTC"),
    "timestamp_ntz": pa.timestamp("us"),
}
_DDL_FIELD = re.compile(
    r"^\s*`?(?P<name>[A-Za-z_][\w]*)`?\s+(?P<type>[A-Za-z_]+)\s*"
    r"(?:\(\s*(?P<p>\d+)\s*(?:,\s*(?P<s>\d+)\s*)?\))?\s*$"
)


def ddl_schema(ddl: str) -> pa.Schema:
    """The Arrow schema of a Spark DDL list of columns (``'id string, ts bigint'``).

    Raises:
        NeedsSpark: a type this module does not map (nested types, intervals...).
        InvalidInputError: the text is not a DDL list of columns.
    """
    fields = []
    for part in _split_top_level(ddl):
        m = _DDL_FIELD.match(part)
        if m is None:
            if "<" in part or "struct" in part.lower():
                raise NeedsSpark(f"--schema column {part.strip()!r}: a nested type")
            raise InvalidInputError(
                f"--schema {ddl!r} is not a Spark DDL schema (at {part.strip()!r}); give the "
                "columns as 'name type, ...', e.g. 'id string, ts bigint'"
            )
        kind = m["type"].lower()
        if kind in ("decimal", "dec", "numeric"):
            precision, scale = int(m["p"] or 10), int(m["s"] or 0)
            fields.append(pa.field(m["name"], pa.decimal128(precision, scale)))
        elif kind in _DDL_TYPES:
            fields.append(pa.field(m["name"], _DDL_TYPES[kind]))
        else:
            raise NeedsSpark(f"--schema type {m['type']!r} of {m['name']!r}")
    return pa.schema(fields)


def _split_top_level(ddl: str) -> list[str]:
    """``ddl`` split at the commas outside parentheses and angle brackets."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(ddl):
        depth += ch in "(<"
        depth -= ch in ")>"
        if ch == "," and depth == 0:
            parts.append(ddl[start:i])
            start = i + 1
    parts.append(ddl[start:])
    return [p for p in parts if p.strip()]
