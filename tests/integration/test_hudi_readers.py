"""Third-party readers read tables the Spark write path wrote: daft (``daft.read_hudi``)
reads copy-on-write tables, with and without Hudi's meta fields, as dynbucket reads them;
hudi-rs reads the same tables too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from dynbucket.options import DynamicBucketIndex, TableOptions
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads, daft_read, rows_by_key

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
DDL = "id string, day string, v long, ts long"


def test_daft_reads_copy_on_write_tables(spark: Any, runtime: Runtime, tmp_path: Path) -> None:
    tables = []
    for meta in (True, False):
        t = Table.create(
            str(tmp_path / f"meta_{meta}"),
            SCHEMA,
            "id",
            "day",
            "ts",
            DynamicBucketIndex(max_keys_per_bucket=20),
            TableOptions(table_type="COPY_ON_WRITE", populate_meta_fields=meta),
            runtime=runtime,
        )
        rows = [(f"k{i}", f"d{i % 3}", i, 1) for i in range(100)]
        t.upsert(spark.createDataFrame(rows, DDL), assigner_slots=2)
        t.upsert(
            spark.createDataFrame(
                [(f"k{i}", f"d{i % 3}", -i, 2) for i in range(0, 100, 7)] + [("new", "d0", 7, 2)],
                DDL,
            ),
            assigner_slots=2,
        )
        t.delete(spark.createDataFrame([("k3", "d0"), ("k4", "d1")], "id string, day string"))
        check_hudi_reads(t)
        tables.append(t)
        t.close()
    read = daft_read([t.uri for t in tables])
    keys, fields = ["day", "id"], SCHEMA.names
    for t in tables:
        ours = rows_by_key(t.to_arrow(meta_columns=False), keys, fields)
        assert len(ours) == 99  # 100 + 1 new - 2 deleted
        assert rows_by_key(pa.Table.from_pylist(read[t.uri]), keys, fields) == ours
