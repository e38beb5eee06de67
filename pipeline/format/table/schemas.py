"""The table's schema over time: evolution on write, as Hudi's schema-on-write allows it.

A write whose records carry a new nullable field, or a field of a type the table's field
promotes to (Avro's schema resolution, which Hudi follows: int to long, float or double;
long to float or double; float to double; string to bytes and back; and a decimal's
precision up at the same scale), evolves the table's schema: the new field goes at the end,
the promoted field takes the records' type. Files are never rewritten for it: a read gives
an older file's rows the new fields as nulls and the promoted types (``merge.py``).

The instant that evolves the schema writes ``.hoodie/.dynbucket/schemas/<instant>.json``
(the exact Arrow schema) before its commit point, and its commit metadata carries the new
Avro schema as Hudi's writers record it (Hudi's readers take the latest commit's). A view
takes the newest schema file of an instant it sees (:func:`schema_as_of`), as it takes bucket
layouts: a read as of an instant before the change reads the old schema; a rolled-back
instant's file is never seen (and its rollback removes it).

What Hudi refuses stays refused (:func:`evolved`), naming the field, the two types and the
fix: a narrowed or otherwise changed type, a new field that may not be null, a change to a
key, partition or ordering field.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Collection, Mapping
from dataclasses import dataclass

import pyarrow as pa

from dynbucket.base.errors import ConcurrentWriteError, SchemaMismatchError, TableCorruptedError
from dynbucket.format.records.incoming import marker_fields, said_at_once, widens
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import SCHEMA_DIR
from dynbucket.format.table.spec import TableSpec


def promotes(old: pa.DataType, new: pa.DataType) -> bool:
    """Whether a field of type ``old`` may become ``new`` (Avro's promotions, Hudi's decimal
    rule; integer widths and float32/float64 as Avro's int/long and float/double)."""
    if old == new:
        return False
    if pa.types.is_integer(old) and pa.types.is_integer(new):
        return widens(old, new)
    if pa.types.is_integer(old) and pa.types.is_floating(new):
        return not pa.types.is_float16(new)
    if pa.types.is_floating(old) and pa.types.is_floating(new):
        return new.bit_width > old.bit_width
    if pa.types.is_decimal(old) and pa.types.is_decimal(new):
        return bool(new.scale == old.scale and new.precision > old.precision)
    text = (pa.types.is_string(old) or pa.types.is_large_string(old)) and (
        pa.types.is_binary(new) or pa.types.is_large_binary(new)
    )
    data = (pa.types.is_binary(old) or pa.types.is_large_binary(old)) and (
        pa.types.is_string(new) or pa.types.is_large_string(new)
    )
    return text or data


def _renamed(spec: TableSpec, incoming: pa.Schema, markers: Collection[str]) -> list[str]:
    """The key and partition fields every write needs that the records lack, each with the
    records' fields the table does not have of its type: a column renamed upstream."""
    schema, out = spec.schema, []
    new = [f for f in incoming if f.name not in schema.names and f.name not in markers]
    for name in [*spec.record_key, *spec.partition_by]:
        if name in incoming.names:
            continue
        role = "record key" if name in spec.record_key else "partition"
        want = schema.field(name).type
        like = [f.name for f in new if widens(f.type, want)]
        new = [f for f in new if f.name not in like]  # each offered once
        hint = (
            f"; the records have {', '.join(repr(n) for n in like)} ({want}), which the table "
            f"does not: renamed? give it as {name!r}"
            if like
            else ""
        )
        out.append(f"the {role} field {name!r} is missing{hint}")
    return out


def evolved(
    spec: TableSpec,
    incoming: pa.Schema,
    markers: Collection[str] = (),
    enabled: bool = True,
    whole: bool = False,
) -> pa.Schema:
    """The table's schema after records of ``incoming`` (their fields, types and
    nullability; ``markers``: fields read as delete markers, never stored): the same schema
    when nothing evolves. ``whole``: ``incoming`` is a write's records, which hold the
    key and partition fields (one they lack is said with the rest).

    Raises:
        SchemaMismatchError: a change Hudi does not make on write, or any change when
            evolution is off (``enabled`` false: ``schema.evolve-on-write``); nothing is
            written.
    """
    schema = spec.schema
    fields = list(schema)
    fixed = {*spec.record_key, *spec.partition_by, spec.ordering_field}
    off = (
        f"; schema evolution on write is off ({spec.options.key('evolve_on_write')}=false): "
        "turn it on to evolve the table"
    )
    problems = _renamed(spec, incoming, markers) if whole else []  # every one, said at once
    for f in incoming:
        if f.name in markers and f.name not in schema.names:
            continue
        if f.name not in schema.names:
            other = next((n for n in schema.names if n.lower() == f.name.lower()), None)
            if other is not None:
                problems.append(
                    f"fields {sorted([other, f.name])} differ only in case; Spark and Hudi's "
                    f"Spark writers take them for one field (their names are case-insensitive): "
                    f"give the field as {other!r}"
                )
                continue
            if not enabled:
                problems.append(
                    f"field {f.name!r} ({f.type}) is not in the table's schema "
                    f"({schema.names}){off}, or drop the field"
                )
            elif not f.nullable or pa.types.is_null(f.type):
                what = "may not be null" if not f.nullable else "is of type null (no values)"
                problems.append(
                    f"new field {f.name!r} {what}: a field added to a table must be nullable "
                    "and typed (older rows have no value of it): declare it nullable with a "
                    "type (cast an all-null column to its type)"
                )
            else:
                fields.append(f.with_nullable(True))
            continue
        old = schema.field(f.name)
        if widens(f.type, old.type):
            continue
        if not promotes(old.type, f.type):
            problems.append(
                f"field {f.name!r} has type {f.type}; the table has {old.type}, which may "
                "only widen on write (int to long or double, float to double, a decimal's "
                "precision up, string to bytes, ...): give the field as "
                f"{old.type} (or a type it widens to)"
            )
        elif f.name in fixed:
            problems.append(
                f"field {f.name!r} has type {f.type}; the table has {old.type}, and a key, "
                "partition or ordering field keeps its type (its values name records and "
                f"order them): give the field as {old.type} (cast it, if its values fit)"
            )
        elif not enabled:
            problems.append(
                f"field {f.name!r} has type {f.type}; the table has {old.type}{off}, or cast "
                f"the field to {old.type}"
            )
        else:
            fields[schema.get_field_index(f.name)] = old.with_type(f.type)
    if problems:
        raise SchemaMismatchError(said_at_once(problems))
    return pa.schema(fields, metadata=schema.metadata)


def write_schema(store: TableStore, instant: str, schema: pa.Schema) -> str:
    """Writes the schema file of ``instant`` (seen once the instant completes)."""
    path = store.path(SCHEMA_DIR, f"{instant}.json")
    doc = {
        "schema": base64.b64encode(schema.serialize().to_pybytes()).decode(),
        "schema-fields": [f"{f.name}: {f.type}" for f in schema],
    }
    store.write_atomic(path, json.dumps(doc, indent=1).encode())
    return path


def _changes(store: TableStore, visible: Collection[str]) -> list[str]:
    """The instants of the ``visible`` schema changes, oldest first."""
    names = sorted(i.base_name for i in store.list_files(store.path(SCHEMA_DIR)))
    instants = (n.removesuffix(".json") for n in names if n.endswith(".json"))
    return [i for i in instants if i in visible]


def history(store: TableStore, visible: Collection[str]) -> list[tuple[str, pa.Schema]]:
    """The schema changes of the ``visible`` instants, oldest first: (instant, schema)."""
    return [
        (i, _read(store, store.path(SCHEMA_DIR, f"{i}.json"))) for i in _changes(store, visible)
    ]


def schema_as_of(store: TableStore, spec: TableSpec, visible: Collection[str]) -> TableSpec:
    """``spec`` with the schema of the newest visible schema change (itself when none):
    one listing, and one file read (the newest change's, whatever the number of changes)."""
    changes = _changes(store, visible)
    if not changes:
        return spec
    schema = _read(store, store.path(SCHEMA_DIR, f"{changes[-1]}.json"))
    return spec if schema == spec.schema else spec.with_schema(schema)


def _read(store: TableStore, path: str) -> pa.Schema:
    try:
        doc: Mapping[str, str] = json.loads(store.read_bytes(path))
        return pa.ipc.read_schema(pa.py_buffer(base64.b64decode(doc["schema"])))
    except (OSError, ValueError, KeyError, pa.ArrowInvalid) as e:
        raise TableCorruptedError(
            f"{path}: unreadable schema file ({e}); restore it from a backup"
        ) from e


def current(store: TableStore, spec: TableSpec) -> TableSpec:
    """``spec`` (the table's definition) with the schema the table has now: one listing of
    the schema folder, and of the timeline only when the folder holds a change."""
    if not store.list_files(store.path(SCHEMA_DIR)):
        return spec
    from dynbucket.format.timeline.timeline import Timeline

    return schema_as_of(store, spec, Timeline(store, spec.options.merge_on_read).visible())


@dataclass(frozen=True)
class WriteSchema:
    """A write's schema: the table's when the write fitted its records (``seen``), and the
    one it writes (``spec``: evolved by its records, or the same)."""

    defined: TableSpec
    """The table's definition (``table.json``), whose schema the changes start from."""
    seen: pa.Schema
    spec: TableSpec

    @classmethod
    def of(cls, store: TableStore, defined: TableSpec, incoming: pa.Schema | None) -> WriteSchema:
        """The schema of a write of records of ``incoming`` (None: keys of deletes, which
        evolve nothing).

        Raises:
            SchemaMismatchError: records the table cannot take (:func:`evolved`).
        """
        now = current(store, defined)
        if incoming is None:
            return cls(defined, now.schema, now)
        markers = marker_fields(defined)
        schema = evolved(now, incoming, markers, defined.options.evolve_on_write, whole=True)
        if schema == now.schema:
            return cls(defined, now.schema, now)
        spec = now.with_schema(schema)
        spec.avro_schema()  # a new field with no Avro form is refused before any instant
        return cls(defined, now.schema, spec)

    @property
    def evolves(self) -> bool:
        return self.spec.schema != self.seen

    def begun(self, store: TableStore, instant: str, visible: Collection[str]) -> None:
        """At the write's instant ``instant`` (seeing ``visible``): checks that the schema
        is still the one its records were fitted to, and records the write's change.

        Raises:
            ConcurrentWriteError: another writer changed the schema since (write again).
        """
        now = schema_as_of(store, self.defined, visible).schema
        if now != self.seen:
            raise ConcurrentWriteError(
                f"the table's schema changed while this write prepared its records "
                f"(another writer evolved it, to {now.names}); nothing was written: write "
                "again"
            )
        if self.evolves:
            write_schema(store, instant, self.spec.schema)
