"""The persisted definition of a table: :class:`TableSpec`.

It holds the records' schema, the record key, partition and ordering fields, the bucket
options of the dynamic bucket index and the table options, and derives the schemas of the
files written (data and index files). Persisted at creation in two places:
``.hoodie/hoodie.properties`` (what Hudi readers need: name, type, version, keys, partition
fields, precombine field, schema, ...) and ``.hoodie/.dynbucket/table.json`` (what is
dynbucket's alone: the exact Arrow schema, bucket options, table options, the table's id).
Option names are dotted kebab-case (``cleaner.commits-retained``,
``dynamic-bucket.max-keys-per-bucket``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import re
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar, cast

import pyarrow as pa

from dynbucket.base.columns import BUCKET, FILE_ID, HASH, INSTANT, OP, RESERVED
from dynbucket.base.errors import (
    ConfigError,
    NotAdoptedError,
    NotATableError,
    SchemaMismatchError,
    TableCorruptedError,
    UnsupportedTableVersionError,
)
from dynbucket.base.options import (
    ENGINES,
    DynamicBucketIndex,
    IndexOptions,
)
from dynbucket.format.buckets.scheme import BucketScheme, scheme_of
from dynbucket.format.hudi import avro, properties, versions
from dynbucket.format.hudi.meta_fields import COMMIT_TIME, META_FIELDS
from dynbucket.format.metadata import partitions as mdt_partitions
from dynbucket.format.records.partitioning import check_partition_type
from dynbucket.format.records.timestamp_partitions import TimestampPartitioning
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.options import HUDI_TABLE_PROPERTIES, TableOptions
from dynbucket.format.table.paths import (
    OLD_LAYOUT_DIR,
    PROPERTIES_FILE,
    TABLE_FILE,
)
from dynbucket.format.timeline.timeline import remember_layout

_T = TypeVar("_T")
FORMAT_VERSION = 2
DATABASE = "default"
_NAME = re.compile(r"[^A-Za-z0-9_]")
#: Avro's rule for names, which Hudi's schemas (and so every field of a Hudi table) follow.
_AVRO_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class TableSpec:
    """The persisted definition of a table."""

    schema: pa.Schema
    record_key: tuple[str, ...]
    partition_by: tuple[str, ...] = ()
    ordering_field: str | None = None
    bucket_options: IndexOptions = field(default_factory=DynamicBucketIndex)
    """The bucket index: dynamic (assigner actors, a record-level index), simple or
    consistent hashing (``format/buckets/``)."""
    options: TableOptions = field(default_factory=TableOptions)
    table_id: str = ""
    name: str = "dynbucket_table"
    """The Hudi table name (``hoodie.table.name``): letters, digits and ``_``."""
    hive_style_partitioning: bool = True
    """Partition folders ``field=value`` (else ``value``: only a table Hudi wrote so, and
    dynbucket adopted, is written without; ``hoodie.datasource.write.hive_style_partitioning``)."""
    table_version: int = 6
    """The Hudi table version (``hoodie.table.version``): 6 for every table dynbucket
    creates; an adopted table keeps its own (6, 8 or 9)."""
    timestamp_partitioning: TimestampPartitioning | None = None
    """Partition paths made from the one partition field's time (a table Hudi wrote with
    its ``TimestampBasedKeyGenerator``, adopted); such a field is read from the files."""
    precombine_named: bool = True
    """Whether ``hoodie.properties`` names a precombine field (every table dynbucket creates
    does: the ordering field, else ``_hoodie_commit_time``); a table Hudi wrote without one
    orders a key's records by commit alone."""

    def __post_init__(self) -> None:
        if not self.name or _NAME.search(self.name):
            raise ConfigError(
                f"table name {self.name!r}: must be letters, digits and '_' only (Hudi uses "
                "it in schema names); give another name"
            )
        object.__setattr__(self, "bucket_options", self.bucket_options.persisted())
        object.__setattr__(self, "record_key", tuple(self.record_key))
        object.__setattr__(self, "partition_by", tuple(self.partition_by))
        # View types are Arrow's in-memory layouts of strings and bytes (Spark reads them
        # as such; most Arrow kernels do not take them): the table keeps the plain ones.
        object.__setattr__(self, "schema", _without_views(self.schema))
        names = set(self.schema.names)
        _check_field_names(self.schema, self.partition_by)
        reserved = sorted(names & (RESERVED | set(META_FIELDS)))
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
        if self.timestamp_partitioning is not None and len(self.partition_by) != 1:
            raise ConfigError(
                f"partition_by={list(self.partition_by)}: partition paths made from a time "
                "take one partition field"
            )
        for name in self.path_fields:
            check_partition_type(name, self.schema.field(name).type)
        for f in self.schema:
            if pa.types.is_timestamp(f.type) and f.type.unit == "ns":
                raise ConfigError(
                    f"field {f.name!r} has type {f.type}; Hudi stores timestamps in micro- or "
                    "milliseconds: use pa.timestamp('us') (cast the data first)"
                )
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
    def path_fields(self) -> tuple[str, ...]:
        """The partition fields whose values a partition path spells (readers take them
        from the path, not the files): all of them, but a time the path is made from."""
        return () if self.timestamp_partitioning is not None else self.partition_by

    @property
    def dynamic_options(self) -> DynamicBucketIndex:
        """The dynamic scheme's options: its assigners' configuration.

        Raises:
            ConfigError: the table's index is a stateless scheme (it has no assigners).
        """
        if not isinstance(self.bucket_options, DynamicBucketIndex):
            raise ConfigError(f"table's index is {self.scheme.name}: it has no assigners")
        return self.bucket_options

    @property
    def scheme(self) -> BucketScheme:
        """The table's bucket scheme (``format/buckets/scheme.py``): what a write and a
        read ask instead of which index the table has (made once)."""
        return self._derived("scheme", lambda: scheme_of(self.bucket_options))

    def field_types(self) -> dict[str, pa.DataType]:
        """Each table field's type in data files (``file_schema``'s), by name."""
        return self._derived("field-types", lambda: {f.name: f.type for f in self._data_fields()})

    def _data_fields(self) -> list[pa.Field]:
        return [f.with_type(storage_type(f.type)) for f in self.schema]

    def with_schema(self, schema: pa.Schema) -> TableSpec:
        """This definition with ``schema`` (an evolved schema: ``schemas.py``)."""
        return dataclasses.replace(self, schema=schema)

    @property
    def meta_fields(self) -> tuple[str, ...]:
        """The ``_hoodie_*`` meta fields data files carry (none when not populated)."""
        return META_FIELDS if self.options.populate_meta_fields else ()

    def file_schema(self) -> pa.Schema:
        """Schema of data files (base files, log data blocks): meta fields, then every field
        of the table (partition fields too, as Hudi writes them), each in the type its Avro
        schema reads as (``storage_type``)."""
        return self._derived("file-schema", self._file_schema)

    def _file_schema(self) -> pa.Schema:
        meta = [pa.field(n, pa.string()) for n in self.meta_fields]
        return pa.schema([*meta, *self._data_fields()])

    def _derived(self, name: str, make: Callable[[], _T]) -> _T:
        """What ``make`` derives from this (immutable) definition, made once: a write asks
        for the file schema and the Avro schema once per file it writes."""
        cache = self.__dict__.setdefault("_derived_cache", {})
        if name not in cache:
            cache[name] = make()
        return cast(_T, cache[name])

    def as_table_types(self, rows: pa.Table) -> pa.Table:
        """``rows`` read from data files, with the table's own types (losslessly: the
        values were written from them)."""
        for i, name in enumerate(rows.column_names):
            want = self.schema.field(name).type if name in self.schema.names else None
            if want is not None and rows.schema.field(i).type != want:
                rows = rows.set_column(i, name, rows.column(i).cast(want))
        return rows

    @property
    def precombine_field(self) -> str:
        """The field Hudi readers order a key's records by: the ordering field; without one,
        the commit time, so that the latest commit wins as it does here."""
        return self.ordering_field or COMMIT_TIME

    def avro_schema(self, meta_fields: bool = False) -> str:
        """The table's Avro schema, as Hudi's metadata carries it."""
        meta = self.meta_fields if meta_fields else ()
        return self._derived(f"avro-{meta}", lambda: avro.schema_json(self.schema, self.name, meta))

    def index_schema(self) -> pa.Schema:
        """Schema of record-level index files (``_op``: an insert entry or a tombstone)."""
        keys = [self.schema.field(n).with_nullable(False) for n in self.record_key]
        return pa.schema(
            [
                *keys,
                pa.field(HASH, pa.int64(), False),
                pa.field(BUCKET, pa.int32(), False),
                pa.field(FILE_ID, pa.string(), False),
                pa.field(INSTANT, pa.string(), False),
                pa.field(OP, pa.int8(), False),
            ]
        )

    # --- persistence ---------------------------------------------------------------------

    def hoodie_properties(self) -> dict[str, str]:
        """``hoodie.properties`` as Hudi writes it for a table version 6: every table
        dynbucket creates (an adopted table keeps the properties Hudi wrote)."""
        keys, parts = self.record_key, self.partition_by
        if not parts:
            keygen = "org.apache.hudi.keygen.NonpartitionedKeyGenerator"
        elif len(keys) == 1 and len(parts) == 1:
            keygen = "org.apache.hudi.keygen.SimpleKeyGenerator"
        else:
            keygen = "org.apache.hudi.keygen.ComplexKeyGenerator"
        payload = (
            "DefaultHoodieRecordPayload"
            if self.ordering_field
            else "OverwriteWithLatestAvroPayload"
        )
        props = {
            "hoodie.table.name": self.name,
            "hoodie.database.name": DATABASE,
            "hoodie.table.checksum": str(zlib.crc32(f"{DATABASE}.{self.name}".encode())),
            versions.TABLE_VERSION: versions.WRITTEN_VERSION,
            versions.TIMELINE_LAYOUT: versions.WRITTEN_LAYOUT,
            "hoodie.table.timeline.timezone": "UTC",
            "hoodie.archivelog.folder": "archived",
            "hoodie.table.base.file.format": "PARQUET",
            "hoodie.table.recordkey.fields": ",".join(keys),
            "hoodie.table.partition.fields": ",".join(parts),
            "hoodie.table.precombine.field": self.precombine_field,
            "hoodie.table.keygenerator.class": keygen,
            "hoodie.datasource.write.hive_style_partitioning": str(
                self.hive_style_partitioning
            ).lower(),
            "hoodie.datasource.write.partitionpath.urlencode": "false",
            "hoodie.datasource.write.drop.partition.columns": "false",
            "hoodie.compaction.payload.class": f"org.apache.hudi.common.model.{payload}",
            "hoodie.table.create.schema": self.avro_schema(),
            **self.options.hudi_properties(),
        }
        if self.table_version == 9:
            props.update(self._version_9_properties())
        return props

    @property
    def metadata_partitions(self) -> tuple[str, ...]:
        """The partitions of Hudi's metadata table a version 9 table keeps: the file
        listing, and where a scheme keeps an index of its keys, the record index."""
        if self.scheme.index_entries:
            return mdt_partitions.PARTITIONS
        return mdt_partitions.PARTITIONS[:1]

    @property
    def keeps_record_index(self) -> bool:
        """Whether the table may keep Hudi's record index (version 8 or 9, a scheme that
        indexes its keys): what it writes must fit the record index's files and keys."""
        return self.table_version >= 8 and self.scheme.index_entries

    @property
    def partitioned_record_index(self) -> bool:
        """Whether the record index of a version 9 table takes Hudi's partitioned layout:
        a key unique in its partition only (``metadata/record_index.py``)."""
        return bool(self.partition_by) and not self.scheme.keys_move

    def _version_9_properties(self) -> dict[str, str]:
        """What Hudi 1.1 writes instead (timeline layout 2, a merge mode and ordering
        fields for the payload class and precombine field) and beside (the metadata table)."""
        ordering = (
            {
                "hoodie.record.merge.mode": "EVENT_TIME_ORDERING",
                "hoodie.table.ordering.fields": self.ordering_field,
            }
            if self.ordering_field
            else {"hoodie.record.merge.mode": "COMMIT_TIME_ORDERING"}
        )
        return {
            versions.TABLE_VERSION: "9",
            "hoodie.table.initial.version": "9",
            versions.TIMELINE_LAYOUT: "2",
            "hoodie.timeline.path": "timeline",
            "hoodie.timeline.history.path": "history",
            "hoodie.table.precombine.field": "",
            "hoodie.compaction.payload.class": "",
            mdt_partitions.PARTITIONS_PROPERTY: ",".join(self.metadata_partitions),
            **ordering,
        }

    def to_json(self) -> bytes:
        """``.hoodie/.dynbucket/table.json``: what is dynbucket's alone."""
        doc = {
            "format-version": FORMAT_VERSION,
            "table-id": self.table_id,
            "schema": base64.b64encode(self.schema.serialize().to_pybytes()).decode(),
            "schema-fields": [f"{f.name}: {f.type}" for f in self.schema],
            "ordering-field": self.ordering_field,
            "precombine-named": self.precombine_named,
            "index": {"engine": self.scheme.name, **self.bucket_options.to_properties()},
            "options": self.options.own_properties(),
        }
        return json.dumps(doc, indent=2).encode()

    @classmethod
    def load(cls, hoodie: dict[str, str], own: bytes, where: str) -> TableSpec:
        """The definition from ``hoodie.properties`` and ``table.json``."""
        try:
            doc = json.loads(own)
            version = doc["format-version"]
            if version != FORMAT_VERSION:
                raise TableCorruptedError(
                    f"{where}: dynbucket table format version {version}; this dynbucket reads "
                    f"version {FORMAT_VERSION}: use the dynbucket that wrote it"
                )
            engine = doc["index"].get("engine")
            if engine not in ENGINES:
                raise TableCorruptedError(
                    f"{where}: index engine {engine!r} is not one of {sorted(ENGINES)}; "
                    "use the dynbucket that wrote it"
                )
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["schema"])))
            hudi_options = {k: v for k, v in hoodie.items() if k in HUDI_TABLE_PROPERTIES}
            return cls(
                schema=schema,
                record_key=tuple(_list(hoodie["hoodie.table.recordkey.fields"])),
                partition_by=tuple(_list(hoodie.get("hoodie.table.partition.fields", ""))),
                ordering_field=doc["ordering-field"],
                bucket_options=ENGINES[engine].from_properties(
                    {k: v for k, v in doc["index"].items() if k != "engine"}
                ),
                options=TableOptions.from_properties(
                    {**_LEGACY_OPTIONS, **doc.get("options", {}), **hudi_options}
                ),
                table_id=doc["table-id"],
                name=hoodie["hoodie.table.name"],
                hive_style_partitioning=hive_style(hoodie),
                precombine_named=bool(doc.get("precombine-named", precombine_named(hoodie))),
                timestamp_partitioning=timestamp_partitioning(hoodie),
                table_version=int(hoodie.get(versions.TABLE_VERSION, "6")),
            )
        except (KeyError, ValueError, TypeError) as e:
            raise TableCorruptedError(
                f"{where}: unreadable table properties ({type(e).__name__}: {e}); the table "
                f"definition ({PROPERTIES_FILE}, {TABLE_FILE}) is damaged: restore it"
            ) from e


