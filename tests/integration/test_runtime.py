"""The runtime really starts Ray and Spark on it, and Spark's Python workers work."""

from __future__ import annotations

import os
import sys

import pytest

from dynbucket.actors.errors import RuntimeSetupError
from dynbucket.pipeline.runtime import Runtime


def test_spark_runs_on_ray_with_python_workers(runtime: Runtime) -> None:
    import ray

    spark = runtime.spark
    assert ray.is_initialized() and runtime.started_embedded
    assert spark.conf.get("spark.master").startswith("ray://")
    # A Python UDF forces Spark's Python workers to start and import pyspark + dynbucket.
    df = spark.range(1000).mapInArrow(_double_ids, "id long")
    assert sorted(r.id for r in df.collect()) == [2 * i for i in range(1000)]
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


def _double_ids(batches):
    import pyarrow.compute as pc

    import dynbucket.actors  # noqa: F401  (the package imports in Spark's workers)

    for b in batches:
        yield b.set_column(0, "id", pc.multiply(b.column(0), 2))


def test_second_runtime_in_one_process_is_refused(runtime: Runtime) -> None:
    with pytest.raises(RuntimeSetupError, match="already active"):
        Runtime().start()
    assert runtime.spark is not None  # the first one is untouched
