"""Unit tests are plain Python: a unit test that starts Ray or Spark fails (and what it
started is stopped), so that the unit suite stays seconds long and runs anywhere."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest


def _started() -> list[str]:
    """What of Ray and Spark is running in this process."""
    found = []
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()
        found.append("Ray (ray.init)")
    context = sys.modules.get("pyspark.context")
    if context is not None and context.SparkContext._active_spark_context is not None:
        context.SparkContext._active_spark_context.stop()
        found.append("Spark (a SparkContext)")
    return found


@pytest.fixture(autouse=True)
def _no_ray_or_spark() -> Iterator[None]:
    yield
    started = _started()
    if started:
        pytest.fail(
            f"a unit test started {' and '.join(started)}: move it to "
            "tests/integration (the shared session) or test the plain core"
        )
