"""``dynbucket bench datapath``: the ways rows travel Spark -> assigner actors -> Spark.

Every case starts from the same generated DataFrame, routes rows to N slots the way the
write pipeline does (``repartition(N, pmod(_hash, N))``), has the slot actors tag each row,
and ends as a Spark DataFrame fully evaluated into Spark's ``noop`` sink:

* ``spark-only``: the routing shuffle and nothing else (the floor; no Python, no actors).
* ``python-identity``: the shuffle plus a ``mapInArrow`` that returns its input: what any
  Python stage costs (JVM <-> Python Arrow transfer), without actors.
* ``mapInArrow``: Spark's Python workers call the named actors with two columns
  (``_partition``, ``_hash``) and attach the answer (what the pipeline uses).
* ``mapInArrow-rows``: the same, but whole rows travel to the actors and back.
* ``from_spark/to_spark``: RayDP moves the rows into Ray's object store, Ray Data tasks call
  the actors, and RayDP moves the result back into Spark.

Cases interleave within each run, with a fresh fleet (empty caches) per case and run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pyarrow as pa

from dynbucket.actors import DynamicBucketIndex
from dynbucket.actors.assigner import EmptySource
from dynbucket.actors.fleet import AssignerFleet
from dynbucket.actors.link import RayLink
from dynbucket.base import columns
from dynbucket.base.keyhash import slot_of
from dynbucket.bench.report import Measurement, print_report, timed
from dynbucket.runtime import Runtime
from dynbucket.write.assign_stage import assign_fn, tagged_schema


def synthetic_keys(spark: Any, rows: int, partitions: int = 4) -> Any:
    """``rows`` rows with string keys, ``partitions`` partition paths and key hashes."""
    from pyspark.sql import functions as F

    return (
        spark.range(rows)
        .select(
            F.concat(F.lit("user-"), F.col("id").cast("string")).alias("key"),
            (F.col("id") * 7 % 1000).alias("value"),
            F.concat(F.lit("day="), (F.col("id") % partitions).cast("string")).alias(
                columns.PARTITION
            ),
        )
        .withColumn(columns.HASH, F.xxhash64("key"))
    )


CASES = ("spark-only", "python-identity", "mapInArrow", "mapInArrow-rows", "from_spark/to_spark")


def run(
    rt: Runtime, sizes: Sequence[int], runs: int, cases: Sequence[str] = CASES
) -> dict[str, Any]:
    from pyspark.sql import functions as F

    spark = rt.spark
    link = RayLink(rt.ray_address, rt.config.namespace)
    slots = rt.default_parallelism
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100000")
    results = {(c, n): Measurement(c, n) for n in sizes for c in cases}

    def once(case: str, n: int) -> float:
        df = synthetic_keys(spark, n, partitions=8).withColumn("payload", F.sha2(F.col("key"), 256))
        routed = df.repartition(slots, F.pmod(F.col(columns.HASH), F.lit(slots)))
        fleet = AssignerFleet(
            link, "bench", slots, DynamicBucketIndex(max_keys_per_bucket=200_000), EmptySource
        )
        try:
            fleet.begin(1, -1)
            seconds, _ = timed(_CASES[case](spark, routed, link, fleet.names))
        finally:
            fleet.close()
        return seconds

    for case in cases:  # warm-up: JIT, Python workers, Ray Data, not timed
        once(case, 20_000)
    for n in sizes:
        for r in range(runs):
            for case in cases:
                seconds = once(case, n)
                results[(case, n)].seconds.append(seconds)
                print(f"  size {n:,} run {r + 1}/{runs} {case}: {seconds:.2f}s", flush=True)
    rows = list(results.values())
    ratio = {
        f"{c} vs mapInArrow @{n:,}": round(
            results[(c, n)].per_second / results[("mapInArrow", n)].per_second, 3
        )
        for n in sizes
        for c in cases
        if c != "mapInArrow" and "mapInArrow" in cases
    }
    return print_report("datapath", "rows", rows, slots=slots, throughput_ratio=ratio)


def _spark_only(spark: Any, routed: Any, link: RayLink, names: Sequence[str]) -> Callable[[], None]:
    return lambda: routed.write.format("noop").mode("overwrite").save()


def _python_identity(
    spark: Any, routed: Any, link: RayLink, names: Sequence[str]
) -> Callable[[], None]:
    def same(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from batches

    out = routed.mapInArrow(same, routed.schema)
    return lambda: out.write.format("noop").mode("overwrite").save()


def _map_in_arrow(ship_all: bool) -> Callable[..., Callable[[], None]]:
    def case(spark: Any, routed: Any, link: RayLink, names: Sequence[str]) -> Callable[[], None]:
        tag = _whole_rows_fn(link, names) if ship_all else assign_fn(link, names, 1)
        tagged = routed.mapInArrow(tag, tagged_schema(routed.schema))
        return lambda: tagged.write.format("noop").mode("overwrite").save()

    return case


def _whole_rows_fn(link: RayLink, names: Sequence[str]) -> Callable[..., Any]:
    """Like the pipeline's stage A, but whole rows travel to the actors and back."""
    names = list(names)

    def tag(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import numpy as np
        import ray

        handles = [link.actor(name) for name in names]
        for batch in batches:
            slots = slot_of(batch.column(columns.HASH).to_numpy(zero_copy_only=False), len(names))
            present = np.unique(slots)
            refs = [
                handles[int(s)].assign.remote(1, batch.filter(pa.array(slots == s)))
                for s in present
            ]
            yield from ray.get(refs)

    return tag


def _from_spark(spark: Any, routed: Any, link: RayLink, names: Sequence[str]) -> Callable[[], None]:
    import ray.data
    from raydp.spark.dataset import release_spark_recoverable

    tag = assign_fn(link, names, 1)

    def tag_table(table: pa.Table) -> pa.Table:
        # RayDP's to_spark cannot take chunked columns (docs/design.md): one chunk per column.
        return pa.Table.from_batches(list(tag(iter(table.to_batches())))).combine_chunks()

    def go() -> None:
        ds = ray.data.from_spark(routed)
        try:
            # The Spark executor holds every Ray CPU of the embedded cluster; like the
            # assigner actors, these tasks must not reserve one.
            out = ds.map_batches(tag_table, batch_format="pyarrow", batch_size=100_000, num_cpus=0)
            out.to_spark(spark).write.format("noop").mode("overwrite").save()
        finally:
            release_spark_recoverable(routed)

    return go


_CASES: dict[str, Callable[..., Callable[[], None]]] = {
    "spark-only": _spark_only,
    "python-identity": _python_identity,
    "mapInArrow": _map_in_arrow(False),
    "mapInArrow-rows": _map_in_arrow(True),
    "from_spark/to_spark": _from_spark,
}
