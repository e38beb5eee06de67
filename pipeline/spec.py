"""What a table is: schema, keys, partitioning, ordering, index and options.

Persisted at creation as ``.dynbucket/table.json`` and checked when a table is opened. Option
names are dotted kebab-case (``cleaner.commits-retained``, ``dynamic-bucket.max-keys-per-bucket``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import pyarrow as pa

from dynbucket.actors.options import DynamicBucketOptions
from dynbucket.pipeline.errors import ConfigError, SchemaMismatchError, TableCorruptedError
from dynbucket.pipeline.partitioning import check_partition_type

FORMAT_VERSION = 1
INDEX_ENGINE = "dynamic-bucket"

#: Columns dynbucket adds to files and reads; a table's own fields may not use these names.
HASH = "_hash"
INSTANT = "_instant"
OP = "_op"
PARTITION = "_partition"
BUCKET = "_bucket"
FILE_ID = "_file_id"
IS_NEW = "_is_new"
META_COLUMNS = (PARTITION, BUCKET, FILE_ID, INSTANT)
RESERVED = frozenset({HASH, INSTANT, OP, PARTITION, BUCKET, FILE_ID, IS_NEW, "_seq"})

#: ``_op`` values in delta files.
UPSERT, DELETE = 0, 1


@dataclass(frozen=True)
class TableOptions:
    """Table-level options, persisted as ``table.json`` properties."""

    cleaner_commits_retained: int = 10
    """Completed instants whose file slices stay readable (``cleaner.commits-retained``);
    older slices go at the next clean, and reads as of older instants fail clearly."""
    index_compaction_min_files: int = 8
    """Index delta files of a partition that trigger index compaction
    (``index.compaction.min-files``)."""
    lock_lease_seconds: float = 60.0
    """How long a dead writer can hold the table (``lock.lease-seconds``)."""

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ConfigError(f"{_option_name(f.name)}={value!r}: must be a number > 0")

    def to_properties(self) -> dict[str, str]:
        return {_option_name(f.name): str(getattr(self, f.name)) for f in fields(self)}

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TableOptions:
        kwargs: dict[str, Any] = {}
        for f in fields(cls):
            key = _option_name(f.name)
            if key in props:
                kind = float if f.type in ("float", float) else int
                try:
                    kwargs[f.name] = kind(props[key])
                except ValueError as e:
                    raise ConfigError(f"{key}={props[key]!r}: must be a number") from e
        return cls(**kwargs)


@dataclass(frozen=True)
class DynamicBucketIndex:
    """A table's dynamic bucket index: when buckets are full, and how many assigner slots
    (actors; also each partition's initial bucket count) a write uses."""

    assigner_slots: int | None = None
    """Assigner slots of a write; None: Spark's default parallelism. May change between
    writes (the actors are replaced; every key keeps its bucket)."""
    max_keys_per_bucket: int | None = None
    """See ``DynamicBucketOptions`` (``dynamic-bucket.max-keys-per-bucket``)."""
    max_bytes_per_bucket: int | None = None
    """See ``DynamicBucketOptions`` (``dynamic-bucket.max-bytes-per-bucket``)."""
    max_buckets: int | None = None
    """See ``DynamicBucketOptions`` (``dynamic-bucket.max-buckets``)."""
    bytes_per_key_estimate: int = 128
    """See ``DynamicBucketOptions`` (``dynamic-bucket.bytes-per-key-estimate``)."""

    def __post_init__(self) -> None:
        slots = self.assigner_slots
        if slots is not None and (isinstance(slots, bool) or not isinstance(slots, int)
                                  or slots < 1):  # fmt: skip
            raise ConfigError(f"assigner_slots={slots!r}: must be an integer >= 1 (or None)")
        self.options  # noqa: B018  (validates the persisted options now)

    @property
    def options(self) -> DynamicBucketOptions:
        """The persisted part (``dynamic-bucket.*``)."""
        return DynamicBucketOptions(
            max_keys_per_bucket=self.max_keys_per_bucket,
            max_bytes_per_bucket=self.max_bytes_per_bucket,
            max_buckets=self.max_buckets,
            bytes_per_key_estimate=self.bytes_per_key_estimate,
        )


def _option_name(name: str) -> str:
    head, _, rest = name.partition("_")
    return f"{head}.{rest.replace('_', '-')}"


@dataclass(frozen=True)
class TableSpec:
    """The persisted definition of a table."""

    schema: pa.Schema
    record_key: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    ordering_field: str | None = None
    index: DynamicBucketOptions = field(default_factory=DynamicBucketOptions)
    options: TableOptions = field(default_factory=TableOptions)
    table_id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "record_key", tuple(self.record_key))
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        names = set(self.schema.names)
        reserved = sorted(names & RESERVED)
        if reserved:
            raise SchemaMismatchError(
                f"schema field(s) {reserved} use names dynbucket reserves for its own columns; "
                "rename them"
            )
        if not self.record_key:
            raise ConfigError("record_key is empty: name the field(s) that identify a record")
        for role, names_ in (("record_key", self.record_key), ("partition_by", self.partition_by)):
            missing = [n for n in names_ if n not in names]
            if missing:
                raise ConfigError(
                    f"{role} field(s) {missing} are not in the schema ({self.schema.names})"
                )
        for name in self.partition_by:
            check_partition_type(name, self.schema.field(name).type)
        if self.ordering_field is not None:
            if self.ordering_field not in names:
                raise ConfigError(
                    f"ordering_field={self.ordering_field!r} is not in the schema "
                    f"({self.schema.names})"
                )
            t = self.schema.field(self.ordering_field).type
            if not (
                pa.types.is_integer(t)
                or pa.types.is_floating(t)
                or pa.types.is_temporal(t)
                or pa.types.is_string(t)
                or pa.types.is_decimal(t)
            ):
                raise ConfigError(
                    f"ordering_field={self.ordering_field!r} has type {t}, which has no order; "
                    "use a number, timestamp, date or string field"
                )

    @property
    def data_fields(self) -> list[str]:
        """Fields stored in data files (partition fields live in the path)."""
        return [n for n in self.schema.names if n not in self.partition_by]

    def file_schema(self, delta: bool) -> pa.Schema:
        """Schema of base (``delta=False``) and delta data files."""
        out = pa.schema([self.schema.field(n) for n in self.data_fields])
        out = out.append(pa.field(HASH, pa.int64(), nullable=False))
        out = out.append(pa.field(INSTANT, pa.string(), nullable=False))
        return out.append(pa.field(OP, pa.int8(), nullable=False)) if delta else out

    def index_schema(self) -> pa.Schema:
        """Schema of record-level index files."""
        keys = [self.schema.field(n).with_nullable(False) for n in self.record_key]
        return pa.schema(
            [
                *keys,
                pa.field(HASH, pa.int64(), False),
                pa.field(BUCKET, pa.int32(), False),
                pa.field(FILE_ID, pa.string(), False),
                pa.field(INSTANT, pa.string(), False),
            ]
        )

    # --- persistence ---------------------------------------------------------------------

    def to_json(self) -> bytes:
        doc = {
            "format-version": FORMAT_VERSION,
            "table-id": self.table_id,
            "schema": base64.b64encode(self.schema.serialize().to_pybytes()).decode(),
            "schema-fields": [f"{f.name}: {f.type}" for f in self.schema],
            "record-key": list(self.record_key),
            "partition-by": list(self.partition_by),
            "ordering-field": self.ordering_field,
            "index": {"engine": INDEX_ENGINE, **self.index.to_properties()},
            "options": self.options.to_properties(),
        }
        return json.dumps(doc, indent=2).encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> TableSpec:
        try:
            doc = json.loads(data)
            version = doc["format-version"]
            if version != FORMAT_VERSION:
                raise TableCorruptedError(
                    f"{where}: table format version {version}; this dynbucket reads version "
                    f"{FORMAT_VERSION}: upgrade dynbucket"
                )
            engine = doc["index"].get("engine")
            if engine != INDEX_ENGINE:
                raise TableCorruptedError(
                    f"{where}: index engine {engine!r} is not {INDEX_ENGINE!r}"
                )
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["schema"])))
            return cls(
                schema=schema,
                record_key=tuple(doc["record-key"]),
                partition_by=tuple(doc["partition-by"]),
                ordering_field=doc["ordering-field"],
                index=DynamicBucketOptions.from_properties(
                    {k: v for k, v in doc["index"].items() if k != "engine"}
                ),
                options=TableOptions.from_properties(doc.get("options", {})),
                table_id=doc["table-id"],
            )
        except (KeyError, ValueError, TypeError) as e:
            raise TableCorruptedError(f"{where}: unreadable table properties ({e})") from e


