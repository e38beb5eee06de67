"""The full Spark + Ray path against an in-memory reference: seeded multi-batch workloads
(in the suite 3, one per path, one on S3 and one per stateless scheme, new seeds each run:
``tests/seeds.py``; ``DYNBUCKET_MODEL_WORKLOADS=30``, ``make test-long``, runs 30 and scales
the S3 and stateless ones alike).

Each workload has inserts, updates and deletes over several partitions, a small bucket
capacity (buckets fill up), and a slot count that changes half-way; half the
workloads write merge-on-read tables, half copy-on-write; a third are written by the driver
(small DataFrames' default path), the others by Spark tasks. After every batch: the snapshot
equals the model; every live key keeps its first bucket (I1; a deleted key comes back as
a new key); no slot added more keys to a bucket
than its share of the bucket's room, and a slot put keys in a new bucket only once it had
used its share of every bucket before (I3, ``tests/shares.py``), so no bucket holds more
keys than its capacity; one file group per bucket (I4); and hudi-rs reads what dynbucket
reads (snapshot, as of every completed instant, incremental, read-optimized). Then
compaction, a dead writer's instant rolled back, and cleaning, each followed by the same
checks.
"""

from __future__ import annotations

import os
import random
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.base.errors import InvalidInputError
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.options import (
    ConsistentHashingIndex,
    DynamicBucketIndex,
    SimpleBucketIndex,
    TableOptions,
)
from dynbucket.runtime import Runtime, RuntimeConfig
from dynbucket.table import Table
from tests.dead_writer import die_mid_instant
from tests.hudi_readers import check_hudi_reads
from tests.s3 import S3Server
from tests.seeds import seeds
from tests.shares import added_by_slot, check_shares

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
#: Workloads in the suite (each path of ``_frames`` takes a third of them, each run new
#: seeds: ``tests/seeds.py``); ``make test-long`` runs 30.
WORKLOADS = int(os.environ.get("DYNBUCKET_MODEL_WORKLOADS", "2"))
BATCHES = 4
DAYS = ["d0", "d1", "d2"]


def _batch(rng: random.Random, keys: int, step: int) -> list[tuple[str, str, int, int]]:
    rows = []
    for _ in range(rng.randrange(4, 25)):
        k = rng.randrange(keys)
        # Duplicates of a key in one batch get distinct ordering values (ties in one Spark
        # batch resolve to any of them); the day is a function of the key.
        rows.append((f"k{k}", DAYS[k % 3], rng.randrange(1000), step * 100 + len(rows)))
    return rows


CHANGE_DDL = "id string, day string, v long, ts long, _hoodie_is_deleted boolean"


def _change_batch(
    rng: random.Random, keys: int, step: int
) -> list[tuple[str, str, int | None, int, bool]]:
    """A change batch: a third deletes, of which some older than any stored row (negative
    ordering values: stale), keys more than once, unknown keys."""
    rows: list[tuple[str, str, int | None, int, bool]] = []
    for key, day, v, ts in _batch(rng, keys + 5, step):
        if rng.random() < 0.35:
            stale = rng.random() < 0.3
            rows.append((key, day, None, -1 - len(rows) if stale else ts, True))
        else:
            rows.append((key, day, v, ts, False))
    return rows


def _changed(
    model: dict[str, tuple[int, int]],
    first_bucket: dict[str, int],
    rows: list[tuple[str, str, int | None, int, bool]],
) -> None:
    """The model after a change batch: per key the record of the largest ordering value
    wins, deletes alike; a winning delete takes a stored key out unless the stored row's
    ordering value is larger."""
    won: dict[str, tuple[int | None, int, bool]] = {}
    for key, _, v, ts, deleted in rows:
        if key not in won or ts > won[key][1]:
            won[key] = (v, ts, deleted)
    for key, (v, ts, deleted) in won.items():
        if not deleted:
            _upserted(model, [(key, "", v, ts)])  # type: ignore[list-item]
        elif key in model and model[key][1] <= ts:
            del model[key]
            first_bucket.pop(key, None)  # out of the index: back as a new key


def _passthrough(df: Any) -> Any:
    return df


def _sized(spark: Any, folder: Path) -> Callable[[Any], Any]:
    """DataFrames Spark can size (read back from Parquet), so the driver path takes them
    (Spark cannot size ``createDataFrame`` of a list)."""
    written = iter(range(1_000_000))

    def frame(df: Any) -> Any:
        path = str(folder / f"batch-{next(written)}")
        df.write.parquet(path)
        return spark.read.parquet(path)

    return frame


