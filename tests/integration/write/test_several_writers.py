"""A Spark writer beside writer processes on one table (several writers,
``OPTIMISTIC_CONCURRENCY_CONTROL``): the shared session's Spark tasks write change batches
while two in-process writer processes write theirs, SIGSTOPped and SIGKILLed; the model of
``tests/property/test_writers_model.py`` holds and hudi-rs reads the same."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket import Runtime, Table
from tests.hudi_readers import check_hudi_reads
from tests.writers import WRITERS, WRITES, run_model, write_batches


@pytest.mark.parametrize("seed", range(int(os.environ.get("DYNBUCKET_WRITERS_RUNS", "1"))))
def test_a_spark_writer_beside_writer_processes_matches_the_model(
    runtime: Runtime, spark: Any, tmp_path: Path, seed: int
) -> None:
    uri = str(tmp_path / "t")

    def spark_writes(log: Path) -> None:
        table = Table.open(uri, runtime=runtime)
        try:
            write_batches(table, WRITERS - 1, seed, WRITES, str(log), _frame(spark))
        finally:
            table.close()

    table = run_model(uri, seed, tmp_path, spark_writes)
    try:
        check_hudi_reads(table, time_travel=False)
    finally:
        table.close()


def _frame(spark: Any) -> Any:
    def make(rows: pa.Table) -> Any:
        return spark.createDataFrame(rows.to_pandas(), schema=_ddl(rows.schema))

    return make


def _ddl(schema: pa.Schema) -> str:
    names = {pa.string(): "string", pa.int64(): "long", pa.bool_(): "boolean"}
    return ", ".join(f"{f.name} {names[f.type]}" for f in schema)
