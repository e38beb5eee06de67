"""``bench upsert``'s workload: its upserts are taken in the order they were made (no Spark
or Ray here)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from dynbucket.bench import upsert


def test_eleven_or_more_upserts_are_taken_in_the_order_they_were_made(tmp_path: Path) -> None:
    upsert.workload(tmp_path, 1_000, 100, 12)
    files = upsert._files(tmp_path, "upsert")
    assert [f.name for f in files] == [f"upsert-{r}.parquet" for r in range(12)]
    # Each upsert's ordering values are one above the last's: none goes back (by name,
    # upsert-10 came third, its updates below the table's and stale).
    stamps = [pq.read_table(f, columns=["ts"]).column("ts").to_pylist() for f in files]
    assert [set(s) for s in stamps] == [{r + 1} for r in range(12)]
