"""A read's row filter (a pyarrow compute expression on the table's fields): checked once,
then used to skip what cannot match before anything is read.

1. Partitions: each partition path is a guarantee on the partition fields (``day ==
   "d1"``); a partition whose guarantee makes the filter false is not listed nor read
   (Arrow's own simplification decides, on a dataset of one placeholder per partition,
   so an expression of any shape prunes as far as it can, and never wrongly).
2. Row groups: base files read without logs are one dataset scan with the filter pushed
   down: Parquet statistics skip row groups, and each file's partition guarantee answers
   the partition fields (the path holds them).
3. Rows: a slice with logs is merged first and filtered after, so a row whose latest
   version fails the filter never comes back from an older one.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.fs as pafs

from dynbucket.base.errors import InvalidInputError
from dynbucket.format.records.partitioning import partition_columns
from dynbucket.format.table.spec import TableSpec


def check(spec: TableSpec, expression: pc.Expression) -> None:
    """Raises :class:`InvalidInputError` unless ``expression`` is a boolean expression of
    the table's fields."""
    if not isinstance(expression, pc.Expression):
        raise InvalidInputError(
            f"filter={expression!r}: a filter is a pyarrow compute expression, e.g. "
            '(pc.field("day") == "2024-01-01") & (pc.field("amount") > 10)'
        )
    try:
        spec.schema.empty_table().filter(expression)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        raise InvalidInputError(
            f"filter {expression}: {str(e).splitlines()[0]}; a filter is a boolean "
            "expression of the table's "
            f"fields ({', '.join(spec.schema.names)})"
        ) from e


def pushable(spec: TableSpec) -> bool:
    """Whether a filter can be pushed into a scan of data files (step 2): every field is
    stored in its table type (a field stored in its Avro form, as a dictionary as its
    values, would compare in another type)."""
    stored = spec.file_schema()
    return all(stored.field(f.name).type == f.type for f in spec.schema)


def guarantee(spec: TableSpec, partition: str) -> pc.Expression:
    """What the partition path ``partition`` says of the partition fields (true: the table
    has no fields its paths spell)."""
    if not spec.path_fields:
        return pc.scalar(True)
    values = partition_columns(
        partition, spec.schema, spec.path_fields, 1, spec.hive_style_partitioning
    )
    terms = [
        pc.field(name).is_null() if not column[0].is_valid else pc.field(name) == column[0]
        for name, column in zip(spec.path_fields, values, strict=True)
    ]
    out = terms[0]
    for term in terms[1:]:
        out = out & term
    return out


def matching_partitions(
    spec: TableSpec, partitions: Sequence[str], expression: pc.Expression
) -> list[str]:
    """The partitions of ``partitions`` whose rows may match ``expression`` (step 1)."""
    if not spec.path_fields or not partitions:
        return list(partitions)
    placeholders = [f"/{i}" for i in range(len(partitions))]  # never opened
    dataset = pads.FileSystemDataset.from_paths(
        placeholders,
        schema=spec.schema,
        format=pads.ParquetFileFormat(),
        filesystem=pafs.LocalFileSystem(),
        partitions=[guarantee(spec, p) for p in partitions],
    )
    kept = {f.path for f in dataset.get_fragments(filter=expression)}
    return [p for p, path in zip(partitions, placeholders, strict=True) if path in kept]