def commit_time_ordering(hoodie: dict[str, str]) -> bool:
    """Whether a table Hudi wrote orders a key's records by commit alone: its merge mode
    says so (versions 8 on), or (version 6) its payload overwrites with the latest record,
    which Hudi 1.x takes as that mode whatever the precombine field."""
    mode = hoodie.get("hoodie.record.merge.mode")
    if mode is not None:
        return mode == "COMMIT_TIME_ORDERING"
    payload = hoodie.get("hoodie.compaction.payload.class", "")
    return payload.endswith(".OverwriteWithLatestAvroPayload")


def ordering_of(hoodie: dict[str, str]) -> str | None:
    """The field a table Hudi wrote orders a key's records by: the precombine field
    (version 9: the ordering fields, one of them), none when it orders by commit time."""
    if commit_time_ordering(hoodie):
        return None
    named = hoodie.get("hoodie.table.precombine.field") or hoodie.get(
        "hoodie.table.ordering.fields", ""
    )
    fields = _list(named)
    return fields[0] if len(fields) == 1 else None


def timestamp_partitioning(hoodie: dict[str, str]) -> TimestampPartitioning | None:
    """How ``hoodie.properties`` says partition paths are made from a time (None: from the
    partition fields' values)."""
    kind = hoodie.get("hoodie.table.keygenerator.type", "")
    keygen = hoodie.get("hoodie.table.keygenerator.class", "")
    if kind != "TIMESTAMP" and not keygen.endswith("TimestampBasedKeyGenerator"):
        return None
    return TimestampPartitioning.from_properties(hoodie)


