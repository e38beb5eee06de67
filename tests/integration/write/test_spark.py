"""The write pipeline through real Spark tasks and real assigner actors."""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.base.errors import (
    InvalidInputError,
    InvalidPartitionValueError,
    NullKeyError,
    SchemaMismatchError,
)
from dynbucket.base.keyhash import hash_columns, slot_of
from dynbucket.options import DynamicBucketIndex
from dynbucket.runtime import Runtime, RuntimeConfig
from dynbucket.table import Table
from dynbucket.write.spark import StreamBatch
from tests.hudi_readers import check_hudi_reads
from tests.hudi_tables import unzipped
from tests.integration.invariants import checked_live_rows

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)


def _df(spark: Any, rows: list[tuple[str, str, int, int]]) -> Any:
    return spark.createDataFrame(rows, "id string, day string, v long, ts long")


def _table(tmp_path: Path, runtime: Runtime, cap: int = 3) -> Table:
    return Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=cap),
        runtime=runtime,
    )


def _files(t: Table) -> list[str]:
    return sorted(
        str(p)
        for p in Path(t._store.root).rglob("*")
        if p.is_file() and not p.name.startswith("writer.lease")
    )


def _check_index(t: Table) -> dict[tuple[str, str], int]:
    """(day, id) -> bucket of every live key, after checking I4 and I6."""
    return {(r["day"], r["id"]): r["_bucket"] for r in checked_live_rows(t)}


def test_upsert_update_delete_through_spark(spark: Any, runtime: Runtime, tmp_path: Path) -> None:
    t = _table(tmp_path, runtime)
    first = t.upsert(_df(spark, [(f"k{i}", f"d{i % 2}", i, 1) for i in range(20)]))
    assert (first.keys_inserted, first.keys_updated, first.rows_written) == (20, 0, 20)
    # An update of half the keys, with a key twice in the batch (larger ts wins) and a
    # record older than what the table holds (it loses).
    second = t.upsert(
        _df(
            spark,
            [("k1", "d1", 100, 5), ("k1", "d1", 99, 4), ("k2", "d0", -2, 0), ("k30", "d0", 30, 1)],
        )
    )
    assert (second.keys_inserted, second.keys_updated, second.keys_stale) == (1, 1, 1)
    live = {r["id"]: r["v"] for r in t.to_arrow().to_pylist()}
    assert (live["k1"], live["k2"], live["k30"], len(live)) == (100, 2, 30, 21)
    before = _check_index(t)
    gone = t.delete(_df(spark, [("k3", "d1", 0, 0), ("nope", "d0", 0, 0)]).select("id", "day"))
    assert (gone.keys_deleted, gone.keys_not_found) == (1, 1)
    after = _check_index(t)
    assert ("d1", "k3") not in after and all(after[k] == before[k] for k in after)
    assert t.read().count() == 20


def test_slot_count_changes_keep_every_bucket(spark: Any, runtime: Runtime, tmp_path: Path) -> None:
    t = _table(tmp_path, runtime, cap=4)
    seen: dict[tuple[str, str], int] = {}
    for n, keys in ((2, range(0, 30)), (3, range(20, 60)), (1, range(50, 70)), (2, range(0, 80))):
        t.upsert(_df(spark, [(f"k{i}", f"d{i % 2}", i, n) for i in keys]), assigner_slots=n)
        for key, bucket in _check_index(t).items():
            assert seen.setdefault(key, bucket) == bucket  # I1
    stats = t.stats().to_pylist()
    assert max(r["keys"] for r in stats) <= 4  # capacity held across slot counts


