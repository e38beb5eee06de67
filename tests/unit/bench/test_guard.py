"""The speed guard (``bench/guard.py``): ratios held against the kept ones, 15% either way
they are worse, and a ratio not measured is a failure, not a pass."""

from __future__ import annotations

import json
from pathlib import Path

from dynbucket.bench import guard

KEPT = {
    "ratios": {
        "speedup_vs_spark_5M": {"kept": 1.0, "better": "higher"},
        "inprocess_vs_floor_5M": {"kept": 2.5, "better": "lower"},
    }
}


def _kept(tmp_path: Path) -> list[guard.Kept]:
    path = tmp_path / "kept.json"
    path.write_text(json.dumps(KEPT))
    return guard.load(path)


def test_ratios_within_15_percent_of_the_kept_ones_pass(tmp_path: Path) -> None:
    measured = {"speedup_vs_spark_5M": 0.86, "inprocess_vs_floor_5M": 2.94}
    assert guard.check(measured, _kept(tmp_path)) == []


def test_a_slowed_spark_path_fails_and_names_the_ratio(tmp_path: Path) -> None:
    measured = {"speedup_vs_spark_5M": 0.84, "inprocess_vs_floor_5M": 2.5}
    [failure] = guard.check(measured, _kept(tmp_path))
    assert failure.startswith("speedup_vs_spark_5M: 0.84") and "below the kept 1.0" in failure


def test_a_slowed_in_process_path_fails_though_its_ratio_grew(tmp_path: Path) -> None:
    measured = {"speedup_vs_spark_5M": 1.2, "inprocess_vs_floor_5M": 2.95}
    [failure] = guard.check(measured, _kept(tmp_path))
    assert failure.startswith("inprocess_vs_floor_5M: 2.95") and "above the kept 2.5" in failure


def test_a_ratio_not_measured_fails(tmp_path: Path) -> None:
    failures = guard.check({"speedup_vs_spark_5M": 1.0}, _kept(tmp_path))
    assert failures == ["inprocess_vs_floor_5M: not measured (run the systems and sizes it needs)"]


def test_the_kept_file_in_the_repository_loads() -> None:
    kept = guard.load(Path(__file__).parents[3] / "docs" / "bench-kept.json")
    assert {k.name for k in kept} == {"speedup_vs_spark_5M", "inprocess_vs_floor_5M"}
