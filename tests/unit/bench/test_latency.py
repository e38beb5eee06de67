"""The latency bench's workload and figures (plain Python: no Ray, no Spark)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from dynbucket.bench.latency import _turn, summary, workload


def test_the_workload_is_half_updates_and_half_new_keys_with_growing_ordering_values(
    tmp_path: Path,
) -> None:
    plan = workload(tmp_path, 2_000, [10, 40], runs=2)
    assert [len(plan[(n, c)]) for n in (10, 40) for c in ("first", "warm", "idle")] == [
        2,
        3,
        2,
        2,
        3,
        2,
    ]
    base = set(pq.read_table(tmp_path / "load-000.parquet").column("key").to_pylist())
    assert len(base) == 2_000
    seen_new: set[str] = set()
    last_ts = 0
    for (n, _case), files in plan.items():
        for f in files:
            t = pq.read_table(f)
            keys = t.column("key").to_pylist()
            old = [k for k in keys if k in base]
            new = set(keys) - base
            assert (t.num_rows, len(set(old)), len(new)) == (n, n // 2, n - n // 2)
            assert not new & seen_new  # a new key is new once
            seen_new |= new
            (ts,) = set(t.column("ts").to_pylist())
            assert ts > last_ts
            last_ts = ts
    # A second call finds the files made (same plan, nothing rewritten).
    stamp = plan[(10, "warm")][0].stat().st_mtime_ns
    assert workload(tmp_path, 2_000, [10, 40], runs=2) == plan
    assert plan[(10, "warm")][0].stat().st_mtime_ns == stamp


def test_summary_ratios_are_of_medians_in_the_same_case() -> None:
    seconds = {
        ("dynbucket", 10_000, "warm"): [0.5, 0.4, 0.6],
        ("spark", 10_000, "warm"): [0.45, 0.5, 0.55],
        ("dynbucket", 10_000, "idle"): [0.6],
        ("dynbucket", 10_000, "first"): [2.0, 3.0],
        ("spark", 10_000, "first"): [2.0],
        ("delta", 10_000, "warm"): [1.0],
    }
    out = summary(seconds, [10_000])
    assert out["warm_vs_spark_10k"] == pytest.approx(0.5 / 0.5)
    assert out["idle_vs_warm_10k"] == pytest.approx(0.6 / 0.5)
    assert out["first_vs_spark_10k"] == pytest.approx(2.5 / 2.0)
    assert out["warm_speedup_vs_delta_10k"] == pytest.approx(1.0 / 0.5)
    assert "idle_vs_spark_10k" not in out  # no plain Spark idle figure: no ratio


def test_systems_take_turns_going_first() -> None:
    order = ["dynbucket", "spark", "delta"]
    firsts = [_turn(order, i)[0] for i in range(6)]
    assert firsts == order * 2
    assert all(sorted(_turn(order, i)) == sorted(order) for i in range(3))
    assert np.unique([tuple(_turn(order, i)) for i in range(3)], axis=0).shape[0] == 3
