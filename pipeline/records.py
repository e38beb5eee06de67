"""Records on their way into a table: checked, keyed, deduplicated, and written per file group.

Shared by the in-process writer and the Spark stages, so both accept and refuse the same
input and write the same files.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.pipeline.errors import InvalidInputError, NullKeyError
from dynbucket.pipeline.keyhash import hash_columns
from dynbucket.pipeline.layout import base_name, delta_name
from dynbucket.pipeline.merge import dedupe_batch
from dynbucket.pipeline.partitioning import partition_paths
from dynbucket.pipeline.spec import DELETE, HASH, INSTANT, OP, PARTITION, UPSERT, TableSpec, conform
from dynbucket.pipeline.storage import TableStore
from dynbucket.pipeline.transaction import WrittenFile


def prepare(spec: TableSpec, data: pa.Table, *, deletes: bool = False) -> pa.Table:
    """Checks records and adds ``_partition``, ``_hash`` and ``_op``; one record per key.

    Upserts need every field of the schema; deletes need the key and partition fields.

    Raises:
        SchemaMismatchError, NullKeyError, InvalidInputError, InvalidPartitionValueError:
            nothing is written.
    """
    required = [*spec.record_key, *spec.partition_by] if deletes else None
    data = conform(data, spec.schema, required=_unique(required) if required else None)
    return dedupe(spec, annotate(spec, data, deletes=deletes), deletes=deletes)


def annotate(spec: TableSpec, data: pa.Table, *, deletes: bool, with_hash: bool = True) -> pa.Table:
    """Checks keys (and ordering values) and adds ``_partition``, ``_hash`` (unless the rows
    carry it, as from Spark) and ``_op``."""
    for name in spec.record_key:
        _no_nulls(data, name, NullKeyError, "record key field", "every record needs a key")
    if spec.ordering_field is not None and not deletes:
        _no_nulls(data, spec.ordering_field, InvalidInputError, "ordering field",
                  "give every record an ordering value (larger wins on merge)")  # fmt: skip
    data = data.append_column(PARTITION, partition_paths(data, spec.partition_by))
    if with_hash:
        hashes = hash_columns([data.column(k) for k in spec.record_key], spec.record_key)
        data = data.append_column(HASH, pa.array(hashes))
    op = DELETE if deletes else UPSERT
    return data.append_column(OP, pa.repeat(pa.scalar(op, pa.int8()), data.num_rows))


def dedupe(spec: TableSpec, rows: pa.Table, *, deletes: bool) -> pa.Table:
    """One record per (partition, key): for upserts the largest ordering value, ties to the
    last row; for deletes the first."""
    if deletes:
        return rows.take(_first_of_each(rows, spec))
    return dedupe_batch(rows, spec, [PARTITION, *spec.record_key])


def insert_conflict(known: int, sample: list[dict[str, object]]) -> InvalidInputError:
    """The error of an insert that met keys the table already has."""
    return InvalidInputError(
        f"insert: {known} key(s) already exist in the table (e.g. {sample}); use upsert to "
        "update them (a deleted key keeps its bucket and counts as existing)"
    )


def _first_of_each(data: pa.Table, spec: TableSpec) -> pa.Array:
    """Row positions keeping one delete per (partition, key)."""
    rows = pa.array(range(data.num_rows), pa.int64())
    grouped = (
        data.append_column("_row", rows)
        .group_by([PARTITION, *spec.record_key], use_threads=False)
        .aggregate([("_row", "min")])
    )
    return grouped.column("_row_min").combine_chunks().sort()


def _no_nulls(data: pa.Table, name: str, error: type[Exception], role: str, fix: str) -> None:
    column = data.column(name)
    if column.null_count:
        first = pc.index(pc.is_null(column), True).as_py()
        raise error(
            f"{role} {name!r} is null in {column.null_count} row(s) (first at row {first}); "
            f"{fix}. Nothing was written."
        )


def write_group(
    store: TableStore,
    spec: TableSpec,
    instant: str,
    partition: str,
    file_id: str,
    rows: pa.Table,
    new_group: bool,
) -> WrittenFile:
    """Writes one file group's records of an instant, sorted by key.

    A new group's first write is a base file (when it holds only upserts); any later write is
    one delta file, and the base is never rewritten.
    """
    rows = rows.take(pc.sort_indices(rows, [(k, "ascending") for k in spec.record_key]))
    rows = rows.append_column(INSTANT, pa.repeat(pa.scalar(instant), rows.num_rows))
    as_base = new_group and bool(pc.all(pc.equal(rows.column(OP), UPSERT)).as_py())
    schema = spec.file_schema(delta=not as_base)
    rows = rows.select(schema.names).cast(schema)
    name = base_name(file_id, instant) if as_base else delta_name(file_id, instant)
    path = store.path(partition, name)
    size = store.write_parquet(path, rows)
    return WrittenFile(
        partition,
        path,
        "base" if as_base else "delta",
        rows.num_rows,
        size,
        file_id,
        int(file_id[:8]),
    )


def _unique(names: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(names))
