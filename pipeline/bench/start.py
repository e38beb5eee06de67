"""``dynbucket bench start``: what a driver script waits for before its first results.

A user's script starts a ``Runtime`` and writes a little: how long until the first
in-process upsert (a pyarrow Table: no Spark needed, Spark starts beside it), until the
first Spark upsert (split: Spark's own start, which RayDP's three JVMs take; the first
``createDataFrame`` on a cold driver JVM; the upsert), what a small ``createDataFrame``
delete costs once warm (the README's own pattern), and the first and second reads. One run
from a process that has not started Ray or Spark yet (the figures are start-up costs: a
second run in the same process would measure something else).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from dynbucket.bench.report import Measurement, print_report
from dynbucket.runtime import Runtime
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
DDL = "id string, day string, ts long"


def _rows(keys: range, ts: int) -> pa.Table:
    ids = [f"k{i}" for i in keys]
    return pa.table({"id": ids, "day": ["d1"] * len(ids), "ts": [ts] * len(ids)}, schema=SCHEMA)


def run(keys: int = 1_000, workdir: str | None = None) -> dict[str, Any]:
    """Measures the steps of the module doc; prints and returns the report."""
    root = Path(workdir or tempfile.mkdtemp(prefix="dynbucket-bench-start-"))
    began = time.perf_counter()
    with Runtime() as rt:
        started = time.perf_counter() - began
        local = Table.create(str(root / "local"), SCHEMA, "id", "day", "ts")
        local.upsert(_rows(range(keys), 1))
        first_local = time.perf_counter() - began
        spark = Table.create(str(root / "spark"), SCHEMA, "id", "day", "ts", runtime=rt)
        session = rt.spark
        spark_ready = time.perf_counter() - began
        rows = [(f"k{i}", "d1", 1) for i in range(keys)]
        frame = session.createDataFrame(rows, DDL)
        first_frame = time.perf_counter() - began
        spark.upsert(frame)
        first_spark = time.perf_counter() - began
        deletes = []
        for _ in range(3):  # warm: the same pattern again, on keys the table holds
            spark.upsert(rt.spark.createDataFrame(rows, DDL))
            gone = rt.spark.createDataFrame(
                [(f"k{i}", "d1") for i in range(keys)], "id string, day string"
            )
            t0 = time.perf_counter()
            spark.delete(gone)
            deletes.append(time.perf_counter() - t0)
        spark.upsert(rt.spark.createDataFrame(rows, DDL))
        reads = []
        for _ in range(2):
            t0 = time.perf_counter()
            spark.read().count()
            reads.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        spark.to_arrow()
        arrow = time.perf_counter() - t0
        spark.close()
        local.close()
    cases = [
        Measurement("Runtime() started", 1, [started]),
        Measurement("Runtime() to 1st in-process upsert", keys, [first_local]),
        Measurement("Runtime() to Spark ready (rt.spark)", 1, [spark_ready]),
        Measurement("  then 1st createDataFrame", keys, [first_frame - spark_ready]),
        Measurement("  then 1st Spark upsert", keys, [first_spark - first_frame]),
        Measurement("Runtime() to 1st Spark upsert", keys, [first_spark]),
        Measurement(f"{keys:,}-key createDataFrame delete", keys, deletes),
        Measurement("1st read().count()", keys, reads[:1]),
        Measurement("2nd read().count()", keys, reads[1:]),
        Measurement("to_arrow()", keys, [arrow]),
    ]
    return print_report(
        "start",
        "keys",
        cases,
        keys=keys,
        first_in_process_upsert_s=round(first_local, 2),
        spark_ready_s=round(spark_ready, 2),
        first_spark_upsert_s=round(first_spark, 2),
        warm_delete_s=round(statistics.median(deletes), 3),
    )
