"""dynbucket on a multi-node Ray cluster (``conftest.py``: a head and two worker nodes on
this machine), with its tables on the S3 test server: where slots and executors run, the
model workloads, and a worker node lost in the middle of an upsert."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.base.errors import DynBucketError
from dynbucket.options import DynamicBucketIndex
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from tests.integration.invariants import checked_live_rows
from tests.integration.write.test_spark_model import _dynamic_workload
from tests.s3 import S3Server
from tests.seeds import seeds

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
DDL = "id string, day string, v long, ts long"


def _rows(keys: range, v: int) -> list[tuple[str, str, int, int]]:
    return [(f"k{i}", f"d{i % 3}", v, v) for i in keys]


def _table(s3_server: S3Server, runtime: Runtime, capacity: int, slots: int) -> Table:
    return Table.create(
        s3_server.uri(),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=capacity, assigner_slots=slots),
        runtime=runtime,
    )


def _actor_nodes(table: Table) -> tuple[set[str], set[str]]:
    """The nodes of the table's live slot actors, and of the Spark executors (from the GCS's
    actor table: the state API needs the dashboard, which the test cluster does not run)."""
    from ray._private import state

    alive = [a for a in state.actors().values() if a["State"] == "ALIVE"]
    prefix = f"dynbucket/{table._spec.table_id[:8]}/"
    slots = {a["Address"]["NodeID"] for a in alive if a.get("Name", "").startswith(prefix)}
    executors = {a["Address"]["NodeID"] for a in alive if "Executor" in a.get("ActorClassName", "")}
    return slots, executors


def test_slots_and_executors_run_on_more_than_one_node(
    cluster: Any, runtime: Runtime, spark: Any, s3_server: S3Server
) -> None:
    t = _table(s3_server, runtime, capacity=50, slots=3)
    try:
        r = t.upsert(spark.createDataFrame(_rows(range(600), 1), DDL))
        assert r.keys_inserted == 600
        slots, executors = _actor_nodes(t)
        assert len(slots) == 3, slots  # one slot per node, in turn (all three have CPUs)
        assert len(executors) == 2, executors  # placement group SPREAD: one per node
        assert len(checked_live_rows(t)) == 600
    finally:
        t.close()


#: Model workloads on the cluster: one a run, new each run (``tests/seeds.py``);
#: ``make test-long`` runs 3.
CLUSTER_WORKLOADS = int(os.environ.get("DYNBUCKET_CLUSTER_WORKLOADS", "1"))


@pytest.mark.parametrize("seed", seeds(CLUSTER_WORKLOADS))
def test_workload_on_the_cluster_matches_the_model(
    runtime: Runtime, spark: Any, s3_server: S3Server, tmp_path: Path, seed: int
) -> None:
    _dynamic_workload(s3_server.uri(), spark, runtime, tmp_path, seed, hudi_every_batch=False)


def test_a_worker_node_removed_mid_upsert_loses_nothing(
    cluster: Any, runtime: Runtime, spark: Any, s3_server: S3Server
) -> None:
    t = _table(s3_server, runtime, capacity=400, slots=6)
    try:
        t.upsert(spark.createDataFrame(_rows(range(3000), 1), DDL))
        before = {(r["day"], r["id"]): (r["v"], r["_bucket"]) for r in checked_live_rows(t)}
        # The node to lose: a worker node running slots (one without an executor if any;
        # else it takes an executor with it, and Spark goes on with the other).
        slots, executors = _actor_nodes(t)
        workers = [n for n in cluster.worker_nodes if n.node_id in slots]
        assert workers, "no slot runs on a worker node"
        victim = sorted(workers, key=lambda n: n.node_id in executors)[0]
        removed: list[float] = []

        def remove_when_inflight() -> None:
            deadline = time.monotonic() + 120
            while not t._timeline.pending() and time.monotonic() < deadline:
                time.sleep(0.05)
            time.sleep(0.5)
            cluster.remove_node(victim)
            removed.append(time.monotonic())

        remover = threading.Thread(target=remove_when_inflight)
        remover.start()
        try:
            result = t.upsert(spark.createDataFrame(_rows(range(2000, 8000), 2), DDL))
            completed = True
        except DynBucketError:
            completed = False
        remover.join()
        assert removed, "the node was not removed"
        assert victim.node_id not in _actor_nodes(t)[0]  # its slots were restarted elsewhere
        after = {(r["day"], r["id"]): (r["v"], r["_bucket"]) for r in checked_live_rows(t)}
        if completed:  # by retry: every row, old keys in their buckets
            assert (result.keys_updated, result.keys_inserted) == (1000, 5000)
            assert {k for k, (v, _) in after.items() if v == 2} == {
                (f"d{i % 3}", f"k{i}") for i in range(2000, 8000)
            }
        else:  # or nothing changed
            assert after == before
        t.wait_for_services()  # services beside the writes finish first
        assert t._timeline.pending() == []
        moved = {k for k in before if after[k][1] != before[k][1]}
        assert moved == set()  # I1
        # The next write succeeds, every key in its bucket (index and data agree: I4, I6).
        again = t.upsert(spark.createDataFrame(_rows(range(7000, 9000), 3), DDL))
        assert again.keys_inserted == 1000
        final = {(r["day"], r["id"]): r["_bucket"] for r in checked_live_rows(t)}
        assert all(final[k] == b for k, (_, b) in after.items())
        assert len(final) == 9000
    finally:
        t.close()
        cluster.add_node(num_cpus=2, node_ip_address="127.0.0.4")  # for any test after this
        cluster.wait_for_nodes()
