"""Batch upserts from a driver script: create a table, upsert twice, delete, read back.

Run it with ``.venv/bin/python examples/batch_upsert.py [table folder]`` (default: a new
temporary folder). It starts an embedded Ray + Spark on Ray and stops them at the end.
"""

from __future__ import annotations

import sys
import tempfile

import pyarrow as pa

from dynbucket import DynamicBucketIndex, Runtime, Table

SCHEMA = pa.schema(
    [
        ("user_id", pa.string()),
        ("country", pa.string()),
        ("plan", pa.string()),
        ("updated_at", pa.int64()),
    ]
)
DDL = "user_id string, country string, plan string, updated_at long"


def main(path: str, rt: Runtime) -> Table:
    table = Table.create(
        path,
        SCHEMA,
        record_key="user_id",
        partition_by="country",
        ordering_field="updated_at",
        index=DynamicBucketIndex(max_keys_per_bucket=1_000),
        runtime=rt,
    )
    spark = rt.spark
    countries = ["de", "fr", "us"]
    signups = spark.createDataFrame(
        [(f"u{i}", countries[i % 3], "free", 1) for i in range(5_000)], DDL
    )
    first = table.upsert(signups)
    print(
        f"instant {first.instant}: {first.keys_inserted} new users, "
        f"{first.buckets_created} buckets, {first.seconds}"
    )

    # A day later: 1,000 users upgrade, 2,000 sign up. Old keys keep their bucket.
    upgrades = [(f"u{i}", countries[i % 3], "pro", 2) for i in range(0, 5_000, 5)]
    new = [(f"u{i}", countries[i % 3], "free", 2) for i in range(5_000, 7_000)]
    second = table.upsert(spark.createDataFrame(upgrades + new, DDL))
    print(
        f"instant {second.instant}: {second.keys_updated} updated, {second.keys_inserted} inserted"
    )

    gone = table.delete(spark.createDataFrame([("u1", "fr")], "user_id string, country string"))
    print(f"instant {gone.instant}: {gone.keys_deleted} deleted")

    df = table.read()  # a Spark DataFrame with _partition, _bucket, _file_id, _instant
    df.groupBy("country", "plan").count().orderBy("country", "plan").show()
    found = table.lookup(pa.table({"user_id": ["u5"], "country": ["us"]}))  # u5 is in us
    print("lookup u5:", [(r["user_id"], r["country"], r["plan"]) for r in found.to_pylist()])
    print(table.stats().group_by("partition").aggregate([("bucket", "count")]).to_pylist())
    return table


if __name__ == "__main__":
    with Runtime() as runtime:
        main(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp() + "/users", runtime)
