"""Timing and reporting shared by the benchmarks: medians of runs, a table and a JSON line."""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Measurement:
    """Seconds of each run of one case; figures derive from the median."""

    case: str
    size: int
    seconds: list[float] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)

    @property
    def per_second(self) -> float:
        return self.size / self.median if self.median > 0 else float("inf")


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def print_report(
    bench: str, unit: str, rows: Sequence[Measurement], **summary: Any
) -> dict[str, Any]:
    """Prints a table and one JSON line (``BENCH {...}``); returns the JSON document."""
    print(f"\n{bench}: median of runs; {unit}/s = size / median seconds")
    header = f"{'case':<34}{'size':>12}{'median s':>11}{unit + '/s':>16}  runs (s)"
    print(header)
    print("-" * len(header))
    for m in rows:
        runs = " ".join(f"{s:.2f}" for s in m.seconds)
        print(f"{m.case:<34}{m.size:>12,}{m.median:>11.3f}{m.per_second:>16,.0f}  {runs}")
    for key, value in summary.items():
        print(f"{key}: {value}")
    doc = {
        "bench": bench,
        "unit": unit,
        "machine": {"python": platform.python_version(), "cpus": _cpus()},
        "results": [
            {
                "case": m.case,
                "size": m.size,
                "median_s": round(m.median, 4),
                f"{unit}_per_s": round(m.per_second),
                "runs_s": [round(s, 4) for s in m.seconds],
                **m.extra,
            }
            for m in rows
        ],
        **summary,
    }
    print("BENCH " + json.dumps(doc))
    return doc


def _cpus() -> int:
    import os

    return os.cpu_count() or 0
