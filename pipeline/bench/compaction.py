"""``dynbucket bench compaction``: compacting a large table, as parallel tasks and not.

Builds a merge-on-read table of ``rows`` rows in process (4 partitions, string keys; the
services off), then twice: an upsert of ``upsert_rows`` updates spread over every file
group (a log on each), and a ``Table.compact`` of every slice, once with the groups spread
over the service processes (``format/services/runner.ServiceRunner.compact``) and once in
the driver's threads, taking turns ``runs`` times. Prints seconds and rows/s of each and their ratio
(medians); then the live row count against the rows written.
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dynbucket.base import beside
from dynbucket.bench.soak import SCHEMA, rows_of
from dynbucket.format.services import runner
from dynbucket.format.table.options import TableOptions
from dynbucket.table import Table

#: The services off: the bench compacts by hand.
MANUAL = TableOptions(
    compaction_async=False,
    clean_automatic=False,
    archive_automatic=False,
    index_compaction_automatic=False,
)
CHUNK = 5_000_000


def run(rows: int, upsert_rows: int, runs: int, workdir: str | None) -> dict[str, Any]:
    root = Path(workdir or tempfile.mkdtemp(prefix="dynbucket-compaction-"))
    rng = np.random.default_rng(5)
    table = Table.create(
        str(root / "t"), SCHEMA, "id", "region", ordering_field="ts", options=MANUAL
    )
    start = time.perf_counter()
    for first in range(0, rows, CHUNK):
        table.insert(rows_of(np.arange(first, min(rows, first + CHUNK)), 0, rng))
    print(f"built {rows:,} rows in {time.perf_counter() - start:.0f} s", flush=True)
    pool = beside.service_processes()  # started before the clock: a start is paid once
    list(pool.map(time.sleep, [0.5] * max(beside.SERVICE_PROCESSES, os.cpu_count() or 1)))
    seconds: dict[str, list[float]] = {"tasks": [], "threads": []}
    ts = 0
    spread = runner.SPREAD_BYTES
    try:
        for _ in range(runs):
            for how in ("tasks", "threads"):
                ts += 1
                table.upsert(rows_of(rng.integers(0, rows, upsert_rows), ts, rng))
                # Tasks: every plan counts as large; threads: none does (4 threads here).
                runner.SPREAD_BYTES = 0 if how == "tasks" else 1 << 62
                start = time.perf_counter()
                result = table.compact()
                seconds[how].append(time.perf_counter() - start)
                print(
                    f"  {how}: {seconds[how][-1]:.1f} s, {result.files_written} groups, "
                    f"{result.rows:,} rows",
                    flush=True,
                )
    finally:
        runner.SPREAD_BYTES = spread
        beside.shutdown_service_processes()
    live = table.to_arrow(columns=["id"], meta_columns=False).num_rows
    out: dict[str, Any] = {
        "bench": "compaction",
        "rows": rows,
        "live_rows": live,
        "groups": result.files_written,
    }
    for how, s in seconds.items():
        out[how] = {
            "median_s": round(statistics.median(s), 2),
            "runs_s": [round(x, 2) for x in s],
            "rows_per_s": round(rows / statistics.median(s)),
        }
    out["threads / tasks"] = round(out["threads"]["median_s"] / out["tasks"]["median_s"], 3)
    print("BENCH " + json.dumps(out))
    return out
