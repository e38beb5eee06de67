"""dynbucket on a multi-node Ray cluster (``conftest.py``: a head and two worker nodes on
this machine), with its tables on the S3 test server: where slots and executors run, and
the model workloads.

Not here yet: a worker node removed in the middle of an upsert. Tried: the upsert's Spark job
waited on with no end (over 14 minutes) after the node, with slots and an executor on it,
went away; see the issue note."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.pipeline.options import DynamicBucketIndex
from dynbucket.pipeline.runtime import Runtime
from dynbucket.pipeline.table import Table
from tests.integration.invariants import checked_live_rows
from tests.integration.write.test_spark_model import _dynamic_workload
from tests.s3 import S3Server

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
DDL = "id string, day string, v long, ts long"


def _rows(keys: range, v: int) -> list[tuple[str, str, int, int]]:
    return [(f"k{i}", f"d{i % 3}", v, v) for i in keys]


def _actor_nodes(table: Table) -> tuple[set[str], set[str]]:
    """The nodes of the table's live slot actors, and of the Spark executors (from the GCS's
    actor table: the state API needs the dashboard, which the test cluster does not run)."""
    from ray._private import state

    alive = [a for a in state.actors().values() if a["State"] == "ALIVE"]
    prefix = f"dynbucket/{table.spec.table_id[:8]}/"
    slots = {a["Address"]["NodeID"] for a in alive if a.get("Name", "").startswith(prefix)}
    executors = {a["Address"]["NodeID"] for a in alive
                 if "Executor" in a.get("ActorClassName", "")}  # fmt: skip
    return slots, executors


def test_slots_and_executors_run_on_more_than_one_node(
    cluster: Any, runtime: Runtime, spark: Any, s3_server: S3Server
) -> None:
    t = Table.create(s3_server.uri(), SCHEMA, "id", "day", "ts",
                     DynamicBucketIndex(max_keys_per_bucket=50, assigner_slots=3),
                     runtime=runtime)  # fmt: skip
    try:
        r = t.upsert(spark.createDataFrame(_rows(range(600), 1), DDL))
        assert r.keys_inserted == 600
        slots, executors = _actor_nodes(t)
        assert len(slots) >= 2, slots  # SPREAD (best effort): not all beside the driver
        assert len(executors) == 2, executors  # placement group SPREAD: one per node
        assert len(checked_live_rows(t)) == 600
    finally:
        t.close()


@pytest.mark.parametrize("seed", range(4))
def test_workload_on_the_cluster_matches_the_model(
    runtime: Runtime, spark: Any, s3_server: S3Server, tmp_path: Path, seed: int
) -> None:
    _dynamic_workload(s3_server.uri(), spark, runtime, tmp_path, seed, hudi_every_batch=False)
