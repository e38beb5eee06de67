"""Streaming upserts from a folder: every Parquet file that lands there is upserted.

Run it with ``.venv/bin/python examples/stream_from_folder.py <incoming folder> <table folder>``.
It processes what is in the folder (``availableNow``) and stops; run it again later and it
picks up only the new files (Spark's checkpoint under the table folder remembers the rest).
For a long-running stream, use ``trigger={"processingTime": "30 seconds"}`` instead. A
micro-batch that Spark re-runs after a crash is committed once.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pyarrow as pa

from dynbucket import DynamicBucketIndex, NotATableError, Runtime, Table

SCHEMA = pa.schema(
    [("sensor", pa.string()), ("site", pa.string()), ("reading", pa.float64()), ("at", pa.int64())]
)


def main(incoming: str, path: str, rt: Runtime) -> Table:
    try:
        table = Table.open(path, runtime=rt)
    except NotATableError:
        index = DynamicBucketIndex(max_keys_per_bucket=500)
        table = Table.create(path, SCHEMA, "sensor", "site", "at", index, runtime=rt)
    source = (
        rt.spark.readStream.schema("sensor string, site string, reading double, at long")
        .option("maxFilesPerTrigger", 1)  # one file per micro-batch, one instant each
        .parquet(incoming)
    )

    def progress(batch_id: int, result: object) -> None:
        print(f"micro-batch {batch_id}: {result}")

    query = table.stream(
        source, str(Path(path) / "_checkpoint"), trigger={"availableNow": True}, on_batch=progress
    )
    query.awaitTermination()
    print(f"{table.to_arrow(meta_columns=False).num_rows} sensors, {len(table.history())} instants")
    return table


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: stream_from_folder.py <incoming folder> <table folder>")
    with Runtime() as runtime:
        main(sys.argv[1], sys.argv[2], runtime)