def precombine_named(hoodie: dict[str, str]) -> bool:
    """Whether readers order a key's records by a field ``hoodie.properties`` names (not
    when it names none, or the merge mode orders by commit time)."""
    named = hoodie.get("hoodie.table.precombine.field") or hoodie.get(
        "hoodie.table.ordering.fields"
    )
    return bool(named) and hoodie.get("hoodie.record.merge.mode") != "COMMIT_TIME_ORDERING"


def adopted_precombine(hoodie: dict[str, str]) -> bool:
    """:func:`precombine_named` for a table Hudi wrote: not when it orders by commit."""
    return precombine_named(hoodie) and not commit_time_ordering(hoodie)


def hive_style(hoodie: dict[str, str]) -> bool:
    """Whether ``hoodie.properties`` says partition folders are ``field=value`` (Hudi's
    default is not; dynbucket always writes the property)."""
    return hoodie.get("hoodie.datasource.write.hive_style_partitioning", "false") == "true"


def same_but_case(names: Sequence[str]) -> list[str]:
    """The first names of ``names`` that differ from another only in case (none: [])."""
    seen: dict[str, set[str]] = {}
    for n in names:
        seen.setdefault(n.lower(), set()).add(n)
    return next((sorted(v) for v in seen.values() if len(v) > 1), [])


