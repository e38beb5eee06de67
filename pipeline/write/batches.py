"""Arrow batches of a Spark task joined into larger ones (pure pyarrow: also for the
in-process writer, which imports no Spark)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

import pyarrow as pa

#: Rows per actor call or bucket computation (Spark hands Python 10,000-row Arrow batches
#: by default; a call costs about a millisecond of Ray overhead whatever its size).
ROWS_PER_CALL = 65_536


def joined(batches: Iterable[pa.RecordBatch], rows: int) -> Iterator[pa.RecordBatch]:
    """The batches joined into batches of at least ``rows`` rows (the last may be short)."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        pending.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield _concat(pending)
            pending, count = [], 0
    if pending:
        yield _concat(pending)


def _concat(batches: list[pa.RecordBatch]) -> pa.RecordBatch:
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
