"""What a write takes (``pipeline/inputs.py``): a pandas DataFrame, a polars DataFrame, any
Arrow C stream and a RecordBatch write the same rows as the equivalent pyarrow Table; what
is none of them is refused by name, and nothing is written."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

from dynbucket import InvalidInputError, Table

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("score", pa.float64())]
)
ROWS = {
    "id": ["a", "b", "c", "d"],
    "day": ["d1", "d1", "d2", "d2"],
    "v": [1, 2, 3, 4],
    "score": [0.5, None, 2.5, 3.5],
}


class _Stream:
    """An object that only exports the Arrow C stream interface (as a DuckDB result)."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema: Any = None) -> Any:
        return self._table.__arrow_c_stream__(requested_schema)


def _upserted(tmp_path: Path, name: str, rows: Any, deletes: Any) -> dict[str, Any]:
    with Table.create(str(tmp_path / name), SCHEMA, "id", "day") as t:
        t.upsert(rows)
        t.upsert(rows)  # the second time: every key known, an update
        t.delete(deletes)
        return {r["id"]: r for r in t.to_arrow(meta_columns=False).to_pylist()}


def _kinds() -> dict[str, tuple[Any, Any]]:
    table = pa.table(ROWS, SCHEMA)
    keys = pa.table({"id": ["b"], "day": ["d1"]})
    frame = pd.DataFrame(ROWS)
    return {
        "pandas": (frame, keys.to_pandas()),
        "pandas, key as index": (frame.set_index("id"), keys.to_pandas().set_index("id")),
        "polars": (pl.DataFrame(ROWS), pl.DataFrame({"id": ["b"], "day": ["d1"]})),
        "arrow stream": (_Stream(table), _Stream(keys)),
        "record batch": (table.to_batches()[0], keys.to_batches()[0]),
        "record batch reader": (
            pa.RecordBatchReader.from_batches(SCHEMA, table.to_batches()),
            keys.to_reader(),
        ),
    }


@pytest.mark.parametrize("kind", list(_kinds()))
def test_each_input_writes_what_the_pyarrow_table_writes(tmp_path: Path, kind: str) -> None:
    rows, deletes = _kinds()[kind]
    expected = _upserted(
        tmp_path, "arrow", pa.table(ROWS, SCHEMA), pa.table({"id": ["b"], "day": ["d1"]})
    )
    assert sorted(expected) == ["a", "c", "d"]
    assert _upserted(tmp_path, "other", rows, deletes) == expected


def test_what_is_no_input_is_refused_by_name_and_writes_nothing(tmp_path: Path) -> None:
    with Table.create(str(tmp_path / "t"), SCHEMA, "id", "day") as t:
        before = sorted(p.name for p in (tmp_path / "t").rglob("*"))
        with pytest.raises(InvalidInputError, match=r"upsert takes .*pandas.*, not list"):
            t.upsert([{"id": "a", "day": "d1", "v": 1}])  # type: ignore[arg-type]
        assert sorted(p.name for p in (tmp_path / "t").rglob("*")) == before
