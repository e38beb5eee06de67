"""``dynbucket ingest``: files into a table, with every check that can be made before Ray
and Spark start (about half a minute) made first.

1. The input files exist and are of one format: the one named by ``--format``, else the one
   their names say (``.parquet``, ``.csv``, ``.json``...); a local Parquet file must hold
   Parquet.
2. An existing table's definition agrees with ``--key``, ``--partition-by``,
   ``--ordering`` and ``--table-type`` when they are given; without a table there, ``--key``
   is needed to create one.
3. Spark reads the files: CSV and JSON with the table's schema (``--schema`` when given, or
   the existing table's), else with the types Spark infers; CSV columns by their header's
   names (by position only with ``--no-header`` and ``--schema``); a new table's ordering field
   read from CSV as text is refused (``'10'`` sorts before ``'9'``) unless ``--schema``
   says so.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.fs as pafs

from dynbucket.base.errors import (
    ConfigError,
    InvalidInputError,
    NotAdoptedError,
    NotATableError,
    SchemaMismatchError,
)
from dynbucket.format.hudi.meta_fields import IS_DELETED
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec, load_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

FORMATS = ("parquet", "csv", "json")
_SUFFIXES = {
    ".parquet": "parquet",
    ".parq": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
_COMPRESSED = (".gz", ".bz2", ".zst", ".lz4", ".snappy")


@dataclass(frozen=True)
class Definition:
    """What the command line says of the table (None: not given)."""

    key: tuple[str, ...] | None = None
    partition_by: tuple[str, ...] | None = None
    ordering: str | None = None
    table_type: str | None = None


def input_format(files: Sequence[str], given: str | None) -> str:
    """1. The format of the input files (``given``, or the one their names say).

    Raises:
        InvalidInputError: a file is missing, of no known format, of several formats, or
            not Parquet while said to be.
    """
    found: dict[str, str] = {}
    for name in files:
        fs, path = _resolve(name)
        info = fs.get_file_info(path)
        if info.type == pafs.FileType.NotFound:
            raise InvalidInputError(f"input {name!r} does not exist; give existing files")
        members = [name]
        if info.type == pafs.FileType.Directory:
            members = folder_files(fs, path)
            if not members:
                raise InvalidInputError(f"input folder {name!r} holds no files")
        for member in members:
            fmt = _format_of(member)
            if fmt is not None:
                found[member] = fmt
        if given is None and not any(m in found for m in members):
            raise InvalidInputError(
                f"cannot tell the format of {name!r} from its name: give --format "
                f"({', '.join(FORMATS)})"
            )
    formats = sorted(set(found.values()))
    if given is None and len(formats) > 1:
        raise InvalidInputError(
            f"the inputs are of several formats ({', '.join(formats)}); ingest one format at a "
            "time, or give --format"
        )
    fmt = given or formats[0]
    if fmt == "parquet":
        for member in found or files:
            _check_parquet(member)
    return fmt


def table_definition(uri: str, given: Definition) -> TableSpec | None:
    """2. The existing table's definition, checked against what the command line gives
    (None: no table there, and ``--key`` gives one to create).

    Raises:
        NotATableError: no table there and no ``--key``.
        ConfigError: the command line disagrees with the table.
    """
    try:
        spec = load_table(TableStore.at(uri))
    except NotAdoptedError:
        raise  # --key cannot create a table over one Hudi wrote
    except NotATableError as e:
        if not given.key:
            raise NotATableError(
                f"{uri} is not a dynbucket table: give --key (and "
                "--partition-by, --ordering) to create it from the input"
            ) from e
        return None
    have = {
        "--key": (given.key, spec.record_key),
        "--partition-by": (given.partition_by, spec.partition_by),
        "--ordering": (given.ordering, spec.ordering_field),
        "--table-type": (given.table_type, spec.options.table_type),
    }
    for option, (wanted, actual) in have.items():
        if wanted is not None and wanted != actual:
            raise ConfigError(
                f"{option} {_shown(wanted)} disagrees with the table at {uri}, whose value is "
                f"{_shown(actual)}: drop {option} (the table's definition is used), or ingest "
                "into a new table"
            )
    return spec


def read(
    spark: SparkSession,
    files: Sequence[str],
    fmt: str,
    schema: str | None,
    spec: TableSpec | None,
    header: bool = True,
) -> DataFrame:
    """3. The files as a DataFrame, typed by ``schema`` (Spark DDL), else the table's
    schema (CSV, JSON), else as Spark infers them. CSV columns are taken by the names of
    their header (:func:`csv_schema`), by position only without one (``header=False``, with
    ``schema``)."""
    from pyspark.sql.pandas.types import from_arrow_schema
    from pyspark.sql.types import StructType, _parse_datatype_string

    check_header_option(fmt, schema, header)
    reader = spark.read.format(fmt)
    typed: StructType | None = None
    if schema is not None:
        parsed: object
        try:
            parsed = _parse_datatype_string(schema)
        except Exception as e:  # pyspark's ParseException: its text may not even print
            parsed = e
        if not isinstance(parsed, StructType):
            raise InvalidInputError(
                f"--schema {schema!r} is not a Spark DDL schema ({type(parsed).__name__}); "
                "give the columns as 'name type, ...', e.g. 'id string, ts bigint'"
            )
        typed = parsed
    elif spec is not None and fmt in ("csv", "json"):
        typed = from_arrow_schema(spec.schema)
    if fmt == "csv":
        reader = reader.option("header", str(header).lower())
        if typed is not None and header:
            names = csv_header(files)
            if names is None:  # a compression only Spark reads: its first file's header
                names = spark.read.option("header", "true").csv(list(files)).columns
            source = "--schema" if schema is not None else "table"
            by_name = {f.name: f for f in typed.fields}
            typed = StructType([by_name[n] for n in csv_columns(names, typed.names, source)])
            # Spark then checks every file's header against these names, in order.
            reader = reader.option("enforceSchema", "false")
        elif typed is None:
            reader = reader.option("inferSchema", "true")
    if typed is not None:
        reader = reader.schema(typed)
    if fmt in ("csv", "json"):
        reader = reader.option("mode", "FAILFAST")  # a bad value fails, never a null
    return reader.load(list(files))


def check_header_option(fmt: str, schema: str | None, header: bool) -> None:
    """``--no-header`` takes CSV columns by position: only of CSV, and only with ``--schema``
    naming them in order.

    Raises:
        ConfigError: naming the option and the fix.
    """
    if header:
        return
    if fmt != "csv":
        raise ConfigError(f"--no-header is for CSV files, not {fmt}: drop --no-header")
    if schema is None:
        raise ConfigError(
            "--no-header takes the CSV columns by position: give --schema naming them in "
            "the files' order (e.g. --schema 'id string, ts bigint')"
        )


def csv_header(files: Sequence[str]) -> list[str] | None:
    """The column names of the CSV files' header line, the same in every file (None when a
    file's compression is one only Spark reads).

    Raises:
        InvalidInputError: two files' headers differ.
    """
    import pyarrow.csv as pacsv

    first: tuple[str, list[str]] | None = None
    for name in input_files(files):
        fs, path = _resolve(name)
        lowered = name.lower()
        if lowered.endswith((".snappy", ".lz4")):
            return None
        compression = "detect" if lowered.endswith((".gz", ".bz2", ".zst")) else None
        with fs.open_input_stream(path, compression=compression) as stream:
            try:
                names = pacsv.open_csv(stream).schema.names
            except pa.ArrowInvalid as e:
                if "Empty CSV file" in str(e):
                    continue
                raise InvalidInputError(f"could not read the header of {name}: {e}") from e
        if first is None:
            first = (name, names)
        elif names != first[1]:
            raise InvalidInputError(
                f"the CSV files' headers differ ({first[0]}: {first[1]}; {name}: {names}); "
                "ingest files of one header at a time"
            )
    return first[1] if first is not None else []


def csv_columns(header: Sequence[str], typed: Sequence[str], source: str) -> list[str]:
    """The columns a CSV file of ``header`` is read with, by name: the header's, each to be
    typed as the field of its name in ``typed`` (the table's schema, or ``--schema``). A
    column ``typed`` lacks is refused here, as the Python API refuses it; one the header
    lacks is missing from the rows, and the write refuses it.

    Raises:
        SchemaMismatchError: naming the header's columns that ``typed`` lacks, or that it
            names twice.
    """
    twice = sorted({n for n in header if list(header).count(n) > 1})
    if twice:
        raise SchemaMismatchError(
            f"the CSV header names column(s) {twice} more than once; give each column one name"
        )
    extra = [n for n in header if n not in typed]
    if extra:
        where = "--schema" if source == "--schema" else "the table schema"
        raise SchemaMismatchError(
            f"field(s) {extra} of the CSV header are not in {where} ({list(typed)}); drop "
            "them from the files, or map columns by position with --no-header and --schema"
        )
    return list(header)


def new_table_schema(schema: pa.Schema, inferred: bool = True) -> pa.Schema:
    """The schema of a table created from input files: theirs, without Hudi's delete
    marker (``_hoodie_is_deleted`` marks records as deletes; it is not stored). Types
    ``inferred`` from the files (no ``--schema``) are widened as a Spark user expects of an
    id or ordering column: integers to ``int64``, floats to ``double`` (a CSV of small
    numbers infers ``int``, and a later file of epoch milliseconds would not fit; a key,
    partition or ordering field never widens once the table has it)."""
    at = schema.get_field_index(IS_DELETED)
    schema = schema if at < 0 else schema.remove(at)
    if not inferred:
        return schema
    return pa.schema([f.with_type(_widest(f.type)) for f in schema], metadata=schema.metadata)


def _widest(t: pa.DataType) -> pa.DataType:
    if pa.types.is_integer(t) and t != pa.uint64():
        return pa.int64()
    if pa.types.is_floating(t):
        return pa.float64()
    return t


def input_files(files: Sequence[str]) -> list[str]:
    """The files behind ``files`` (a folder's visible files, recursively), in order."""
    out = []
    for name in files:
        fs, path = _resolve(name)
        is_folder = fs.get_file_info(path).type == pafs.FileType.Directory
        out += folder_files(fs, path) if is_folder else [name]
    return out


def check_new_ordering(df: DataFrame, ordering: str | None, fmt: str, schema: str | None) -> None:
    """3. A new table's ordering field that CSV left as text is refused (``--schema`` may
    still say it is text)."""
    columns = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    refuse_text_ordering(columns, ordering, fmt, schema)


def refuse_text_ordering(
    columns: Sequence[tuple[str, str]], ordering: str | None, fmt: str, schema: str | None
) -> None:
    """A new table's ordering field read from CSV as text (``columns``: each column's name
    and Spark type) is refused, unless ``--schema`` said so.

    Raises:
        ConfigError: naming the column and the ``--schema`` that reads it as a number.
    """
    if ordering is None or fmt != "csv" or schema is not None:
        return
    if dict(columns).get(ordering) == "string":
        ddl = ", ".join(f"{n} {'bigint' if n == ordering else t}" for n, t in columns)
        raise ConfigError(
            f"--ordering {ordering}: the CSV column {ordering!r} was read as text, which "
            "orders '10' before '9'; give the columns' types with --schema (e.g. "
            f"--schema '{ddl}'), or order by a column of numbers or times"
        )


def read_error(e: BaseException, files: Sequence[str], fmt: str) -> InvalidInputError | None:
    """A Spark failure to read the input as one line (None when it is not one)."""
    lines = [line.strip() for line in str(e).splitlines()]
    reason = next((line for line in lines if any(s in line.lower() for s in _READ_FAILURES)), None)
    if reason is None:
        return None
    reason = _SPARK_PREFIX.sub("", reason)
    return InvalidInputError(
        f"could not read {', '.join(files)} as {fmt}: {reason[:300]}; check the files, "
        "--format and --schema"
    )


#: What Spark puts before the reason: "Caused by: org...SparkException: [ERROR_CLASS] ".
_SPARK_PREFIX = re.compile(r"^(Caused by: )?([\w.$]+(Exception|Error): )?(\[[A-Z_.]+\] )?")
#: Words of Spark's errors that say the input could not be read as asked.
_READ_FAILURES = (
    "malformed",
    "cannot parse",
    "failed to parse",
    "cannot cast",
    "is not a parquet file",
    "unable to infer",
    "parseexception",
)


def folder_files(fs: pafs.FileSystem, path: str) -> list[str]:
    """A folder's files, recursively, in order, but those hidden (``.``) or Spark's own
    (``_SUCCESS``, ``_committed_...``), which readers skip."""
    infos = fs.get_file_info(pafs.FileSelector(path, recursive=True))
    return sorted(
        i.path
        for i in infos
        if i.type == pafs.FileType.File and not os.path.basename(i.path).startswith((".", "_"))
    )


def _resolve(name: str) -> tuple[pafs.FileSystem, str]:
    if "://" not in name:
        return pafs.LocalFileSystem(), os.path.abspath(os.path.expanduser(name))
    fs, path = pafs.FileSystem.from_uri(name)
    return fs, path


def _format_of(name: str) -> str | None:
    lowered = name.lower()
    for ending in _COMPRESSED:
        if lowered.endswith(ending):
            lowered = lowered[: -len(ending)]
    return _SUFFIXES.get(os.path.splitext(lowered)[1])


def _check_parquet(name: str) -> None:
    fs, path = _resolve(name)
    if not isinstance(fs, pafs.LocalFileSystem) or not os.path.isfile(path):
        return
    with open(path, "rb") as f:
        head = f.read(4)
        f.seek(max(0, os.path.getsize(path) - 4))
        tail = f.read(4)
    if head != b"PAR1" or tail != b"PAR1":
        guess = _format_of(name)
        hint = f" (its name says {guess}: give --format {guess})" if guess != "parquet" else ""
        raise InvalidInputError(f"input {name!r} is not a Parquet file{hint}")


def _shown(value: object) -> str:
    if isinstance(value, tuple):
        return " ".join(value) if value else "(none)"
    return str(value) if value is not None else "(none)"
