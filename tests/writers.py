"""One writer process of the several-writers model (``tests/property/test_writers_model.py``).

``python -m tests.writers <table> <writer> <seed> <writes> <log>``: opens the table and, once
``<log>.go`` exists, makes ``writes`` change batches (upserts, some marked as deletes) of
keys every writer shares, each op with an ordering value no other op has; before each write
it logs the batch (``issued``), after the write returns the instant (``acked``), flushed
each time, so that what a killed writer had acknowledged is known.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
from typing import Any

import pyarrow as pa

from dynbucket import Table

SCHEMA = pa.schema(
    [("id", pa.string()), ("region", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
REGIONS = ["eu", "us", "ap"]
KEYS = 40
WRITERS_MAX = 8


def region_of(key: int) -> str:
    return REGIONS[key % len(REGIONS)]


def batch_of(rng: random.Random, writer: int, step: int) -> list[dict[str, Any]]:
    """Distinct keys; ts unique over every writer (``writer`` is its residue), growing with
    the step; about one op in five a delete."""
    keys = rng.sample(range(KEYS), rng.randrange(1, 10))
    return [
        {
            "id": f"k{k}",
            "region": region_of(k),
            "v": rng.randrange(10**6),
            "ts": ((step * 16 + j) * WRITERS_MAX) + writer,
            "deleted": rng.random() < 0.2,
        }
        for j, k in enumerate(keys)
    ]


def records(batch: list[dict[str, Any]]) -> pa.Table:
    table = pa.Table.from_pylist(batch, SCHEMA)
    return table.append_column(
        "_hoodie_is_deleted", pa.array([r["deleted"] for r in batch], pa.bool_())
    )


def main(argv: list[str]) -> None:
    path, writer, seed, writes, log = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4]
    rng = random.Random(seed * 1000 + writer)
    # Conflicts and retries, on stderr for the test to count.
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    logging.getLogger("dynbucket.write.retry").setLevel(logging.INFO)
    table = Table.open(path)
    while not os.path.exists(log + ".go"):  # every writer starts at once
        time.sleep(0.01)
    try:
        with open(log, "a") as out:
            for step in range(writes):
                batch = batch_of(rng, writer, step)
                out.write(json.dumps({"issued": batch}) + "\n")
                out.flush()
                done = table.upsert(records(batch))
                out.write(json.dumps({"acked": step, "instant": done.instant}) + "\n")
                out.flush()
    finally:
        table.close()


if __name__ == "__main__":
    main(sys.argv[1:])
