"""``bench scale``: the workload has the shape the benchmark promises, and memory is read
from the process (no Spark or Ray here)."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dynbucket.bench import scale


def test_half_updates_of_distinct_keys_half_new_two_partitions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scale, "CHUNK", 3_000)
    scale.workload(tmp_path, 10_000, 2_000, 2)
    loaded = [pq.read_table(f) for f in sorted(tmp_path.glob("load-*.parquet"))]
    assert [t.num_rows for t in loaded] == [3_000, 3_000, 3_000, 1_000]
    keys = {k for t in loaded for k in t.column("key").to_pylist()}
    assert len(keys) == 10_000
    seen = set(keys)
    for r in range(2):
        up = pq.read_table(tmp_path / f"upsert-{r}.parquet")
        ids = up.column("key").to_pylist()
        assert len(ids) == len(set(ids)) == 2_000
        assert sum(k in keys for k in ids) == 1_000  # updates: existing keys, once each
        new = set(ids) - keys
        assert not new & (seen - keys)  # new keys: in no earlier upsert either
        seen |= set(ids)
        parts = up.column("part").to_pylist()
        assert all(
            p == ("p0" if int(k[4:]) % 2 == 0 else "p1") for k, p in zip(ids, parts, strict=True)
        )
        assert set(up.column("ts").to_pylist()) == {r + 1}


def test_resident_memory_is_read_from_the_process() -> None:
    # Fresh pages from the kernel (an anonymous map, each page written): the heap may
    # reuse pages this long-lived process freed earlier, which would add nothing.
    block = mmap.mmap(-1, 64 << 20)
    try:
        before = scale._rss(os.getpid())
        for at in range(0, len(block), mmap.PAGESIZE):
            block[at] = 1
        after = scale._rss(os.getpid())
        assert after - before >= 60 << 20
    finally:
        block.close()