def _check_field_names(schema: pa.Schema, partition_by: tuple[str, ...]) -> None:
    """Field names must be Avro names (Hudi keeps the schema as Avro; its readers and
    writers refuse other names); a partition field's name is also a folder name
    (``name=value``), which must not be hidden from readers that skip ``_`` folders."""

    def check(f: pa.Field, where: str) -> None:
        if not _AVRO_NAME.match(f.name):
            raise ConfigError(
                f"field {f.name!r}{where}: field names must be letters, digits and '_', not "
                "starting with a digit (Hudi keeps the schema as Avro, whose names follow "
                f"that rule; partition fields also name folders): rename it, e.g. "
                f"{_suggest(f.name)!r}"
            )
        inner = f.type.value_type if pa.types.is_dictionary(f.type) else f.type
        for child in _children(inner):
            check(child, f" (in field {f.name!r})")

    for f in schema:
        check(f, "")
    cased = same_but_case(schema.names)
    if cased:
        raise ConfigError(
            f"fields {cased} differ only in case; Spark and Hudi's Spark writers take them for "
            "one field (their names are case-insensitive): rename or drop all but one"
        )
    for name in partition_by:
        if name in schema.names and name.startswith("_"):
            raise ConfigError(
                f"partition field {name!r}: a partition field's name may not start with '_' "
                "(its folders, '_name=value', are hidden from Parquet readers that skip '_' "
                f"folders): rename it, e.g. {name.lstrip('_') or 'part'!r}"
            )


