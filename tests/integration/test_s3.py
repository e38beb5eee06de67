"""Tables on S3 (the moto server of ``tests/s3.py``): Spark tasks write the objects directly,
every exclusive create is a conditional write, and Hudi's reader reads what we write."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from dynbucket.pipeline.options import DynamicBucketIndex
from dynbucket.pipeline.runtime import Runtime
from dynbucket.pipeline.table import Table
from tests.hudi_readers import check_hudi_reads
from tests.integration.invariants import checked_live_rows
from tests.s3 import S3Server

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
DDL = "id string, day string, v long, ts long"


def test_spark_tasks_write_a_table_on_s3_that_hudi_reads(
    spark: Any, runtime: Runtime, s3_server: S3Server
) -> None:
    uri = s3_server.uri()
    t = Table.create(uri, SCHEMA, "id", "day", "ts", DynamicBucketIndex(max_keys_per_bucket=4),
                     runtime=runtime)  # fmt: skip
    try:
        rows = [(f"k{i}", f"d{i % 2}", i, 1) for i in range(20)]
        r = t.upsert(spark.createDataFrame(rows, DDL), assigner_slots=2)
        assert r.keys_inserted == 20
        t.upsert(spark.createDataFrame([("k1", "d1", 100, 2), ("k40", "d0", 40, 2)], DDL))
        live = checked_live_rows(t)
        assert {r["id"]: r["v"] for r in live} == {**{f"k{i}": i for i in range(20)},
                                                  "k1": 100, "k40": 40}  # fmt: skip
        assert sorted({r["_bucket"] for r in live if r["day"] == "d0"}) == [0, 1, 2]
        keys = s3_server.keys(uri)
        assert any(k.endswith(".hoodie/hoodie.properties") for k in keys)
        assert not [k for k in keys if ".tmp-" in k]  # written in place: no renames
        check_hudi_reads(t)
    finally:
        t.close()
    # Opened again by URI alone: endpoint and credentials come from the AWS settings.
    again = Table.open(uri)
    assert again.to_arrow().num_rows == 21
    assert isinstance(again.store.fs, pafs.S3FileSystem)
