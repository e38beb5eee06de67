"""A multi-node Ray cluster on this machine (Ray's own test cluster: a head and two worker
nodes, each a raylet with its own resources and, as on a real cluster, its own address),
Spark on it with one executor per node as far as they go, and the S3 test server for its
tables. Started once for this folder's tests, which ``make test`` runs in a pytest session
of their own (one Ray per process).

Ray and RayDP find a process's node by its address: with one address for all three nodes,
RayDP's Java driver could join a worker node, and Spark died with that node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from dynbucket.runtime import Runtime


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        for i in range(2):
            c.add_node(num_cpus=2, node_ip_address=f"127.0.0.{i + 2}")
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()


@pytest.fixture(scope="session")
def runtime(cluster: Any) -> Iterator[Runtime]:
    with Runtime(
        address=cluster.address,
        executors=2,
        executor_cores=1,
        executor_memory="1g",
        executor_placement="SPREAD",
        driver_write_max_bytes=0,
        driver_read_max_bytes=0,
        verbose=True,  # Ray's, Spark's and the JVM's output in the suite's log
    ) as rt:
        assert rt.spark is not None  # Spark starts beside the tests: all of it up first
        yield rt


@pytest.fixture(scope="session")
def spark(runtime: Runtime) -> Any:
    return runtime.spark