def _path_of(t: Table, spark: Any, tmp_path: Path, seed: int) -> Callable[[Any], Any]:
    """A third of the workloads through the driver reading Parquet files
    (``write/file_scan.py``; the session's runtime says never), a third through the driver
    taking ``createDataFrame``'s local rows (``write/local_rows.py``), the others through
    Spark tasks: half of them DataFrames Spark sizes (read back from Parquet), in one Python
    stage after a shuffle by partition, half in two (``engines.tag_and_write``; Spark cannot
    size ``createDataFrame`` of a list): how to make their DataFrames."""
    if seed % 3 == 2:
        if seed % 2:
            t._spark_writer().one_stage_max_bytes = 0
            return _passthrough
        return _sized(spark, tmp_path / "in")
    t._spark_writer().driver_max_bytes = RuntimeConfig().driver_write_max_bytes
    return _sized(spark, tmp_path / "in") if seed % 3 == 0 else _passthrough


def _upserted(model: dict[str, tuple[int, int]], rows: list[tuple[str, str, int, int]]) -> None:
    """The model after an upsert: a key takes the row with the largest ordering value."""
    for key, _, v, ts in rows:
        old = model.get(key)
        if old is None or ts >= old[1]:
            model[key] = (v, ts)


def _bucket_keys(t: Table) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = defaultdict(dict)
    for r in t.stats().to_pylist():
        out[r["partition"]][r["bucket"]] = r["keys"]
    return out


@pytest.mark.parametrize("seed", seeds(WORKLOADS))
def test_workload_matches_the_model(
    spark: Any, runtime: Runtime, tmp_path: Path, seed: int
) -> None:
    _dynamic_workload(str(tmp_path / "t"), spark, runtime, tmp_path, seed)


