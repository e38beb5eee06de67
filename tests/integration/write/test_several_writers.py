"""Several writers (``OPTIMISTIC_CONCURRENCY_CONTROL``) through Spark: a Spark writer beside
writer processes on one table (the shared session's Spark tasks write change batches while
two in-process writer processes write theirs, SIGSTOPped and SIGKILLed: the model of
``tests/property/test_writers_model.py`` holds and hudi-rs reads the same), and two streams
into one table."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket import DynamicBucketIndex, Runtime, Table, TableOptions
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
            # Half the processes' writes: a Spark-task write takes seconds, theirs a tenth.
            write_batches(table, WRITERS - 1, seed, WRITES // 2, str(log), _frame(spark))
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


def test_two_streams_into_one_table_commit_each_batch_once(
    runtime: Runtime, spark: Any, tmp_path: Path
) -> None:
    """Two ``Table.stream`` queries at once (their own handles and slot fleets), new keys
    overlapping: every row of both, each micro-batch committed once, and neither restarted
    query writes again."""
    schema = pa.schema(
        [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
    )
    expected: dict[str, tuple[int, int]] = {}
    for s, first in (("a", 0), ("b", 3)):
        folder = tmp_path / s
        folder.mkdir()
        for b in range(2):
            ids = [f"k{i}" for i in range(first + b * 5, first + b * 5 + 10)]
            ts = 2 * b + (s == "b")
            rows = {"id": ids, "day": ["d0"] * 10, "v": [ts * 100] * 10, "ts": [ts] * 10}
            pq.write_table(pa.table(rows, schema=schema), folder / f"{s}{b}.parquet")
            for key in ids:
                if expected.get(key, (-1, -1))[1] < ts:
                    expected[key] = (ts * 100, ts)
    uri = str(tmp_path / "t")
    occ = TableOptions(write_concurrency_mode="OPTIMISTIC_CONCURRENCY_CONTROL")
    index = DynamicBucketIndex(max_keys_per_bucket=4)
    Table.create(uri, schema, "id", "day", "ts", index, occ).close()
    tables = [Table.open(uri, runtime=runtime) for _ in range(2)]

    def query(i: int, name: str) -> Any:
        source = (
            spark.readStream.schema("id string, day string, v long, ts long")
            .option("maxFilesPerTrigger", 1)
            .parquet(str(tmp_path / name))
        )
        checkpoint = str(tmp_path / f"ckpt-{name}")
        return tables[i].stream(
            source, checkpoint, trigger={"availableNow": True}, query_name=f"s{name}"
        )

    try:
        for q in [query(0, "a"), query(1, "b")]:
            q.awaitTermination()
        t = tables[0]
        live = {r["id"]: (r["v"], r["ts"]) for r in t.to_arrow().to_pylist()}
        assert live == expected

        def committed() -> list[tuple[str, int]]:
            timeline = t.snapshot().timeline
            found = [timeline.metadata(i).get("stream") for i in timeline.completed("commit")]
            return sorted((b["id"], b["batch"]) for b in found if b)

        assert committed() == sorted((f"s{s}", b) for s in "ab" for b in range(2))
        for q in [query(0, "a"), query(1, "b")]:  # restarted: nothing new
            q.awaitTermination()
        assert len(committed()) == 4
        assert max(r["keys"] for r in t.stats().to_pylist()) <= 4
        assert t.check().healthy
    finally:
        for t in tables:
            t.close()