@pytest.mark.sample(1)  # two bad records a task finds, one path: a run takes one
@pytest.mark.parametrize(
    ("rows", "error", "message"),
    [
        ([("a", "d0", 1, 1), (None, "d0", 2, 1)], NullKeyError, "record key field 'id' is null"),
        ([("a", "x/y", 1, 1)], InvalidPartitionValueError, "'x/y'"),
    ],
)
def test_bad_records_raise_dynbucket_errors_and_write_nothing(
    spark: Any, runtime: Runtime, tmp_path: Path, rows: list[Any], error: type, message: str
) -> None:
    t = _table(tmp_path, runtime)
    t.upsert(_df(spark, [("ok", "d0", 1, 1)]))
    files = _files(t)
    group = f"bad-records-{tmp_path.name}"
    spark.sparkContext.setJobGroup(group, "a write of bad records")
    try:
        with pytest.raises(error, match=message):
            t.upsert(_df(spark, [(f"n{i}", "d0", i, 1) for i in range(50)] + rows))
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    # Told to the driver by the task, not raised in it: no task failed, none ran again.
    tracker = spark.sparkContext.statusTracker()
    jobs = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
    stages = [tracker.getStageInfo(s) for job in jobs if job for s in job.stageIds]
    assert stages and None not in stages
    assert sum(s.numFailedTasks for s in stages) == 0
    t.wait_for_services()  # services beside the writes finish first
    assert _files(t) == files and t._timeline.pending() == []
    # The keys the failed instant assigned left the actors' caches (I8): written again, they
    # are new, and get index entries.
    again = t.upsert(_df(spark, [(f"n{i}", "d0", i, 1) for i in range(50)]))
    assert again.keys_inserted == 50
    assert len(_check_index(t)) == 51


