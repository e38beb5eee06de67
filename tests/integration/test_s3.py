"""Tables on S3 (the moto server of ``tests/s3.py``): Spark tasks write the objects directly,
every exclusive create is a conditional write, and Hudi's reader reads what we write."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from dynbucket.format.storage.retrying import unwrapped
from dynbucket.options import DynamicBucketIndex, SimpleBucketIndex, TableOptions
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads
from tests.integration.invariants import checked_live_rows
from tests.s3 import S3Server
from tests.seeds import seeds
from tests.writers import run_model

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
DDL = "id string, day string, v long, ts long"


def test_spark_tasks_write_a_table_on_s3_that_hudi_reads(
    spark: Any, runtime: Runtime, s3_server: S3Server
) -> None:
    uri = s3_server.uri()
    t = Table.create(
        uri, SCHEMA, "id", "day", "ts", DynamicBucketIndex(max_keys_per_bucket=4), runtime=runtime
    )
    try:
        rows = [(f"k{i}", f"d{i % 2}", i, 1) for i in range(20)]
        r = t.upsert(spark.createDataFrame(rows, DDL), assigner_slots=2)
        assert r.keys_inserted == 20
        # Two slots again (the machine's count would split the rooms otherwise).
        t.upsert(
            spark.createDataFrame([("k1", "d1", 100, 2), ("k40", "d0", 40, 2)], DDL),
            assigner_slots=2,
        )
        live = checked_live_rows(t)
        assert {r["id"]: r["v"] for r in live} == {
            **{f"k{i}": i for i in range(20)},
            "k1": 100,
            "k40": 40,
        }
        # d0's ten keys: seven route to slot 0, three to slot 1, and each slot may put two
        # keys in a bucket of four: slot 0 fills 0, 1, 2 and puts its seventh in 3, slot 1
        # fills 0 and puts one in 1; k40 (slot 0) takes its share of the room 2 has left.
        d0 = Counter(r["_bucket"] for r in live if r["day"] == "d0")
        assert d0 == {0: 4, 1: 3, 2: 3, 3: 1}
        keys = s3_server.keys(uri)
        assert any(k.endswith(".hoodie/hoodie.properties") for k in keys)
        assert not [k for k in keys if ".tmp-" in k]  # written in place: no renames
        check_hudi_reads(t)
    finally:
        t.close()
    # Opened again by URI alone: endpoint and credentials come from the AWS settings.
    again = Table.open(uri)
    assert again.to_arrow().num_rows == 21
    assert isinstance(unwrapped(again._store.fs), pafs.S3FileSystem)
    assert again._store.fs.type_name == "py::retrying-s3"  # every request made again


#: Trials of the race; each has three writers start at once.
RACE_TRIALS = 10
RACERS = 3


def _racer(uri: str, me: int, barrier: Any, results: Any) -> None:
    """One of the racing processes: per trial, take the lease with the others at once (and
    hold it until all have tried), then upsert a row of its own with the others at once."""
    # Closed at the end: a compaction this racer executed whose finish found another
    # racer holding the lease is finished there (no other racer executes it meanwhile).
    with Table.open(uri) as table:
        for trial in range(RACE_TRIALS):
            try:
                results.put(_race_once(table, trial, me, barrier))
            except Exception as e:  # reported, so the test fails naming it rather than hang
                results.put((trial, me, repr(e), False))
                barrier.abort()
                return


def _race_once(table: Table, trial: int, me: int, barrier: Any) -> tuple[int, int, bool, bool]:
    from dynbucket.base.errors import ConcurrentWriteError
    from dynbucket.format.timeline.lock import WriterLock

    barrier.wait()
    lock = WriterLock(table._store, lease_seconds=30)
    try:
        lock.acquire()
        held = True
    except ConcurrentWriteError:
        held = False
    barrier.wait()  # every racer has tried while the winner holds it
    lock.release()
    barrier.wait()
    row = pa.table(
        {"id": [f"t{trial}-w{me}"], "day": ["d0"], "v": [me], "ts": [trial]}, schema=SCHEMA
    )
    try:
        table.upsert(row)
        wrote = True
    except ConcurrentWriteError:
        wrote = False
    return trial, me, held, wrote


def test_three_processes_racing_for_an_s3_table_one_holds_it_and_nothing_is_lost(
    s3_server: S3Server,
) -> None:
    import multiprocessing as mp

    uri = s3_server.uri()
    # The whole write's lease of one writer (several writers take it only for a moment).
    one = TableOptions(write_concurrency_mode="SINGLE_WRITER")
    Table.create(uri, SCHEMA, "id", "day", "ts", options=one)
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(RACERS, timeout=120), ctx.Queue()
    procs = [ctx.Process(target=_racer, args=(uri, i, barrier, results)) for i in range(RACERS)]
    for p in procs:
        p.start()
    outcomes = []
    while len(outcomes) < RACE_TRIALS * RACERS:
        outcomes.append(results.get(timeout=300))
        assert isinstance(outcomes[-1][2], bool), f"a racer failed: {outcomes[-1]}"
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    by_trial: dict[int, list[tuple[int, bool, bool]]] = {}
    for trial, me, held, wrote in outcomes:
        by_trial.setdefault(trial, []).append((me, held, wrote))
    for trial, racers in by_trial.items():
        assert sum(held for _, held, _ in racers) == 1, (trial, racers)  # one holder
        assert any(wrote for *_, wrote in racers), (trial, racers)
    # Every upsert that returned is there once; every refused one is absent.
    t = Table.open(uri)
    written = sorted(f"t{trial}-w{me}" for trial, me, _, wrote in outcomes if wrote)
    assert sorted(t.to_arrow(columns=["id"]).column("id").to_pylist()) == written
    completed = [i.id for i in t._timeline.completed("commit")]
    assert len(completed) == len(set(completed)) == len(written)  # no instant taken twice
    t.wait_for_services()  # services beside the writes finish first
    assert t._timeline.pending() == []


def test_no_folder_objects_after_writes_deletes_and_services(s3_server: S3Server) -> None:
    """In process, on S3: every operation that deletes files (rollback of a failed
    instant, compaction, index compaction, clean) and a stateless delete of unknown keys in
    a new partition leave no zero-byte folder object and no partition without data."""
    uri = s3_server.uri()
    t = Table.create(
        uri,
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=4),
        TableOptions(cleaner_commits_retained=1),
    )
    t.upsert(pa.table({"id": ["a", "b"], "day": ["d1", "d1"], "v": [1, 2], "ts": [1, 1]}))
    t.upsert(pa.table({"id": ["a", "c"], "day": ["d1", "d1"], "v": [3, 4], "ts": [2, 2]}))
    t.delete(pa.table({"id": ["b"], "day": ["d1"]}))
    assert t.compact_index(min_files=2).instant is not None
    t.compact()
    t.clean()
    simple = Table.create(
        s3_server.uri("s"), SCHEMA, "id", "day", "ts", SimpleBucketIndex(num_buckets=2)
    )
    simple.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [1], "ts": [1]}))
    assert simple.delete(pa.table({"id": ["x"], "day": ["d9"]})).keys_not_found == 1
    keys = s3_server.keys(uri) + s3_server.keys(simple.uri)
    assert [k for k in keys if k.endswith("/")] == []
    assert not [k for k in keys if "/day=d9/" in k]
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {"a": 3, "c": 4}


@pytest.mark.sample(1, family="the writers model on S3")
@pytest.mark.parametrize("seed", seeds(int(os.environ.get("DYNBUCKET_WRITERS_RUNS", "1")), 1))
def test_several_writers_on_s3_match_the_model(
    s3_server: S3Server, tmp_path: Path, seed: int
) -> None:
    """Three writer processes on one S3 table at once, SIGSTOPped and one SIGKILLed: the
    model of ``tests/property/test_writers_model.py`` holds, and hudi-rs reads the same."""
    table = run_model(s3_server.uri(), seed, tmp_path)
    try:
        check_hudi_reads(table, time_travel=False)
    finally:
        table.close()
