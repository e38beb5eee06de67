"""The round trip Spark -> assigner actors -> Spark, on a synthetic DataFrame.

What ``dynbucket demo`` runs until the write pipeline lands: it proves the runtime, the
actors and the data path work together on this machine, and prints what came back.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from dynbucket.actors import DynamicBucketOptions, columns
from dynbucket.actors.assigner import EmptySource
from dynbucket.pipeline.assign_stage import assign_fn, tagged_schema
from dynbucket.pipeline.fleet import AssignerFleet
from dynbucket.pipeline.raylink import RayLink
from dynbucket.pipeline.runtime import Runtime


@dataclass(frozen=True)
class SmokeResult:
    rows_sent: int
    rows_back: int
    slots: int
    layout: list[tuple[str, int, int]]
    """(partition, bucket, keys) for every bucket, sorted."""
    seconds: float


def synthetic_keys(spark, rows: int, partitions: int = 4):
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


def run_smoke(rt: Runtime, rows: int = 200_000, keys_per_bucket: int = 20_000) -> SmokeResult:
    """Sends ``rows`` rows through the slot actors (one checkpoint) and collects the layout."""
    from pyspark.sql import functions as F

    start = time.perf_counter()
    link = RayLink(rt.ray_address, rt.config.namespace)
    slots = rt.default_parallelism
    fleet = AssignerFleet(
        link,
        "smoke",
        slots,
        DynamicBucketOptions(max_keys_per_bucket=keys_per_bucket),
        EmptySource,
    )
    try:
        fleet.begin(1, -1)
        df = synthetic_keys(rt.spark, rows)
        routed = df.repartition(slots, F.pmod(F.col(columns.HASH), F.lit(slots)))
        tagged = routed.mapInArrow(assign_fn(link, fleet.names, 1), tagged_schema(routed.schema))
        counts = (
            tagged.groupBy(columns.PARTITION, columns.BUCKET)
            .agg(F.count("*").alias("keys"), F.sum(F.col(columns.IS_NEW).cast("int")).alias("new"))
            .collect()
        )
        layout = sorted((r[columns.PARTITION], r[columns.BUCKET], r["keys"]) for r in counts)
        return SmokeResult(
            rows_sent=rows,
            rows_back=sum(r["keys"] for r in counts),
            slots=slots,
            layout=layout,
            seconds=time.perf_counter() - start,
        )
    finally:
        fleet.close()