#: Workloads whose table is on the S3 test server (``tests/s3.py``).
S3_WORKLOADS = max(1, WORKLOADS // 6)


@pytest.mark.parametrize("seed", seeds(S3_WORKLOADS, offset=1))
def test_workload_on_s3_matches_the_model(
    spark: Any, runtime: Runtime, tmp_path: Path, s3_server: S3Server, seed: int
) -> None:
    """The same workloads on ``s3://``: Spark tasks and actors read and write the objects;
    leases, instant requests and the table's creation are conditional writes."""
    uri = s3_server.uri()
    # hudi-rs reads the S3 table once, at the end, with time travel over every instant
    # (each read of each instant after each batch, as on local tables, costs minutes here).
    _dynamic_workload(uri, spark, runtime, tmp_path, seed, hudi_every_batch=False)
    assert not [k for k in s3_server.keys(uri) if ".tmp-" in k]  # nothing relies on renames


def _dynamic_workload(
    location: str,
    spark: Any,
    runtime: Runtime,
    tmp_path: Path,
    seed: int,
    hudi_every_batch: bool = True,
) -> None:
    rng = random.Random(seed)
    cap = rng.choice([2, 3, 5])
    # The slot count changes once, half-way: each change starts a new fleet of actor
    # processes (a second or two here), and the table's own count is the first, so that the
    # fleet started with the table serves the first batches.
    counts = rng.sample([1, 2, 3], 2)
    table_type = "MERGE_ON_READ" if seed % 2 == 0 else "COPY_ON_WRITE"
    t = Table.create(
        location,
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=cap, assigner_slots=counts[0]),
        TableOptions(table_type=table_type, lock_lease_seconds=30),
        runtime=runtime,
    )
    frame = _path_of(t, spark, tmp_path, seed)
    model: dict[str, tuple[int, int]] = {}
    first_bucket: dict[str, int] = {}
    keys = rng.choice([12, 30, 60])
    next_fresh = 10_000
    try:
        for step in range(BATCHES):
            slots = counts[step >= BATCHES // 2]
            before = _bucket_keys(t)
            last = t.latest_instant()
            kinds = ["upsert", "delete", "insert", "change", "partial"]
            kind = rng.choices(kinds, [5, 2, 1, 2, 1])[0]
            if kind == "partial":  # records without ``v``: a known key keeps its value
                rows = [
                    (k, d, model[k][0] if k in model else None, ts)
                    for k, d, _, ts in _batch(rng, keys, step)
                ]
                records = spark.createDataFrame(
                    [(k, d, ts) for k, d, _, ts in rows], "id string, day string, ts long"
                )
                r = t.upsert(frame(records), assigner_slots=slots, partial=True)
                _upserted(model, rows)  # type: ignore[arg-type]
            elif kind == "change":  # upserts and deletes marked in the records, one instant
                changes = _change_batch(rng, keys, step)
                r = t.upsert(
                    frame(spark.createDataFrame(changes, CHANGE_DDL)), assigner_slots=slots
                )
                _changed(model, first_bucket, changes)
            elif kind == "upsert":
                rows = _batch(rng, keys, step)
                r = t.upsert(
                    frame(spark.createDataFrame(rows, "id string, day string, v long, ts long")),
                    assigner_slots=slots,
                )
                _upserted(model, rows)
            elif kind == "delete":
                gone = [(f"k{k}", DAYS[k % 3]) for k in rng.sample(range(keys + 5), 4)]
                r = t.delete(
                    frame(spark.createDataFrame(gone, "id string, day string")),
                    assigner_slots=slots,
                )
                for key, _ in gone:
                    if model.pop(key, None) is not None:
                        first_bucket.pop(key)  # out of the index: back as a new key
            else:
                fresh = [(f"k{next_fresh + i}", DAYS[i % 3], i, step) for i in range(5)]
                next_fresh += 5
                r = t.insert(
                    frame(spark.createDataFrame(fresh, "id string, day string, v long, ts long")),
                    assigner_slots=slots,
                )
                model.update({key: (v, ts) for key, _, v, ts in fresh})
            _check(t, model, first_bucket, before, cap, slots, shares=kind != "change")
            if r.instant:  # a write of nothing (a delete of absent keys) commits none
                shuffles = t._timeline.metadata(t._timeline.completed()[-1])["shuffles"]
                writer = t._spark_writer()
                driver = writer.driver_max_bytes > 0
                assert (shuffles == 0) == driver  # the seed's path
                stages = t._timeline.metadata(t._timeline.completed()[-1])["python_stages"]
                assert stages == (0 if driver else 1 if writer.one_stage_max_bytes else 2)
                # createDataFrame's local rows taken from their collection, not collected
                assert not (driver and frame is _passthrough and "collect" in r.seconds)
            else:
                assert t.latest_instant() == last and r.rows_written == 0
            if hudi_every_batch:
                check_hudi_reads(t, incremental_after=last)
        # Table services, each an instant of its own, read alike by both.
        t.compact()
        dead = die_mid_instant(t, [{"id": "k0", "day": "d0", "v": -1, "ts": -1}])
        assert t.rollback() == [dead]
        t.clean(retain=2)
        assert {r["id"]: (r["v"], r["ts"]) for r in t.to_arrow().to_pylist()} == model
        check_hudi_reads(t)
    finally:
        t.close()


def _check(
    t: Table,
    model: dict[str, tuple[int, int]],
    first_bucket: dict[str, int],
    before: dict[str, dict[int, int]],
    cap: int,
    slots: int,
    shares: bool = True,
) -> None:
    """The model, I1, I3 (``shares``: the rule slots share buckets by; a change batch's
    deletes of unknown keys take room in their instant unseen by it), I4."""
    live = t.to_arrow().to_pylist()
    assert {r["id"]: (r["v"], r["ts"]) for r in live} == model
    seen = set(first_bucket)  # every key live before this batch
    for r in live:
        assert first_bucket.setdefault(r["id"], r["_bucket"]) == r["_bucket"]  # I1
    after = _bucket_keys(t)
    new = [r for r in live if r["id"] not in seen]
    added = added_by_slot(
        [f"day={r['day']}" for r in new], [r["id"] for r in new], [r["_bucket"] for r in new], slots
    )
    if shares:
        check_shares(before, added, cap, slots)  # I3
    for partition, buckets in after.items():
        assert max(buckets.values()) <= cap  # I3: never over capacity
        ids = [r.slice.bucket for r in t.snapshot().slices([partition])]
        assert len(ids) == len(set(ids))  # I4


#: Workloads per stateless scheme (simple bucket, consistent hashing).
STATELESS_WORKLOADS = max(1, WORKLOADS // 6)


def _stateless_index(scheme: str, rng: random.Random) -> Any:
    if scheme == "simple":
        return SimpleBucketIndex(
            num_buckets=rng.choice([1, 2, 3]), partition_buckets=rng.choice([{}, {"day=d1": 4}])
        )
    return ConsistentHashingIndex(
        initial_buckets=rng.choice([1, 2]),
        max_keys_per_bucket=rng.choice([3, 5]),
        min_keys_per_bucket=1,
    )


def _layout_ok(t: Table) -> None:
    """Every live key sits where its partition's layout puts it (no index to ask)."""
    report = t.check()
    assert report.healthy, report.summary()


@pytest.mark.parametrize(
    ("scheme", "seed"),
    [
        (s, n)
        for i, s in enumerate(("simple", "consistent"), 2)
        for n in seeds(STATELESS_WORKLOADS, i)
    ],
)
def test_stateless_workload_matches_the_model(
    spark: Any, runtime: Runtime, tmp_path: Path, scheme: str, seed: int
) -> None:
    """The same workloads for the stateless schemes, through Spark tasks (no actors) or the
    driver, with a rescale or rebalance after the second batch: keys keep their buckets
    except across it, and sit where the layout says (``dynbucket check``) after every batch;
    hudi-rs reads every instant, before and after the growth, as dynbucket does."""
    rng = random.Random(seed)
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "ts",
        _stateless_index(scheme, rng),
        TableOptions(
            table_type="MERGE_ON_READ" if seed % 2 == 0 else "COPY_ON_WRITE", lock_lease_seconds=30
        ),
        runtime=runtime,
    )
    frame = _path_of(t, spark, tmp_path, seed)
    model: dict[str, tuple[int, int]] = {}
    first_bucket: dict[str, int] = {}
    keys = rng.choice([12, 30, 60])
    next_fresh = 10_000
    try:
        for step in range(BATCHES):
            last = t.latest_instant()
            kind = rng.choices(["upsert", "delete", "insert"], [6, 2, 1])[0] if step else "upsert"
            if kind == "upsert":
                rows = _batch(rng, keys, step)
                r = t.upsert(
                    frame(spark.createDataFrame(rows, "id string, day string, v long, ts long"))
                )
                fresh_keys = {k for k, *_ in rows} - set(model)
                assert r.keys_inserted == len(fresh_keys)
                _upserted(model, rows)
            elif kind == "delete":
                gone = [(f"k{k}", DAYS[k % 3]) for k in rng.sample(range(keys + 5), 4)]
                r = t.delete(frame(spark.createDataFrame(gone, "id string, day string")))
                assert r.keys_deleted + r.keys_not_found == 4
                assert r.keys_deleted == len({k for k, _ in gone} & set(model))
                for key, _ in gone:
                    model.pop(key, None)
            else:
                fresh = [(f"k{next_fresh + i}", DAYS[i % 3], i, step) for i in range(5)]
                next_fresh += 5
                t.insert(
                    frame(spark.createDataFrame(fresh, "id string, day string, v long, ts long"))
                )
                model.update({key: (v, ts) for key, _, v, ts in fresh})
            live = t.to_arrow().to_pylist()
            assert {r["id"]: (r["v"], r["ts"]) for r in live} == model
            for r in live:
                assert first_bucket.setdefault(r["id"], r["_bucket"]) == r["_bucket"]  # I1
            _layout_ok(t)
            check_hudi_reads(t, incremental_after=last)
            if step == 1:  # growth: keys move only here, where the new layout says
                (t.rescale(2) if scheme == "simple" else t.rebalance())
                first_bucket.clear()
                _layout_ok(t)
                assert {r["id"]: (r["v"], r["ts"]) for r in t.to_arrow().to_pylist()} == model
                check_hudi_reads(t)
        known = t.to_arrow().to_pylist()[0]
        with pytest.raises(InvalidInputError, match="already exist"):
            t.insert(
                spark.createDataFrame(
                    [(known["id"], known["day"], 0, 0)], "id string, day string, v long, ts long"
                )
            )
        assert {r["id"]: (r["v"], r["ts"]) for r in t.to_arrow().to_pylist()} == model
        assert not RecordLevelIndex(
            t._store, t._spec
        ).partitions()  # no index, no actors: nothing but the files
        t.compact()
        t.clean(retain=2)
        check_hudi_reads(t)
    finally:
        t.close()
