"""``dynbucket demo``'s workload (no Spark or Ray here)."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from dynbucket.cli.demo import workload


def test_the_batches_files_are_timed_in_their_order(tmp_path: Path) -> None:
    """Spark's file stream takes a folder's files by their times: each batch's file is a
    second after the one before (files written within one tick came in any order, and a
    batch's updates arrived before the keys they update)."""
    workload(tmp_path, 6, 50, update_share=0.3)
    files = sorted(tmp_path.glob("batch-*.parquet"))
    times = [f.stat().st_mtime for f in files]
    assert [round(b - a) for a, b in zip(times, times[1:], strict=False)] == [1] * 5
    stamps = [set(pq.read_table(f, columns=["updated_at"]).column(0).to_pylist()) for f in files]
    assert stamps == [{b} for b in range(6)]
