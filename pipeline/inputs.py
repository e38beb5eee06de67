"""What a write takes: a pyarrow Table, a Spark DataFrame, and what converts to a pyarrow
Table without a copy a user would notice (a pandas DataFrame; any object that exports the
Arrow C stream interface, ``__arrow_c_stream__``: a polars DataFrame, a DuckDB result, a
pyarrow ``RecordBatchReader``; a pyarrow ``RecordBatch``).

The converted table goes the way a pyarrow Table goes (written in this process), so the
same type rules hold: a field must have the table's type or one that widens to it
without loss, whatever library made the rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Union

import pyarrow as pa

from dynbucket.base.errors import InvalidInputError

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame


class ArrowStream(Protocol):
    """An object that exports the Arrow C stream interface (a polars DataFrame, ...)."""

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any: ...


#: The rows a write takes (the module doc).
Rows = Union[pa.Table, pa.RecordBatch, "DataFrame", "pd.DataFrame", ArrowStream]  # noqa: UP007

#: What ``upsert``/``insert``/``delete`` take, as their errors name it.
TAKES = (
    "a pyarrow Table or RecordBatch, a Spark DataFrame, a pandas DataFrame, or any object "
    "with __arrow_c_stream__ (a polars DataFrame, a DuckDB result, a RecordBatchReader)"
)


def is_spark(data: Any) -> bool:
    """Whether ``data`` is a Spark DataFrame (checked without importing Spark)."""
    return hasattr(data, "sparkSession") and hasattr(data, "mapInArrow")


def as_arrow(data: Any, operation: str) -> pa.Table:
    """``data`` as a pyarrow Table (``data`` is no Spark DataFrame: see :func:`is_spark`).

    Raises:
        InvalidInputError: ``data`` is of none of the kinds of the module doc.
    """
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if _is_pandas(data):
        # A named index (``df.set_index("id")``) holds a field; an unnamed one is row
        # numbers, which the table has no field for.
        named = any(name is not None for name in data.index.names)
        table = pa.Table.from_pandas(data, preserve_index=named)
        return table.replace_schema_metadata(None)
    if hasattr(data, "__arrow_c_stream__"):
        return pa.RecordBatchReader.from_stream(data).read_all()
    if hasattr(data, "__arrow_c_array__"):
        return pa.Table.from_batches([pa.record_batch(data)])
    raise InvalidInputError(f"{operation} takes {TAKES}, not {type(data).__name__}")


def _is_pandas(data: Any) -> bool:
    kind = type(data)
    return kind.__name__ == "DataFrame" and kind.__module__.split(".")[0] == "pandas"
