"""The unit suite's guard tells what a test started from what ran before it, and stops
only what the test started."""

from __future__ import annotations

import sys
import types

import pytest

from tests.unit.conftest import running, stop


def test_the_guard_sees_ray_and_spark_and_stops_them(monkeypatch: pytest.MonkeyPatch) -> None:
    stopped: list[str] = []
    state = {"ray": True}
    ray = types.SimpleNamespace(
        is_initialized=lambda: state["ray"], shutdown=lambda: stopped.append("ray")
    )
    context = types.SimpleNamespace(stop=lambda: stopped.append("spark"))
    spark = types.SimpleNamespace(SparkContext=types.SimpleNamespace(_active_spark_context=context))
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "pyspark.context", spark)
    assert running() == {"Ray (ray.init)", "Spark (a SparkContext)"}
    stop({"Spark (a SparkContext)"})  # Ray ran before the test: left alone
    assert stopped == ["spark"]
    stop({"Ray (ray.init)"})
    assert stopped == ["spark", "ray"]
    state["ray"] = False
    assert running() == {"Spark (a SparkContext)"}
