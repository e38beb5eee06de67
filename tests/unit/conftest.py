"""Unit tests are plain Python: a unit test that starts Ray or Spark fails (and what it
started is stopped), so that the unit suite stays seconds long and runs anywhere. What ran
before the test (the integration session's Ray and Spark, when ``make test`` runs every
suite in one process) is neither blamed nor stopped."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


def running() -> set[str]:
    """What of Ray and Spark runs in this process now."""
    found = set()
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        found.add("Ray (ray.init)")
    context = sys.modules.get("pyspark.context")
    if context is not None and context.SparkContext._active_spark_context is not None:
        found.add("Spark (a SparkContext)")
    return found


def stop(started: set[str]) -> None:
    if "Spark (a SparkContext)" in started:
        sys.modules["pyspark.context"].SparkContext._active_spark_context.stop()
    if "Ray (ray.init)" in started:
        sys.modules["ray"].shutdown()


@pytest.fixture(autouse=True)
def _no_ray_or_spark() -> Iterator[None]:
    before = running()
    yield
    started = running() - before
    if started:
        stop(started)
        pytest.fail(
            f"a unit test started {' and '.join(sorted(started))}: move it to "
            "tests/integration (the shared session) or test the plain core"
        )