def test_schema_mismatch_is_refused_before_any_instant(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    t = _table(tmp_path, runtime)
    with pytest.raises(SchemaMismatchError, match="field 'v' has type string"):
        t.upsert(
            spark.createDataFrame([("a", "d", "x", 1)], "id string, day string, v string, ts long")
        )
    with pytest.raises(SchemaMismatchError, match="ordering field keeps its type"):
        t.upsert(
            spark.createDataFrame([("a", "d", 1, 1.5)], "id string, day string, v long, ts double")
        )
    with pytest.raises(SchemaMismatchError, match=r"\['v'\] of the table schema are missing"):
        t.upsert(spark.createDataFrame([("a", "d", 1)], "id string, day string, ts long"))
    assert t.history() == []


def test_insert_refuses_known_keys(spark: Any, runtime: Runtime, tmp_path: Path) -> None:
    t = _table(tmp_path, runtime)
    t.insert(_df(spark, [("a", "d0", 1, 1)]))
    with pytest.raises(InvalidInputError, match="insert: 1 key"):
        t.insert(_df(spark, [("a", "d0", 2, 2), ("b", "d0", 3, 3)]))
    assert {r["id"] for r in t.to_arrow().to_pylist()} == {"a"}


def test_a_micro_batch_run_again_commits_once(spark: Any, runtime: Runtime, tmp_path: Path) -> None:
    t = _table(tmp_path, runtime)
    writer = t._spark_writer()
    batch = _df(spark, [(f"k{i}", "d0", i, 1) for i in range(10)])
    first = writer.write(batch, "upsert", stream=StreamBatch("orders", 7))
    assert first.keys_inserted == 10
    again = writer.write(
        batch.withColumn("v", batch.v + 1), "upsert", stream=StreamBatch("orders", 7)
    )
    assert again.instant == "" and "already committed" in again.operation
    assert len(t.history()) == 1
    later = writer.write(
        batch.withColumn("v", batch.v + 1), "upsert", stream=StreamBatch("orders", 8)
    )
    assert later.keys_updated == 10


def test_stream_from_a_folder_exactly_once(spark: Any, runtime: Runtime, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    incoming = tmp_path / "in"
    incoming.mkdir()
    for b in range(3):
        rows = pa.table(
            {
                "id": [f"k{i}" for i in range(b * 5, b * 5 + 10)],
                "day": ["d0"] * 10,
                "v": [b] * 10,
                "ts": [b] * 10,
            },
            schema=SCHEMA,
        )
        pq.write_table(rows, incoming / f"b{b}.parquet")
    t = _table(tmp_path, runtime)
    results: list[int] = []
    source = (
        spark.readStream.schema("id string, day string, v long, ts long")
        .option("maxFilesPerTrigger", 1)
        .parquet(str(incoming))
    )
    checkpoint = str(tmp_path / "ckpt")
    t.stream(
        source, checkpoint, trigger={"availableNow": True}, on_batch=lambda i, r: results.append(i)
    ).awaitTermination()
    assert results == [0, 1, 2]
    live = {r["id"]: r["v"] for r in t.to_arrow().to_pylist()}
    assert len(live) == 20 and live["k5"] == 1 and live["k19"] == 2
    # The same query restarted: nothing new to do, nothing written twice.
    t.stream(source, checkpoint, trigger={"availableNow": True}).awaitTermination()
    assert len(t.history()) == 3


def test_hashes_route_like_python(spark: Any) -> None:
    from pyspark.sql import functions as F

    keys = [f"key-{i}" for i in range(200)]
    spark_hashes = [
        r[0]
        for r in spark.createDataFrame([(k,) for k in keys], "id string")
        .select(F.xxhash64("id"))
        .collect()
    ]
    python = hash_columns([pa.array(keys)]).tolist()
    assert spark_hashes == python
    assert list(slot_of(pa.array(python).to_numpy(), 3)) == [h % 3 for h in python]


def test_one_shuffle_whatever_the_slot_count_and_slots_share_buckets(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    t = _table(tmp_path, runtime, cap=4)
    shuffles = []
    for n, keys in ((1, range(0, 6)), (2, range(0, 40)), (2, range(30, 60)), (3, range(50, 90))):
        t.upsert(_df(spark, [(f"k{i}", f"d{i % 2}", i, n) for i in keys]), assigner_slots=n)
        last = t._timeline.completed()[-1]
        shuffles.append(t._timeline.metadata(last)["shuffles"])
    assert shuffles == [1, 1, 1, 1]  # stage A where the rows are; one shuffle by file group
    before = _check_index(t)
    # The slots share buckets: each day holds 45 keys, so ceil(45 / 4) = 12 buckets, with at
    # most one more per slot of the last write still filling (its share of the last one).
    per_day = Counter(r["partition"] for r in t.stats().to_pylist())
    assert all(12 <= n <= 12 + 3 for n in per_day.values()), per_day
    # Every Spark partition holds rows of every slot: each task sends each slot its rows.
    rows = [(f"k{i}", f"d{i % 2}", i, 9) for i in range(0, 100)]
    t.upsert(_df(spark, rows).repartition(7), assigner_slots=3)
    after = _check_index(t)
    assert all(after[k] == b for k, b in before.items())  # I1
    assert max(r["keys"] for r in t.stats().to_pylist()) <= 4


def test_one_python_stage_writes_what_two_write_each_partition_from_one_task(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """The same upserts (new keys, then updates and new keys) through the one-stage job
    (a shuffle by partition, then tag and write in one Python stage) and the two-stage one:
    equal rows, each key in one bucket of its day (I1), buckets within capacity, and in the
    one-stage table each day's index entries of a write in one file: one task held it."""
    one, two = (
        Table.create(
            str(tmp_path / name),
            SCHEMA,
            "id",
            "day",
            "ts",
            DynamicBucketIndex(max_keys_per_bucket=4),
            runtime=runtime,
        )
        for name in ("one", "two")
    )
    two._spark_writer().one_stage_max_bytes = 0
    batches = [
        [(f"k{i}", f"d{i % 3}", i, 1) for i in range(30)],
        [(f"k{i}", f"d{i % 3}", -i, 2) for i in range(20, 50)],
    ]
    # Every shuffle partition a task of its own (Spark would join these small ones into one).
    coalesce = "spark.sql.adaptive.coalescePartitions.enabled"
    with one, two:
        spark.conf.set(coalesce, "false")
        try:
            for n, rows in enumerate(batches):
                # Spark sizes a Parquet scan (not ``createDataFrame`` of a list): one stage fits
                _df(spark, rows).repartition(5).write.parquet(str(tmp_path / f"in{n}"))
                for t in (one, two):
                    t.upsert(spark.read.parquet(str(tmp_path / f"in{n}")), assigner_slots=2)
        finally:
            spark.conf.unset(coalesce)
        for t, stages in ((one, 1), (two, 2)):
            last = t._timeline.completed()[-1]
            assert t._timeline.metadata(last)["python_stages"] == stages
        index_files = {
            t: Counter(
                Path(f["path"]).parent.name
                for instant in t._timeline.completed()
                for f in t._timeline.metadata(instant)["files"]
                if f["kind"] == "index"
            )
            for t in (one, two)
        }
        assert index_files[one] == {"day=d0": 2, "day=d1": 2, "day=d2": 2}  # one per write
        assert sum(index_files[two].values()) > 6  # a day's groups written by several tasks
        rows_of = {
            t: sorted((r["id"], r["day"], r["v"]) for r in t.to_arrow().to_pylist())
            for t in (one, two)
        }
        assert rows_of[one] == rows_of[two] and len(rows_of[one]) == 50
        for t in (one, two):
            assert max(r["keys"] for r in t.stats().to_pylist()) <= 4
            assert len(_check_index(t)) == 50
        check_hudi_reads(one)


@pytest.mark.parametrize(("budget", "reloads"), [(None, 2 * 2 * 2), (64 << 20, 0)])
def test_an_update_only_stream_reloads_the_index_only_without_a_cache_budget(
    spark: Any, runtime: Runtime, tmp_path: Path, budget: int | None, reloads: int
) -> None:
    """The slot actors through Spark: after a write with new keys, three update-only writes
    into two partitions. By the proposal's flags alone the first keeps the caches (they got
    new keys one write ago) and the next two reload both partitions in both slots; within a
    cache budget nothing is reloaded."""
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=1000, cache_max_bytes=budget),
        runtime=runtime,
    )
    keys = [(f"k{i}", f"d{i % 2}") for i in range(400)]
    t.upsert(_df(spark, [(k, d, 0, 0) for k, d in keys]), assigner_slots=2)
    assert t._spark is not None and t._spark.fleet is not None
    loaded = sum(s["bootstraps"] for s in t._spark.fleet.stats())
    for v in range(1, 4):
        r = t.upsert(_df(spark, [(k, d, v, v) for k, d in keys[::3]]), assigner_slots=2)
        assert (r.keys_updated, r.keys_inserted) == (len(keys[::3]), 0)
    assert sum(s["bootstraps"] for s in t._spark.fleet.stats()) - loaded == reloads
    assert {r["v"] for r in checked_live_rows(t) if r["id"] == "k0"} == {3}


def test_another_writers_commit_catches_the_fleets_caches_up_and_keeps_its_actors(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """A commit by another writer (here: a second handle on the table, writing in its own
    process's way) leaves the fleet's caches stale: the next write catches them up (the
    other writer's index delta read, no partition loaded again), keeping the actors, and
    sees the other writer's keys in their buckets."""
    t = _table(tmp_path, runtime, cap=2)
    try:
        t.upsert(_df(spark, [(f"k{i}", "d0", i, 1) for i in range(4)]), assigner_slots=2)
        fleet = t._spark_writer().fleet
        assert fleet is not None
        handles, loaded = list(fleet.handles), sum(s["bootstraps"] for s in fleet.stats())
        other = Table.open(t.uri)
        other.upsert(
            pa.table(
                {"id": ["k8", "k9"], "day": ["d0", "d0"], "v": [8, 9], "ts": [1, 1]}, schema=SCHEMA
            )
        )
        theirs = {k: b for k, b in _check_index(t).items() if k[1] in ("k8", "k9")}
        r = t.upsert(
            _df(spark, [("k8", "d0", 80, 2), ("k9", "d0", 90, 2), ("k10", "d0", 10, 2)]),
            assigner_slots=2,
        )
        assert t._spark_writer().fleet is fleet and fleet.handles == handles
        stats = fleet.stats()
        assert sum(s["bootstraps"] for s in stats) == loaded  # nothing loaded again
        assert all(s["catch_ups"] == 1 for s in stats)
        assert (r.keys_inserted, r.keys_updated) == (1, 2)
        after = _check_index(t)
        assert {k: after[k] for k in theirs} == theirs  # I1 across writers
        assert max(t.stats().column("keys").to_pylist()) <= 2
    finally:
        t.close()


def test_a_compaction_of_this_table_keeps_its_assigner_fleet(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """A compaction, clean or index compaction moves no key: the next write reuses the
    fleet and its caches (no new actors, no bootstrap), and every key keeps its bucket."""
    t = _table(tmp_path, runtime, cap=2)
    try:
        t.upsert(_df(spark, [(f"k{i}", "d0", i, 1) for i in range(6)]), assigner_slots=2)
        t.upsert(_df(spark, [("k1", "d0", 7, 2)]), assigner_slots=2)  # a log to compact
        fleet, before = t._spark_writer().fleet, _check_index(t)
        assert t.compact().instant is not None
        t.clean(retain=1)
        r = t.upsert(_df(spark, [("k0", "d0", 9, 3), ("k9", "d0", 9, 3)]), assigner_slots=2)
        assert t._spark_writer().fleet is fleet
        assert (r.keys_inserted, r.keys_updated) == (1, 1)
        after = _check_index(t)
        assert {k: after[k] for k in before} == before
        assert max(t.stats().column("keys").to_pylist()) <= 2
    finally:
        t.close()


def test_a_table_dropped_unclosed_stops_its_slot_actors(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """A table its user drops without closing it (a notebook cell run again) stops its
    slot actors (~350 MB each) once Python collects it: nothing else (the Spark workers
    that called them, a registry) keeps them alive."""
    import gc

    t = _table(tmp_path, runtime, cap=2)
    t.upsert(_df(spark, [(f"k{i}", f"d{i % 2}", i, 1) for i in range(8)]), assigner_slots=2)
    fleet = t._spark_writer().fleet
    assert fleet is not None
    names = set(fleet.names)
    assert names <= _named_actors()  # alive after the write
    del t, fleet
    gc.collect()
    deadline = time.monotonic() + 30
    while names & _named_actors() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert names & _named_actors() == set()
    assert Table.open(str(tmp_path / "t")).to_arrow().num_rows == 8  # the table is whole


def _named_actors() -> set[str]:
    import ray

    return {a["name"] for a in ray.util.list_named_actors(all_namespaces=True)}


def test_an_adopted_hudi_table_takes_spark_upserts(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """A table Hudi wrote (merge-on-read, an Avro log), adopted, then written through Spark
    tasks and the assigner actors: updates land in Hudi's file groups, new keys fill them
    (fill first, I3) before a bucket opens after them, and hudi-rs reads what dynbucket
    reads."""
    uri = str(unzipped("quickstart_trips_table/mor/avro/v6_trips_8i1u", tmp_path))
    t = Table.adopt(
        uri, DynamicBucketIndex(max_keys_per_bucket=5, assigner_slots=2), runtime=runtime
    )
    before = {
        r["uuid"]: (r["_partition"], r["_bucket"], r["_file_id"]) for r in t.to_arrow().to_pylist()
    }
    rows = t.to_arrow(columns=t._spec.schema.names).select(t._spec.schema.names).to_pylist()
    updated = [{**r, "ts": r["ts"] + 1, "fare": -1.0} for r in rows[:3]]
    new = [{**rows[0], "uuid": f"new-{i}", "ts": 1} for i in range(4)]
    df = spark.createDataFrame(
        updated + new, "ts long, uuid string, rider string, driver string, fare double, city string"
    )
    result = t.upsert(df)
    assert (result.keys_updated, result.keys_inserted) == (3, 4)
    after = {r["uuid"]: r for r in t.to_arrow().to_pylist()}
    for key, place in before.items():  # I1: Hudi's groups keep their keys
        assert (after[key]["_partition"], after[key]["_bucket"], after[key]["_file_id"]) == place
    assert [after[r["uuid"]]["fare"] for r in updated] == [-1.0] * 3
    city = f"city={rows[0]['city']}"
    hudi_group = before[rows[0]["uuid"]][2]
    placed = sorted(
        (after[f"new-{i}"]["_bucket"], after[f"new-{i}"]["_file_id"] == hudi_group)
        for i in range(4)
    )
    held = sum(1 for p, _, f in before.values() if p == city and f == hudi_group)
    # Hudi's group of that city fills to 5 keys first; the rest open bucket 1 and on.
    assert sum(in_hudi for _, in_hudi in placed) == 5 - held
    assert all(bucket >= 1 for bucket, in_hudi in placed if not in_hudi)
    check_hudi_reads(t)
    t.close()


@pytest.mark.parametrize("engine", ["tasks", "driver"])
def test_a_dataframe_with_a_new_field_and_a_promoted_type_evolves_the_table(
    spark: Any, runtime: Runtime, tmp_path: Path, engine: str
) -> None:
    """Through Spark tasks, and through the driver reading the files of a Parquet scan: a
    new field and a promotion (v: int -> bigint) in one write; reads, the commit's schema,
    hudi-rs, and a partial upsert and a compaction after it."""
    narrow = pa.schema(
        [("id", pa.string()), ("day", pa.string()), ("v", pa.int32()), ("ts", pa.int64())]
    )
    t = Table.create(str(tmp_path / "t"), narrow, "id", "day", "ts", runtime=runtime)
    if engine == "driver":
        t._spark_writer().driver_max_bytes = 8 << 20
    with t:
        t.upsert(
            spark.createDataFrame(
                [("a", "d1", 1, 1), ("b", "d2", 2, 1)], "id string, day string, v int, ts long"
            )
        )
        rows = [("b", "d2", 2**40, 2, "x"), ("c", "d1", 3, 2, "y")]
        df = spark.createDataFrame(rows, "id string, day string, v long, ts long, w string")
        if engine == "driver":  # a bare Parquet scan: the driver reads the files itself
            df.write.parquet(str(tmp_path / "in"))
            df = spark.read.parquet(str(tmp_path / "in"))
        t.upsert(df)
        shuffles = t._timeline.metadata(t._timeline.completed()[-1])["shuffles"]
        assert shuffles == (0 if engine == "driver" else 1)  # the engine asked for
        assert t.schema.names == ["id", "day", "v", "ts", "w"]
        assert t.schema.field("v").type == pa.int64()
        want = {"a": (1, None), "b": (2**40, "x"), "c": (3, "y")}
        assert {r["id"]: (r["v"], r["w"]) for r in t.to_arrow().to_pylist()} == want
        t.upsert(
            spark.createDataFrame([("a", "d1", 9)], "id string, day string, ts long"), partial=True
        )
        t.compact()
        got = {r["id"]: (r["v"], r["w"], r["ts"]) for r in t.to_arrow().to_pylist()}
        assert got == {"a": (1, None, 9), "b": (2**40, "x", 2), "c": (3, "y", 2)}
        check_hudi_reads(t)


def test_a_global_index_moves_keys_through_spark_tasks_the_driver_and_a_stream(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """A key is one row in the table whichever Spark path writes it: moves through Spark
    tasks (a newer record moves, an older one loses, one key in two partitions of a batch
    ends in the newest), through the driver, a delete by key alone, and a stream's
    micro-batches; hudi-rs reads one row per key too."""
    import pyarrow.parquet as pq

    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=3, global_index=True),
        runtime=runtime,
    )
    t.upsert(_df(spark, [(f"k{i}", f"d{i % 3}", i, 1) for i in range(30)]), assigner_slots=2)
    moves = [(f"k{i}", "d9", 100 + i, 2) for i in range(10)]
    moves += [("k10", "d8", -1, 0), ("k11", "d7", 7, 3), ("k11", "d8", 8, 2)]
    tasks = t.upsert(_df(spark, moves), assigner_slots=3)
    assert (tasks.keys_moved, tasks.keys_stale, tasks.keys_inserted) == (11, 1, 0)
    assert "spark" in tasks.seconds
    t._spark_writer().driver_max_bytes = RuntimeConfig().driver_write_max_bytes
    back = [{"id": f"k{i}", "day": "d0", "v": i, "ts": 5} for i in range(5)]
    pq.write_table(pa.Table.from_pylist(back, SCHEMA), tmp_path / "back.parquet")
    driver = t.upsert(spark.read.parquet(str(tmp_path / "back.parquet")))  # Spark sizes it
    assert driver.keys_moved == 5 and "driver" in driver.seconds
    gone = t.delete(spark.createDataFrame([("k5",), ("nope",)], "id string"))
    assert (gone.keys_deleted, gone.keys_not_found) == (1, 1)
    incoming = tmp_path / "in"
    incoming.mkdir()
    for b, (keys, day, ts) in enumerate([(range(20, 25), "d5", 10), (range(20, 21), "d6", 11)]):
        rows = [(f"k{i}", day, i, ts) for i in keys]
        records = [dict(zip(SCHEMA.names, r, strict=True)) for r in rows]
        pq.write_table(pa.Table.from_pylist(records, SCHEMA), incoming / f"b{b}.parquet")
        os.utime(incoming / f"b{b}.parquet", (1_700_000_000 + 60 * b,) * 2)
    source = spark.readStream.schema("id string, day string, v long, ts long")
    t.stream(
        source.option("maxFilesPerTrigger", 1).parquet(str(incoming)),
        str(tmp_path / "ckpt"),
        trigger={"availableNow": True},
    ).awaitTermination()
    want = {f"k{i}": f"d{i % 3}" for i in range(30)}
    want.update({f"k{i}": "d9" for i in range(10)} | {"k11": "d7"})
    want.update({f"k{i}": "d0" for i in range(5)} | {f"k{i}": "d5" for i in range(21, 25)})
    want["k20"] = "d6"
    del want["k5"]
    rows = checked_live_rows(t)
    assert len(rows) == len({r["id"] for r in rows}) == 29
    assert {r["id"]: r["day"] for r in rows} == want
    check_hudi_reads(t, time_travel=False)
    assert t.check().healthy
