"""Records on their way into a table: fitted to the schema, checked, keyed, de-duplicated.

Shared by the in-process writer and the Spark stages, so that both accept and refuse the same
input: :func:`fit_types` is the one rule for types (a field's type must be the table's or
widen to it without loss; nothing is cast by value), and :func:`annotate` the one check of
keys, ordering values and partition values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.columns import DELETE, HASH, IS_DELETE, IS_NEW, OP, PARTITION, UPSERT
from dynbucket.base.errors import InvalidInputError, NullKeyError, SchemaMismatchError
from dynbucket.base.keyhash import key_hashes
from dynbucket.format.file_group.merge import dedupe_batch
from dynbucket.format.hudi.meta_fields import IS_DELETED, key_text, record_keys
from dynbucket.format.metadata.record_index import check_fits
from dynbucket.format.records.partitioning import partition_paths
from dynbucket.format.table.spec import TableSpec, same_but_case

#: What a refused write's error says came of it.
NOTHING_WRITTEN = "Nothing was written."


def widens(have: pa.DataType, want: pa.DataType) -> bool:
    """Whether every value of type ``have`` converts to ``want`` without loss.

    Integers to integers that hold every value (unsigned to signed only when wider), floats
    to floats as wide, timestamps to a unit as fine (any zone label: the instant is the
    same), strings and binaries to their large or view forms and back, dictionary-encoded
    values as their value type, and a column of nulls (type null) to any type.
    """
    if have == want or pa.types.is_null(have):
        return True
    if pa.types.is_dictionary(have):
        return widens(have.value_type, want)
    if pa.types.is_integer(have) and pa.types.is_integer(want):
        signed_have, signed_want = (pa.types.is_signed_integer(t) for t in (have, want))
        if signed_have and not signed_want:
            return False
        # An unsigned value needs a bit more room as a signed one (uint32 fits int64).
        return want.bit_width >= have.bit_width + (1 if signed_want and not signed_have else 0)
    if pa.types.is_floating(have) and pa.types.is_floating(want):
        return want.bit_width >= have.bit_width
    if pa.types.is_timestamp(have) and pa.types.is_timestamp(want):
        return _UNITS.index(want.unit) >= _UNITS.index(have.unit)
    return _text_kind(have) is not None and _text_kind(have) == _text_kind(want)


_UNITS = ("s", "ms", "us", "ns")


def _text_kind(t: pa.DataType) -> str | None:
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    return None


def fit_types(
    have: Mapping[str, pa.DataType],
    schema: pa.Schema,
    required: Sequence[str] | None = None,
    markers: Sequence[str] = (),
    done: str = NOTHING_WRITTEN,
) -> list[str]:
    """Checks records' field types against the table's; returns the fields to cast.

    Args:
        have: the records' fields and their Arrow types (a Spark DataFrame's as Arrow).
        schema: the table's schema.
        required: fields that must be present (default: all; the others become nulls).
        markers: fields the records may carry beyond the schema: delete markers
            (:func:`marker_fields`), read and not stored.
        done: what the error says came of the call (a lookup writes nothing anyway).

    Raises:
        SchemaMismatchError: naming extra fields, missing fields, or a field whose type does
            not widen to the table's, with the fix.
    """
    marker = have.get(IS_DELETED)
    if IS_DELETED in markers and marker is not None and not widens(marker, pa.bool_()):
        raise SchemaMismatchError(
            f"field {IS_DELETED!r} has type {marker}; it is Hudi's delete marker (true: the "
            "record deletes its key), a boolean: cast it to bool (or rename the field if it "
            "is not a delete marker). Nothing was written."
        )
    problems = []  # every one, said at once
    extra = sorted(set(have) - set(schema.names) - set(markers))
    if extra:
        problems.append(f"field(s) {extra} are not in the table schema ({schema.names}); drop them")
    needed = schema.names if required is None else list(dict.fromkeys(required))
    missing = [n for n in needed if n not in have]
    if missing:
        fix = "give them"
        if required is None:  # an upsert of whole rows
            fix = (
                "give them; or make a partial upsert (upsert(..., partial=True); "
                "`dynbucket ingest --partial`) to keep the values the table holds of them "
                "(new keys get nulls); or set hoodie.write.set.null.for.missing.columns to "
                "write nulls"
            )
        problems.append(f"field(s) {missing} of the table schema are missing: {fix}")
    cast = []
    for f in schema:
        if f.name not in have or have[f.name] == f.type:
            continue
        if not widens(have[f.name], f.type):
            problems.append(
                f"field {f.name!r} has type {have[f.name]}; the table has {f.type}, and only "
                "widening conversions are made: cast the field to "
                f"{f.type} before writing, if its values fit"
            )
        cast.append(f.name)
    if problems:
        raise SchemaMismatchError(said_at_once(problems, done))
    return cast


def said_at_once(problems: list[str], done: str = NOTHING_WRITTEN) -> str:
    """One message of every problem found with records' fields (a user fixes them all in
    one go, not one per attempt), and ``done``."""
    if len(problems) == 1:
        return f"{problems[0]}. {done}"
    listed = "; ".join(f"({i}) {p}" for i, p in enumerate(problems, start=1))
    return f"{len(problems)} problems with the records' fields: {listed}. {done}"


def unique_fields(names: Sequence[str]) -> None:
    """Records name each field once: which of two columns of one name is the field would
    be a guess (a value could land in the wrong column).

    Raises:
        SchemaMismatchError: naming the fields named more than once, with the fix.
    """
    twice = sorted({n for n in names if list(names).count(n) > 1})
    if twice:
        raise SchemaMismatchError(
            f"field(s) {twice} appear more than once in the records ({list(names)}); keep one "
            "column of each name (drop or rename the others). Nothing was written."
        )
    cased = same_but_case(names)
    if cased:
        raise SchemaMismatchError(
            f"fields {cased} differ only in case; Spark and Hudi's Spark writers take them for "
            "one field (their names are case-insensitive): rename or drop all but one. "
            "Nothing was written."
        )


def marker_fields(spec: TableSpec) -> list[str]:
    """Fields of incoming records that mark a record as a delete of its key: Hudi's
    ``_hoodie_is_deleted`` (true), and the table's ``hoodie.payload.delete.field`` (holding
    ``hoodie.payload.delete.marker``)."""
    field = spec.options.delete_field
    return [IS_DELETED] if field is None else [IS_DELETED, field]


def delete_flags(spec: TableSpec, data: pa.Table) -> pa.Array | None:
    """Per record, whether its markers (:func:`marker_fields`) make it a delete; None when
    ``data`` carries no marker field. A null marker is not a delete."""
    flags: pa.Array | None = None
    if IS_DELETED in data.column_names:
        flags = pc.fill_null(data.column(IS_DELETED).cast(pa.bool_()), False)
    field, marker = spec.options.delete_field, spec.options.delete_marker
    if field is not None and field in data.column_names:
        text = pc.cast(data.column(field), pa.string())
        hit = pc.fill_null(pc.equal(text, pa.scalar(marker, pa.string())), False)
        flags = hit if flags is None else pc.or_(flags, hit)
    if isinstance(flags, pa.ChunkedArray):
        flags = flags.combine_chunks()
    return flags


def conform(
    data: pa.Table,
    spec: TableSpec,
    required: Sequence[str] | None = None,
    done: str = NOTHING_WRITTEN,
) -> pa.Table:
    """``data`` with the table's fields in schema order and types (:func:`fit_types`'s rule;
    fields left out become nulls), and ``_is_delete`` when it carries a delete marker."""
    schema = spec.schema
    unique_fields(data.column_names)
    have = {f.name: f.type for f in data.schema}
    fit_types(have, schema, required, marker_fields(spec), done)
    columns = [
        data.column(f.name).cast(f.type) if f.name in have else pa.nulls(data.num_rows, f.type)
        for f in schema
    ]
    out = pa.Table.from_arrays(columns, schema=schema)
    flags = delete_flags(spec, data)
    return out if flags is None else out.append_column(IS_DELETE, flags)


def required_fields(spec: TableSpec, deletes: bool, partial: bool = False) -> list[str] | None:
    """Fields a write must carry: all for upserts; the key and partition fields for deletes;
    those and the ordering field for a partial upsert (or an upsert whose missing fields
    become nulls: ``hoodie.write.set.null.for.missing.columns``)."""
    identity = [*spec.record_key, *spec.partition_by]
    if deletes:
        return list(spec.scheme.identity(spec.record_key, spec.partition_by))
    if partial or spec.options.null_for_missing_columns:
        ordering = [spec.ordering_field] if spec.ordering_field else []
        return list(dict.fromkeys([*identity, *ordering]))
    return None


def kept_fields(spec: TableSpec, present: Sequence[str], partial: bool) -> tuple[str, ...]:
    """The table's fields a partial upsert's records lack (``present``: their fields): a
    known key keeps the values the table holds of them."""
    if not partial:
        return ()
    spec.scheme.refuse_partial()
    return tuple(n for n in spec.schema.names if n not in set(present))


def prepare(
    spec: TableSpec,
    data: pa.Table,
    *,
    deletes: bool = False,
    insert: bool = False,
    kept: Sequence[str] = (),
    done: str = NOTHING_WRITTEN,
) -> pa.Table:
    """Fits records to the schema, checks them and adds ``_partition``, ``_hash`` and ``_op``.

    Upserts need every field of the schema but those a partial upsert keeps (``kept``, see
    :func:`kept_fields`: null here, filled by the file-group writer); deletes need the key
    and partition fields.

    Raises:
        SchemaMismatchError, NullKeyError, InvalidInputError, InvalidPartitionValueError:
            nothing is written.
    """
    data = conform(data, spec, required_fields(spec, deletes, bool(kept)), done)
    return annotate(spec, data, deletes=deletes, insert=insert, kept=kept)


def annotate(
    spec: TableSpec,
    data: pa.Table,
    *,
    deletes: bool,
    with_hash: bool = True,
    insert: bool = False,
    kept: Sequence[str] = (),
) -> pa.Table:
    """Checks keys, ordering values and fields that may not be null, and adds
    ``_partition``, ``_hash`` (unless the rows carry it, as from Spark) and ``_op``: a
    delete where ``_is_delete`` (the records' delete marker, dropped here) says so.

    A record marked as a delete needs its key, partition and ordering values only (its
    ordering value decides whether it wins, as an update's does).

    Raises:
        InvalidInputError: also an insert (``insert``) holding records marked as deletes.
    """
    marked = data.column(IS_DELETE).combine_chunks() if IS_DELETE in data.column_names else None
    if marked is not None:
        data = data.drop_columns([IS_DELETE])
        if deletes and not pc.all(marked).as_py():
            unmarked = pc.invert(marked)
            raise InvalidInputError(
                f"delete: {int(pc.sum(unmarked).as_py())} record(s) are marked as not deletes "
                f"({IS_DELETED!r} false or null, or the table's "
                f"{spec.options.key('delete_field')} not holding its marker) (first at row "
                f"{pc.index(unmarked, True).as_py()}); delete deletes every key it is given: "
                "drop those records, or write the records with upsert, which applies each "
                "record's marker. Nothing was written."
            )
        if deletes or not pc.any(marked).as_py():
            marked = None
    if marked is not None and insert:
        count = int(pc.sum(marked).as_py())
        raise InvalidInputError(
            f"insert: {count} record(s) are marked as deletes ({IS_DELETED!r} true, or the "
            f"table's {spec.options.key('delete_field')}) (first at row "
            f"{pc.index(marked, True).as_py()}); an insert only adds keys: write the records "
            "with upsert, which applies their upserts and deletes in one instant. Nothing "
            "was written."
        )
    for name in spec.record_key:
        _no_nulls(data, name, NullKeyError, "record key field", "every record needs a key")
    if len(spec.record_key) > 1:
        _unambiguous_keys(data, spec.record_key)
    if not deletes:
        if spec.ordering_field is not None:
            _no_nulls(
                data,
                spec.ordering_field,
                InvalidInputError,
                "ordering field",
                "give every record an ordering value (larger wins on merge)",
            )
            _no_nans(data, spec.ordering_field)
        for f in spec.schema:  # a kept field is filled from the table later
            if not f.nullable and f.name not in spec.record_key and f.name not in kept:
                _no_nulls(
                    data,
                    f.name,
                    InvalidInputError,
                    "field",
                    "give every record a value",
                    ", which the table's schema says may not be null,",
                    among=None if marked is None else pc.invert(marked),
                )
    if deletes and spec.scheme.keys_move:
        # The key alone finds its row, wherever it is: partition values are not read.
        paths = pa.array([""] * data.num_rows, pa.string())
    else:
        paths = partition_paths(
            data, spec.partition_by, spec.hive_style_partitioning, spec.timestamp_partitioning
        )
    if spec.keeps_record_index and not deletes:
        check_fits(paths, record_keys(data, spec.record_key), spec.partitioned_record_index)
    data = data.append_column(PARTITION, paths)
    if with_hash:
        data = data.append_column(HASH, pa.array(key_hashes(data, spec.record_key)))
    if marked is not None:
        ops = pc.if_else(marked, pa.scalar(DELETE, pa.int8()), pa.scalar(UPSERT, pa.int8()))
        return data.append_column(OP, ops)
    op = DELETE if deletes else UPSERT
    return data.append_column(OP, pa.repeat(pa.scalar(op, pa.int8()), data.num_rows))


def dedupe(
    spec: TableSpec, rows: pa.Table, *, deletes: bool, by_partition: bool = True
) -> pa.Table:
    """One record per (partition, key): for upserts, and upserts and deletes marked in
    records, the largest ordering value, ties to the last row; for a delete write's keys
    the first. Rows whose key hashes all differ (the common case)
    come back as they are, without comparing keys. Rows without ``_partition`` are of one
    partition (a file group's); ``by_partition`` False: one record per key whatever its
    partition (a global index's write, before its keys are assigned)."""
    if HASH in rows.column_names and _distinct(rows.column(HASH)):
        return rows
    scoped = by_partition and PARTITION in rows.column_names
    keys = [PARTITION, *spec.record_key] if scoped else spec.record_key
    if deletes:
        return rows.take(_first_of_each(rows, keys))
    return dedupe_batch(rows, spec, list(keys))


def _distinct(hashes: pa.ChunkedArray) -> bool:
    """Whether every hash differs (then every key does; equal hashes of different keys
    only cost the exact path)."""
    values = np.sort(hashes.to_numpy())
    return not bool(np.any(values[1:] == values[:-1]))


def insert_conflict(known: int, sample: list[dict[str, object]]) -> InvalidInputError:
    """The error of an insert that met keys the table already has."""
    return InvalidInputError(
        f"insert: {known} key(s) already exist in the table (e.g. {sample}); use upsert to "
        "update them (a key deleted before is not in the table: inserting it again is fine)"
    )


def refuse_known(
    tagged: pa.RecordBatch | pa.Table, key_fields: Sequence[str], known: pa.Array | None = None
) -> None:
    """An insert's check of its rows, the same on every write path: a key the table has
    (``known``; by default where the assigner tagged ``_is_new`` false) fails the write
    with :func:`insert_conflict`, naming a few."""
    if known is None:
        known = pc.invert(tagged.column(IS_NEW))
    if pc.any(known).as_py():
        sample = tagged.filter(known).select(list(key_fields)).slice(0, 3).to_pylist()
        raise insert_conflict(int(pc.sum(known).as_py()), sample)


def _first_of_each(data: pa.Table, keys: Sequence[str]) -> pa.Array:
    """Row positions keeping one delete per key (``keys``: the fields that make it one)."""
    rows = pa.array(range(data.num_rows), pa.int64())
    grouped = (
        data.append_column("#row", rows)  # not an Avro name: no field is named so
        .group_by(list(keys), use_threads=False)
        .aggregate([("#row", "min")])
    )
    return grouped.column("#row_min").combine_chunks().sort()


def _no_nans(data: pa.Table, name: str) -> None:
    """NaN is refused as an ordering value: merges compare ordering values, and NaN
    compares as nothing else does (IEEE: never larger; Java: larger than everything)."""
    column = data.column(name)
    if not pa.types.is_floating(column.type):
        return
    nans = pc.is_nan(column)
    count = int(pc.sum(nans).as_py() or 0)
    if count:
        first = pc.index(nans, True).as_py()
        raise InvalidInputError(
            f"ordering field {name!r} is NaN in {count} row(s) (first at row {first}); an "
            "ordering value decides which record wins a merge, and NaN orders unlike any "
            "number (never larger by IEEE, larger than all by Java's compareTo, which Hudi "
            "uses): give a number. Nothing was written."
        )


def _unambiguous_keys(data: pa.Table, key_fields: Sequence[str]) -> None:
    """With several key fields a record's identity is Hudi's record key text,
    ``k1:v1,k2:v2``, by which every Hudi reader merges; a ``,`` in a value makes two
    different keys one text (``k1="x,k2:y", k2="z"`` and ``k1="x", k2="y,k2:z"``), so such
    values are refused rather than read as one record by Hudi and as two by the writer."""
    for name in key_fields:
        text = key_text(data.column(name))
        hit = pc.match_substring(text, ",")
        if pc.any(hit).as_py():
            first = pc.index(hit, True).as_py()
            raise InvalidInputError(
                f"record key field {name!r} has the value {text[first].as_py()!r} (row "
                f"{first}), which holds ','; with several key fields Hudi's record key is "
                f"'{':…,'.join(key_fields)}:…', and a ',' in a value lets two different keys "
                "spell one record key (Hudi's readers would merge them into one record): use "
                "key values without ',' (or one key field). Nothing was written."
            )


def _no_nulls(
    data: pa.Table,
    name: str,
    error: type[Exception],
    role: str,
    fix: str,
    why: str = "",
    among: pa.Array | None = None,
) -> None:
    """Raises when ``name`` is null in a row (of those ``among`` marks, if given)."""
    column = data.column(name)
    if not column.null_count:
        return
    nulls = pc.is_null(column)
    if among is not None:
        nulls = pc.and_(nulls, among)
    count = int(pc.sum(nulls).as_py() or 0)
    if count:
        first = pc.index(nulls, True).as_py()
        raise error(
            f"{role} {name!r}{why} is null in {count} row(s) (first at row "
            f"{first}); {fix}. Nothing was written."
        )
