"""The unit suite's guard sees Ray or Spark started by a test, and stops it."""

from __future__ import annotations

import sys
import types

import pytest

from tests.unit.conftest import _started


def test_the_guard_sees_ray_and_spark_and_stops_them(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped: list[str] = []
    ray = types.SimpleNamespace(is_initialized=lambda: True, shutdown=lambda: stopped.append("ray"))
    context = types.SimpleNamespace(stop=lambda: stopped.append("spark"))
    spark = types.SimpleNamespace(SparkContext=types.SimpleNamespace(_active_spark_context=context))
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "pyspark.context", spark)
    assert _started() == ["Ray (ray.init)", "Spark (a SparkContext)"]
    assert stopped == ["ray", "spark"]
    monkeypatch.undo()
    assert _started() == []  # the real ones: nothing runs in the unit suite
