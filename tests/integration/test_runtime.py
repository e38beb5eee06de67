"""The runtime really starts Ray and Spark on it, and Spark's Python workers work."""

from __future__ import annotations

import os
import sys

import pytest

from dynbucket.base.errors import RuntimeSetupError
from dynbucket.runtime import Runtime


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


def test_an_embedded_runtime_listens_on_loopback_only(runtime: Runtime) -> None:
    """Ray's servers, RayDP's Spark master, driver and executors, Spark's Python workers:
    every socket the runtime's processes listen on takes connections from this machine
    only."""
    import psutil

    # A job first, so that executors, Python workers and the slot link are all up.
    assert runtime.spark.range(100).mapInArrow(_double_ids, "id long").count() == 100
    me = psutil.Process()
    listening: dict[str, list[str]] = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            sockets = p.net_connections(kind="inet")
            name = p.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for c in sockets:
            if c.status == psutil.CONN_LISTEN:
                listening.setdefault(c.laddr.ip, []).append(f"{name}:{c.laddr.port}")
    names = {n.split(":")[0] for found in listening.values() for n in found}
    assert {"gcs_server", "raylet", "java"} <= names  # the servers were seen
    loopback = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
    assert {ip: found for ip, found in listening.items() if ip not in loopback} == {}
