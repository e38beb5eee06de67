"""The peers' side of ``dynbucket bench upsert``: runs in the peers' own virtual environment.

This file imports neither dynbucket nor anything of its environment (pypaimon pins pyarrow
< 20, dynbucket 26), so the bench starts it by path with the peers' interpreter:

    python peer_worker.py <paimon|delta> <table path> <load|upsert> <parquet file>...

Each call performs one operation and prints one JSON line: ``{"seconds": ..., "rows": ...}``.
Timing covers reading the input Parquet file(s) and the whole write and commit.

``serve`` in place of an operation keeps the process: it upserts each file named on a line of
its standard input and prints a JSON line per file (warm writes, ``bench latency``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

KEY, PARTITION, ORDERING = "key", "part", "ts"


def paimon(path: str, operation: str, files: list[str], bucket_rows: int) -> int:
    """Paimon primary-key table in dynamic bucket mode (``bucket = -1``)."""
    from pypaimon import CatalogFactory, Schema

    catalog = CatalogFactory.create({"warehouse": path})
    catalog.create_database("bench", True)
    name = "bench.t"
    if operation == "load":
        schema = Schema.from_pyarrow_schema(
            pq.read_schema(files[0]),
            partition_keys=[PARTITION],
            primary_keys=[PARTITION, KEY],
            options={
                "bucket": "-1",
                "dynamic-bucket.target-row-num": str(bucket_rows),
                "sequence.field": ORDERING,  # larger ts wins, as in dynbucket
                "file.format": "parquet",
            },
        )
        catalog.create_table(name, schema, False)
    table = catalog.get_table(name)
    rows = 0
    for f in files:
        data = pq.read_table(f)
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        write.write_arrow(data)
        commit.commit(write.prepare_commit())
        write.close()
        commit.close()
        rows += data.num_rows
    return rows


def delta(path: str, operation: str, files: list[str], bucket_rows: int) -> int:
    """Delta Lake through delta-rs: appends to load, ``MERGE`` to upsert."""
    from deltalake import DeltaTable, write_deltalake

    rows = 0
    for f in files:
        data = pq.read_table(f)
        if operation == "load":
            write_deltalake(path, data, mode="append", partition_by=[PARTITION])
        else:
            (
                DeltaTable(path)
                .merge(
                    data,
                    predicate=f"t.{PARTITION} = s.{PARTITION} AND t.{KEY} = s.{KEY}",
                    source_alias="s",
                    target_alias="t",
                )
                .when_matched_update_all(predicate=f"s.{ORDERING} >= t.{ORDERING}")
                .when_not_matched_insert_all()
                .execute()
            )
        rows += data.num_rows
    return rows


def main(argv: list[str]) -> int:
    system, path, operation, *files = argv
    bucket_rows = int(os.environ.get("BENCH_BUCKET_ROWS", "1000000"))
    run: Any = {"paimon": paimon, "delta": delta}[system]
    if operation == "serve":
        for line in sys.stdin:
            start = time.perf_counter()
            rows = run(path, "upsert", [line.strip()], bucket_rows)
            print(json.dumps({"seconds": time.perf_counter() - start, "rows": rows}), flush=True)
        return 0
    start = time.perf_counter()
    rows = run(path, operation, files, bucket_rows)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rows": rows, "pyarrow": pa.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