def conform(data: pa.Table, schema: pa.Schema, required: Sequence[str] | None = None) -> pa.Table:
    """``data`` with the table's fields in schema order and types.

    Missing fields are an error (only ``required`` fields when given, the others become
    nulls); extra fields are an error; a type that differs is an error unless the cast is
    lossless (e.g. int32 into int64).

    Raises:
        SchemaMismatchError: naming each field that does not fit.
    """
    names = set(data.column_names)
    extra = sorted(names - set(schema.names))
    if extra:
        raise SchemaMismatchError(
            f"field(s) {extra} are not in the table schema ({schema.names}); drop them"
        )
    needed = schema.names if required is None else list(required)
    missing = [n for n in needed if n not in names]
    if missing:
        raise SchemaMismatchError(f"field(s) {missing} of the table schema are missing")
    columns = []
    for f in schema:
        if f.name not in names:
            columns.append(pa.nulls(data.num_rows, f.type))
            continue
        column = data.column(f.name)
        if column.type != f.type:
            try:
                column = column.cast(f.type, safe=True)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise SchemaMismatchError(
                    f"field {f.name!r} has type {column.type}; the table has {f.type} and the "
                    f"values do not convert without loss ({e}): cast them first"
                ) from e
        columns.append(column)
    return pa.Table.from_arrays(columns, schema=schema)
