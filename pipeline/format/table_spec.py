"""The persisted definition of a table: :class:`TableSpec`.

It holds the records' schema, the record key, partition and ordering fields, the bucket
options of the dynamic bucket index and the table options, and derives the schemas of the
files written (data and index files). Persisted at creation as ``.dynbucket/table.json`` and
checked when a table is opened. Option names are dotted kebab-case
(``cleaner.commits-retained``, ``dynamic-bucket.max-keys-per-bucket``).
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field

import pyarrow as pa

from dynbucket.actors.errors import (
    ConfigError,
    NotATableError,
    SchemaMismatchError,
    TableCorruptedError,
    TableExistsError,
)
from dynbucket.actors.options import DynamicBucketOptions
from dynbucket.pipeline.format.columns import BUCKET, FILE_ID, HASH, INSTANT, OP, RESERVED
from dynbucket.pipeline.format.options import TableOptions
from dynbucket.pipeline.format.partitioning import check_partition_type
from dynbucket.pipeline.format.storage import TableStore
from dynbucket.pipeline.format.timeline import META_DIR

TABLE_FILE = f"{META_DIR}/table.json"
FORMAT_VERSION = 1
INDEX_ENGINE = "dynamic-bucket"


@dataclass(frozen=True)
class TableSpec:
    """The persisted definition of a table."""

    schema: pa.Schema
    record_key: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    ordering_field: str | None = None
    bucket_options: DynamicBucketOptions = field(default_factory=DynamicBucketOptions)
    options: TableOptions = field(default_factory=TableOptions)
    table_id: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "bucket_options", self.bucket_options.persisted())
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
            "index": {"engine": INDEX_ENGINE, **self.bucket_options.to_properties()},
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
                bucket_options=DynamicBucketOptions.from_properties(
                    {k: v for k, v in doc["index"].items() if k != "engine"}
                ),
                options=TableOptions.from_properties(doc.get("options", {})),
                table_id=doc["table-id"],
            )
        except (KeyError, ValueError, TypeError) as e:
            raise TableCorruptedError(f"{where}: unreadable table properties ({e})") from e


def create_table(store: TableStore, spec: TableSpec) -> None:
    """Persists a new table's definition at ``store``.

    Raises:
        TableExistsError: a table (or any other file) is already there.
    """
    if store.exists(store.path(TABLE_FILE)):
        raise TableExistsError(f"a dynbucket table already exists at {store.uri}; open it")
    others = [i.path for i in store.list_files(store.root)] + store.list_dirs(store.root)
    if others:
        raise TableExistsError(
            f"{store.uri} is not empty ({len(others)} entries, e.g. {others[0]!r}); create "
            "the table in an empty or new folder"
        )
    if not store.create_exclusive(store.path(TABLE_FILE), spec.to_json()):
        raise TableExistsError(f"another process created a table at {store.uri} just now")


def load_table(store: TableStore) -> TableSpec:
    """The definition of the table at ``store``.

    Raises:
        NotATableError: no dynbucket table there.
        TableCorruptedError: a definition this version cannot read.
    """
    try:
        data = store.read_bytes(store.path(TABLE_FILE))
    except (FileNotFoundError, OSError) as e:
        raise NotATableError(
            f"{store.uri} is not a dynbucket table (no {TABLE_FILE}); create one with Table.create"
        ) from e
    return TableSpec.from_json(data, store.uri)