def _children(t: pa.DataType) -> list[pa.Field]:
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _children(t.value_type)
    if pa.types.is_map(t):
        return _children(t.item_type)
    return []


def _suggest(name: str) -> str:
    clean = _NAME.sub("_", name).strip("_") or "field"
    return clean if not clean[0].isdigit() else f"f_{clean}"


def _without_views(schema: pa.Schema) -> pa.Schema:
    views = {pa.string_view(): pa.string(), pa.binary_view(): pa.binary()}
    if not any(f.type in views for f in schema):
        return schema
    fields = [f.with_type(views.get(f.type, f.type)) for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def storage_type(t: pa.DataType) -> pa.DataType:
    """The type a field is stored as in data files: the Arrow type of its Avro form, which
    Hudi readers read files as (small integers as int32, large or view strings as strings,
    a dictionary as its values, dates as days, fixed-size binary as binary, decimals in
    128 bits, timestamps as UTC instants in milli- or microseconds), as Spark writes it."""
    if pa.types.is_dictionary(t):
        return storage_type(t.value_type)
    if pa.types.is_date64(t):
        return pa.date32()
    if pa.types.is_fixed_size_binary(t):
        return pa.binary()
    if pa.types.is_decimal256(t):
        return pa.decimal128(t.precision, t.scale)
    if pa.types.is_integer(t) and t.bit_width < 32 or t == pa.uint16():
        return pa.int32()
    if t == pa.uint32():
        return pa.int64()
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_float16(t):
        return pa.float32()
    if pa.types.is_timestamp(t):
        return pa.timestamp("ms" if t.unit in ("s", "ms") else "us", "UTC")
    return t


def _list(text: str) -> list[str]:
    return [p for p in text.split(",") if p]


def table_name_for(uri: str) -> str:
    """A Hudi table name from a table's folder name (other characters become ``_``)."""
    base = uri.rstrip("/").rsplit("/", 1)[-1] or "dynbucket_table"
    name = _NAME.sub("_", base)
    return name if name[:1].isalpha() else f"t_{name}"


def load_table(store: TableStore) -> TableSpec:
    """The definition of the table at ``store``.

    Raises:
        NotATableError: no dynbucket table there (``NotAdoptedError``: a table Apache Hudi
            wrote).
        UnsupportedTableVersionError: a Hudi table version or timeline layout other than
            the one dynbucket writes (a Hudi 1.x writer upgraded the table).
        TableCorruptedError: a definition this version cannot read.
    """
    if store.exists(store.path(OLD_LAYOUT_DIR, "table.json")):
        raise TableCorruptedError(
            f"{store.uri} holds a table in dynbucket's first layout ({OLD_LAYOUT_DIR}/ at its "
            "root), which this version no longer reads (it writes Hudi tables); nothing of "
            "that layout was released, so there is no migration: write the data into a new "
            "table"
        )
    try:
        own = store.read_bytes(store.path(TABLE_FILE))
    except (FileNotFoundError, OSError) as e:
        if store.exists(store.path(PROPERTIES_FILE)):
            raise NotAdoptedError(
                f"{store.uri} holds a table written by Apache Hudi ({hudi_described(store)}), "
                f"not a dynbucket table (no {TABLE_FILE}) yet: {adoption_advice(store)}"
            ) from e
        if not store.exists(store.root):
            raise NotATableError(
                f"{store.uri} does not exist: check the path (or create a table there with "
                "Table.create)"
            ) from e
        raise NotATableError(
            f"{store.uri} is not a dynbucket table (no {TABLE_FILE}); create one with Table.create"
        ) from e
    try:
        hoodie = properties.loads(store.read_bytes(store.path(PROPERTIES_FILE)))
    except (FileNotFoundError, OSError) as e:
        raise TableCorruptedError(
            f"{store.uri}: {PROPERTIES_FILE} is missing: a Table.create may still be writing "
            "it (open the table again in a moment), or the creation did not finish or the "
            "file was removed (create the table again in a new folder)"
        ) from e
    # Before anything is read: a timeline of another layout would read as no instant.
    refused = versions.unsupported(hoodie, store.exists(store.path(versions.LAYOUT_2_TIMELINE)))
    if refused is not None:
        raise UnsupportedTableVersionError(versions.upgraded_message(store.uri, refused))
    caches.forget(store.uri, store.root)
    remember_layout(store, int(hoodie[versions.TIMELINE_LAYOUT]))
    mdt_partitions.remember(store, hoodie)
    return TableSpec.load(hoodie, own, store.uri)


#: Options a table created before they existed keeps at the value it was written under (a
#: default changed since: a table keeps the writer mode it was created with).
_LEGACY_OPTIONS = {"hoodie.write.concurrency.mode": "SINGLE_WRITER"}


def adoption_advice(store: TableStore) -> str:
    """What to do with a table Hudi wrote: adopt it, or (a version adoption does not take
    yet) read it with a Hudi reader."""
    try:
        hoodie = properties.loads(store.read_bytes(store.path(PROPERTIES_FILE)))
    except (OSError, ValueError):
        hoodie = {}
    if versions.unsupported(hoodie, store.exists(store.path(versions.LAYOUT_2_TIMELINE))):
        return (
            "dynbucket adopts Hudi table versions 6 (timeline layout 1), 8 and 9 (layout 2), "
            "not this one: read it with a Hudi reader "
            f"(hudi-rs: HudiTableBuilder.from_base_uri({store.uri!r}).build().read()), or "
            "write its rows into a new dynbucket table"
        )
    return (
        f"adopt it (Table.adopt({store.uri!r}), or dynbucket adopt {store.uri}): its files "
        "stay, dynbucket adds its index beside them"
    )


def hudi_described(store: TableStore) -> str:
    """The Hudi version and type of the table at ``store`` (its properties unread: said)."""
    try:
        return versions.describe(properties.loads(store.read_bytes(store.path(PROPERTIES_FILE))))
    except (OSError, ValueError):
        return f"its {PROPERTIES_FILE} does not read"
