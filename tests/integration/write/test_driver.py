"""Small Spark DataFrames written by the driver (``write/driver.py``): the same actors, the
same buckets and rows as through Spark tasks, the same refusals."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.base.errors import InvalidInputError, NullKeyError
from dynbucket.options import DynamicBucketIndex
from dynbucket.runtime import Runtime, RuntimeConfig
from dynbucket.table import Table
from dynbucket.write.driver import estimated_bytes
from tests.integration.invariants import checked_live_rows

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
DEFAULT_LIMIT = RuntimeConfig().driver_write_max_bytes


def _frames(spark: Any, folder: Path) -> Callable[[list[tuple[Any, ...]]], Any]:
    """Rows as DataFrames Spark can size: read from Parquet files, as a stream's micro-batch
    of a file source is (Spark cannot size ``createDataFrame`` of a list)."""
    folder.mkdir(parents=True, exist_ok=True)

    def frame(rows: list[tuple[Any, ...]]) -> Any:
        path = folder / f"{len(list(folder.iterdir()))}.parquet"
        records = [dict(zip(SCHEMA.names, r, strict=True)) for r in rows]
        pq.write_table(pa.Table.from_pylist(records, SCHEMA), path)
        return spark.read.parquet(str(path))

    return frame


def _table(path: Path, runtime: Runtime, driver_limit: int) -> Table:
    t = Table.create(
        str(path),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=4, assigner_slots=2),
        runtime=runtime,
    )
    t._spark_writer().driver_max_bytes = driver_limit  # the session's runtime says 0
    return t


def _shuffles(t: Table) -> int:
    return int(t._timeline.metadata(t._timeline.completed()[-1])["shuffles"])


def test_a_small_dataframe_gets_the_buckets_and_rows_spark_tasks_give_it(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    df = _frames(spark, tmp_path / "in")
    driver = _table(tmp_path / "driver", runtime, DEFAULT_LIMIT)
    tasks = _table(tmp_path / "tasks", runtime, 0)
    batches = [
        [(f"k{i}", f"d{i % 3}", i, 1) for i in range(40)],
        [(f"k{i}", f"d{i % 3}", -i, 2) for i in range(20, 70)],  # 20 updates, 30 new keys
        [("k5", "d2", 500, 0), ("k71", "d2", 71, 3), ("k71", "d2", 72, 4)],  # stale, dup
    ]
    for rows in batches:
        a, b = driver.upsert(df(rows)), tasks.upsert(df(rows))
        assert (a.keys_inserted, a.keys_updated, a.keys_stale, a.buckets_created) == (
            b.keys_inserted,
            b.keys_updated,
            b.keys_stale,
            b.buckets_created,
        )
        assert (_shuffles(driver), _shuffles(tasks)) == (0, 1)
        assert "driver" in a.seconds and "spark" in b.seconds
    gone = driver.delete(df([("k3", "d0", 0, 0), ("nope", "d0", 0, 0)]).select("id", "day"))
    tasks.delete(df([("k3", "d0", 0, 0), ("nope", "d0", 0, 0)]).select("id", "day"))
    assert (gone.keys_deleted, gone.keys_not_found) == (1, 1)

    def live(t: Table) -> dict[tuple[str, str], tuple[int, int]]:
        return {(r["day"], r["id"]): (r["_bucket"], r["v"]) for r in checked_live_rows(t)}

    assert live(driver) == live(tasks)
    assert len(live(driver)) == 70 and live(driver)[("d2", "k71")][1] == 72
    assert sorted(driver.stats().column("bucket").to_pylist()) == sorted(
        tasks.stats().column("bucket").to_pylist()
    )


def test_a_dataframe_over_the_limit_goes_to_spark_tasks(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    df = _frames(spark, tmp_path / "in")
    df = df([(f"k{i}", "d0", i, 1) for i in range(30)])
    size = estimated_bytes(df)
    assert size is not None and 0 < size < DEFAULT_LIMIT
    t = _table(tmp_path / "t", runtime, size - 1)
    t.upsert(df)
    assert _shuffles(t) == 1
    t._spark_writer().driver_max_bytes = size
    t.upsert(df)
    assert _shuffles(t) == 0


def test_bad_records_through_the_driver_raise_and_write_nothing(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    df = _frames(spark, tmp_path / "in")
    t = _table(tmp_path / "t", runtime, DEFAULT_LIMIT)
    t.upsert(df([("ok", "d0", 1, 1)]))
    before = sorted(
        p
        for p in Path(t._store.root).rglob("*")
        if p.is_file() and not p.name.startswith("writer.lease")
    )
    with pytest.raises(NullKeyError, match="record key field 'id' is null"):
        t.upsert(df([(f"n{i}", "d0", i, 1) for i in range(20)] + [(None, "d0", 0, 1)]))
    with pytest.raises(InvalidInputError, match="insert: 1 key"):
        t.insert(df([("ok", "d0", 2, 2), ("new", "d0", 3, 3)]))
    after = sorted(
        p
        for p in Path(t._store.root).rglob("*")
        if p.is_file() and not p.name.startswith("writer.lease")
    )
    t.wait_for_services()  # services beside the writes finish first
    assert after == before and t._timeline.pending() == []
    # The failed instants' keys left the actors' caches (I8): written again, they are new.
    again = t.upsert(df([(f"n{i}", "d0", i, 1) for i in range(20)] + [("new", "d0", 3, 3)]))
    assert (again.keys_inserted, _shuffles(t)) == (21, 0)


def test_opening_a_table_with_a_runtime_starts_its_actors(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    df = _frames(spark, tmp_path / "in")
    import ray

    _table(tmp_path / "t", runtime, DEFAULT_LIMIT).close()
    with Table.open(str(tmp_path / "t"), runtime=runtime, assigner_slots=2) as t:
        assert t._spark is not None and t._spark.fleet is not None
        fleet = t._spark.fleet
        assert ray.get([h.ping.remote() for h in fleet.handles]) == [0, 1]
        t.upsert(df([("a", "d0", 1, 1)]))
        assert t._spark.fleet is fleet  # the first write used them
    assert fleet.closed
