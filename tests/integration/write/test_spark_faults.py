"""Faults in the middle of a write, through real Spark tasks and real assigner actors.

Each test breaks one thing at one point of an instant, then checks that the instant was
aborted or retried and that what is left keeps the invariants: old keys keep their buckets
(I1), one file group per bucket (I4), the index names every live key's bucket (I6), and no
trace of an uncommitted instant stays in the caches (I8), on the timeline or on storage.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from dynbucket.base.errors import CommitFailedError
from dynbucket.format.hudi.files import parse
from dynbucket.format.table.context import Operation, TableRef, WriteContext
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline import outcome
from dynbucket.options import DynamicBucketIndex
from dynbucket.runtime import Runtime
from dynbucket.table import Table
from dynbucket.write import engines, schemes
from tests.hudi_readers import check_hudi_reads
from tests.integration.invariants import checked_live_rows
from tests.integration.processes import marked_env, wait_until_gone

SCHEMA = pa.schema(
    [("id", pa.string()), ("day", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
DDL = "id string, day string, v long, ts long"
#: A change stream's records: Debezium's ``op`` (``c`` create, ``u`` update, ``d`` delete).
CHANGE_DDL = DDL + ", op string"


def _rows(keys: range, v: int) -> list[tuple[str, str, int, int]]:
    return [(f"k{i}", f"d{i % 3}", v, v) for i in keys]


@pytest.fixture(params=["local", "s3"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fault on a local table and on one on the S3 test server."""
    if request.param == "s3":
        return str(request.getfixturevalue("s3_server").uri())
    return str(tmp_path / "t")


def _table(location: str, runtime: Runtime, **options: Any) -> Table:
    return Table.create(
        location,
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=50),
        TableOptions(**options),
        runtime=runtime,
    )


def _files_on_storage(t: Table) -> set[str]:
    """Data files (base and log files) and index files."""
    return {
        i.path
        for i in t._store.walk(t._store.root)
        if parse(i.base_name) is not None or ".dynbucket/rli/" in i.path
    }


def _files_committed(t: Table) -> set[str]:
    return {f["path"] for i in t._timeline.completed() for f in t._timeline.metadata(i)["files"]}


def _state(t: Table) -> dict[tuple[str, str], tuple[int, int]]:
    """(day, id) -> (value, bucket), after checking I4, I6 and that storage holds exactly
    the files of completed instants (no file of a dead attempt or instant)."""
    t.wait_for_services()  # services beside the writes finish first
    assert t._timeline.pending() == []
    assert _files_on_storage(t) == _files_committed(t)
    live = {(r["day"], r["id"]): (r["v"], r["_bucket"]) for r in checked_live_rows(t)}
    return live


def _same_buckets(before: dict[Any, tuple[int, int]], after: dict[Any, tuple[int, int]]) -> None:
    moved = {k: (before[k][1], after[k][1]) for k in before if after[k][1] != before[k][1]}
    assert moved == {}, f"keys changed bucket (I1): {moved}"


def _once() -> Callable[[Path], bool]:
    """A function true exactly once per flag file, across processes (Spark tasks run in
    Python workers). Built in a closure so that Spark pickles it by value."""

    def first_time(flag: Path) -> bool:
        import os

        try:
            os.close(os.open(flag, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            return True
        except FileExistsError:
            return False

    return first_time


@pytest.fixture
def small_arrow_batches(spark: Any) -> Iterator[None]:
    """Several Arrow batches per task, so a fault can land between two of them."""
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    old = spark.conf.get(key)
    spark.conf.set(key, "150")
    yield
    spark.conf.set(key, old)


def _killing_slot_0(flag: Path) -> Callable[..., Any]:
    """``assign_fn`` whose tasks, after the write's first answer, kill slot 0's actor once
    (``flag``; Ray restarts it), 150 rows a call: a task's next call is sent before it takes
    an answer, so a task must make three calls or more for one to reach the killed slot
    (with 400 a call, a task of 750 rows made two, and CI once saw no call notice it)."""
    original = schemes.assign_fn
    first_time = _once()

    def killing_assign_fn(link: Any, names: list[str], checkpoint: int, **kw: Any) -> Any:
        tag = original(link, names, checkpoint, **{**kw, "rows_per_call": 150})

        def tag_then_kill(batches: Iterator[pa.RecordBatch], *more: Any) -> Iterator[Any]:
            import ray

            for i, out in enumerate(tag(batches, *more)):
                yield out
                if i == 0 and first_time(flag):
                    ray.kill(link.actor(names[0]), no_restart=False)

        return tag_then_kill

    return killing_assign_fn


@pytest.mark.sample(1, family="a slot actor dying mid-write")
def test_an_actor_dying_mid_batch_retries_the_instant(
    spark: Any,
    runtime: Runtime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    small_arrow_batches: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """On a local table (the other faults below run on S3 too; this one's 3,000 rows
    twice take ~40 s there)."""
    t = _table(str(tmp_path / "t"), runtime)
    t.upsert(spark.createDataFrame(_rows(range(0, 3000), 1), DDL), assigner_slots=2)
    before = _state(t)
    flag = tmp_path / "killed"
    monkeypatch.setattr(schemes, "assign_fn", _killing_slot_0(flag))
    with caplog.at_level("WARNING", logger="dynbucket.write.spark"):
        result = t.upsert(spark.createDataFrame(_rows(range(1500, 6000), 2), DDL), assigner_slots=2)
    assert flag.exists()
    assert "restarted during the write; retrying" in caplog.text
    assert (result.keys_updated, result.keys_inserted) == (1500, 3000)
    after = _state(t)
    _same_buckets(before, after)
    assert {k for k, (v, _) in after.items() if v == 2} == {
        (f"d{i % 3}", f"k{i}") for i in range(1500, 6000)
    }
    t.wait_for_services()  # services beside the writes finish first
    assert len(t.history()) == 2 and t._timeline.pending() == []


@pytest.mark.sample(1, family="a slot actor dying mid-write")
def test_a_global_move_whose_actor_dies_is_retried_and_moves_each_key_once(
    spark: Any,
    runtime: Runtime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    small_arrow_batches: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A global index's write that moves 900 keys to the next day (and loses 30 moves to
    older ordering values) through two slots loses slot 0's actor after its first answer:
    the instant is retried, and every key is in exactly one partition, the one its newest
    record names, for dynbucket and hudi-rs; the index agrees and no bucket is over."""
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "day",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=50, global_index=True),
        runtime=runtime,
    )
    t.upsert(spark.createDataFrame(_rows(range(0, 900), 1), DDL), assigner_slots=2)
    moves = [(f"k{i}", f"d{(i + 1) % 3}", 2, 2 if i >= 30 else 0) for i in range(900)]
    flag = tmp_path / "killed"
    monkeypatch.setattr(schemes, "assign_fn", _killing_slot_0(flag))
    with caplog.at_level("WARNING", logger="dynbucket.write.spark"):
        result = t.upsert(spark.createDataFrame(moves, DDL), assigner_slots=2)
    monkeypatch.undo()
    assert flag.exists() and "restarted during the write; retrying" in caplog.text
    assert (result.keys_moved, result.keys_stale, result.keys_inserted) == (870, 30, 0)
    rows = checked_live_rows(t)
    assert len(rows) == 900 and len({r["id"] for r in rows}) == 900
    assert {r["id"]: r["day"] for r in rows} == {
        f"k{i}": f"d{(i + 1) % 3 if i >= 30 else i % 3}" for i in range(900)
    }
    check_hudi_reads(t, time_travel=False)
    assert t.check().healthy and max(t.stats().column("keys").to_pylist()) <= 50


@pytest.mark.sample(1, family="a slot actor dying mid-write")
def test_a_delete_whose_actor_dies_is_retried_and_gives_its_room_back(
    spark: Any,
    runtime: Runtime,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    small_arrow_batches: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A delete through two slots loses slot 0's actor after its first answer (retried),
    then a delete fails at its commit point (aborted: its keys stay); the committed
    delete's room is free: new keys, through a new one-slot fleet that bootstraps its
    counts from the index footers, fill it and open no bucket (I3, I6, I8)."""
    t = _table(str(tmp_path / "t"), runtime)
    t.upsert(spark.createDataFrame(_rows(range(0, 3000), 1), DDL), assigner_slots=2)
    groups = len(t.stats())  # 1000 keys a day, capacity 50: 20 buckets a day
    before = _state(t)
    flag = tmp_path / "killed"
    monkeypatch.setattr(schemes, "assign_fn", _killing_slot_0(flag))
    gone = spark.createDataFrame(_rows(range(1000, 2500), 0), DDL).select("id", "day")
    with caplog.at_level("WARNING", logger="dynbucket.write.spark"):
        result = t.delete(gone, assigner_slots=2)
    monkeypatch.undo()
    assert flag.exists() and "restarted during the write; retrying" in caplog.text
    assert (result.keys_deleted, result.keys_not_found) == (1500, 0)
    after = _state(t)  # the index names exactly the 1500 keys left
    assert set(after) == {k for k in before if not 1000 <= int(k[1][1:]) < 2500}
    _same_buckets(after, before)

    def fail(*args: Any, **kw: Any) -> None:
        raise OSError("injected: the timeline's storage went away")

    monkeypatch.setattr(outcome, "decide_commit", fail)
    with pytest.raises(CommitFailedError, match="injected"):
        t.delete(spark.createDataFrame(_rows(range(0, 30), 0), DDL).select("id", "day"))
    monkeypatch.undo()
    assert _state(t) == after
    fresh = t.upsert(spark.createDataFrame(_rows(range(5000, 6500), 2), DDL), assigner_slots=1)
    assert (fresh.keys_inserted, fresh.buckets_created) == (1500, 0)
    assert len(t.stats()) == groups and max(t.stats().column("keys").to_pylist()) == 50
    # The aborted delete's keys are still known: upserting them updates them.
    kept = t.upsert(spark.createDataFrame(_rows(range(0, 30), 3), DDL), assigner_slots=1)
    assert (kept.keys_inserted, kept.keys_updated) == (0, 30)


@pytest.mark.sample(2)
@pytest.mark.parametrize("stage", ["assign_fn", "write_fn"])
def test_a_task_that_fails_after_its_work_is_retried_into_the_same_file_groups(
    spark: Any,
    runtime: Runtime,
    tmp_path: Path,
    location: str,
    monkeypatch: pytest.MonkeyPatch,
    stage: str,
) -> None:
    """Hudi's #11527: a retried task must not give one bucket a second file id."""
    t = _table(location, runtime)
    t.upsert(spark.createDataFrame(_rows(range(0, 400), 1), DDL), assigner_slots=2)
    before = _state(t)
    flag = tmp_path / "failed-once"
    built_in = schemes if stage == "assign_fn" else engines  # where the stage is built
    original = getattr(built_in, stage)
    first_time = _once()

    def flaky(*args: Any, **kw: Any) -> Any:
        fn = original(*args, **kw)

        def run_then_fail(batches: Iterator[pa.RecordBatch], *more: Any) -> Iterator[Any]:
            out = list(fn(batches, *more))  # the attempt did all its work: files, actor calls
            if out and first_time(flag):
                raise RuntimeError("injected: the task's executor was lost")
            yield from out

        return run_then_fail

    monkeypatch.setattr(built_in, stage, flaky)
    result = t.upsert(spark.createDataFrame(_rows(range(200, 900), 2), DDL), assigner_slots=2)
    assert flag.exists()
    assert (result.keys_updated, result.keys_inserted) == (200, 500)
    after = _state(t)  # one file group per bucket; no file outside the commits
    _same_buckets(before, after)
    assert len(after) == 900 and sum(v == 2 for v, _ in after.values()) == 700


@pytest.mark.sample(1)
def test_two_attempts_of_a_write_task_at_once_write_the_same_files(
    spark: Any, runtime: Runtime, tmp_path: Path, location: str
) -> None:
    """Speculation: two copies of a stage-B task run side by side; either copy's output
    is the same set of names with the same rows."""
    from dynbucket.base.keyhash import hash_columns
    from dynbucket.write.write_stage import write_fn

    t = _table(location, runtime)
    t.upsert(spark.createDataFrame(_rows(range(0, 300), 1), DDL), assigner_slots=1)
    old = t.to_arrow()
    instant = str(int(t.latest_instant() or "0") + 1)
    visible = frozenset(i.id for i in t._timeline.completed())
    # What stage A hands stage B: updates of every old key (deltas in existing groups) and
    # 100 new keys in a new bucket 90 (a new group with an index file).
    ids = old.column("id").to_pylist() + [f"new{i}" for i in range(100)]
    tagged = pa.table(
        {
            "id": ids,
            "day": old.column("day").to_pylist() + ["d0"] * 100,
            "v": [2] * len(ids),
            "ts": [2] * len(ids),
            "_hash": hash_columns([pa.array(ids)]),
            "_partition": old.column("_partition").to_pylist() + ["day=d0"] * 100,
            "_op": pa.array([0] * len(ids), pa.int8()),
            "_bucket": pa.array(old.column("_bucket").to_pylist() + [90] * 100, pa.int32()),
            "_is_new": [False] * len(old) + [True] * 100,
        }
    )
    batches = tagged.to_batches(max_chunksize=100)
    ctx = WriteContext(
        TableRef.of(t._store, t._spec), instant, frozenset(visible), Operation.UPSERT
    )
    fn = write_fn(ctx)
    outputs: list[pa.Table] = []
    errors: list[BaseException] = []

    def attempt() -> None:
        try:
            outputs.append(pa.Table.from_batches(list(fn(iter(batches)))))
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=attempt) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    # Sizes and per-stage seconds may differ between attempts; names and rows may not.
    first, second = (o.sort_by("path").drop(["size", "stages"]) for o in outputs)
    assert first.equals(second)
    files = first.filter(pc.not_equal(first.column("kind"), "counts"))
    written = set(files.column("path").to_pylist())
    new_files = _files_on_storage(t) - _files_committed(t)
    assert new_files == written  # no temporary or second-attempt file left beside them
    for path in written:
        assert t._store.fs.get_file_info(path).size > 0
    assert not any(".tmp-" in i.base_name for i in t._store.walk(t._store.root))


@pytest.mark.sample(1)
def test_a_failure_after_assignment_and_before_commit_aborts_everywhere(
    spark: Any,
    runtime: Runtime,
    tmp_path: Path,
    location: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    t = _table(location, runtime)
    t.upsert(spark.createDataFrame(_rows(range(0, 200), 1), DDL), assigner_slots=2)
    before = _state(t)
    files = _files_on_storage(t)

    def fail(*args: Any, **kw: Any) -> None:
        raise OSError("injected: the timeline's storage went away")

    monkeypatch.setattr(outcome, "decide_commit", fail)
    with pytest.raises(CommitFailedError, match="injected"):
        t.upsert(spark.createDataFrame(_rows(range(100, 400), 2), DDL), assigner_slots=2)
    monkeypatch.undo()
    # Nothing of the instant is visible or left behind.
    assert _state(t) == before and _files_on_storage(t) == files
    assert [h["state"] for h in t.history()] == ["completed"]
    # I8: the actors dropped the aborted instant's mappings, so its 200 keys are new again
    # (with index entries) and nothing else moved.
    again = t.upsert(spark.createDataFrame(_rows(range(100, 400), 3), DDL), assigner_slots=2)
    assert (again.keys_inserted, again.keys_updated) == (200, 100)
    after = _state(t)
    _same_buckets(before, after)
    assert len(after) == 400


CHILD = textwrap.dedent(
    f"""
    import sys, time
    from pathlib import Path
    from dynbucket import Runtime, Table
    from dynbucket.format.timeline.transaction import Transaction

    table_uri, incoming, checkpoint, stuck = sys.argv[1:]
    commit = Transaction.commit

    def commit_or_hang(self, metadata=None):
        if (metadata or {{}}).get("stream", {{}}).get("batch") == 1:
            Path(stuck).write_text(self.id)  # data and index files are written: hang here
            time.sleep(3600)
        return commit(self, metadata)

    Transaction.commit = commit_or_hang
    with Runtime() as rt:
        source = rt.spark.readStream.schema("{CHANGE_DDL}").option("maxFilesPerTrigger", 1)
        table = Table.open(table_uri, runtime=rt)
        table.stream(source.parquet(incoming), checkpoint, trigger={{"availableNow": True}},
                     query_name="orders").awaitTermination()
    """
)


def _kill_everything(child: subprocess.Popen[bytes], marker: str) -> None:
    """SIGKILL the driver and everything it started (its Ray and Spark processes)."""
    with contextlib.suppress(ProcessLookupError):  # it may have died already
        os.killpg(child.pid, signal.SIGKILL)
    child.wait()
    for p in psutil.process_iter():
        try:
            if p.environ().get("DYNBUCKET_TEST_MARKER") == marker:
                p.kill()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue


def _change_batch(b: int) -> pa.Table:
    """Micro-batch ``b`` of a change stream: creates of 100 keys, updates of 50 keys of the
    batch before, and deletes of 10 of its keys (batch 2 also deletes batch 1's k150 with
    an older ordering value: stale, it stays; and k0, deleted already: not found). Batch 2
    brings a new field, ``note``: the source's schema changed half-way."""
    rows = [(i, "u" if i < b * 100 + 50 and b else "c", b) for i in range(b * 100, b * 100 + 150)]
    if b:
        rows += [(i, "d", b) for i in range((b - 1) * 100, (b - 1) * 100 + 10)]
    if b == 2:
        rows += [(150, "d", 0), (0, "d", 2)]
    batch = pa.table(
        {
            "id": [f"k{i}" for i, _, _ in rows],
            "day": [f"d{i % 3}" for i, _, _ in rows],
            "v": [None if op == "d" else ts for _, op, ts in rows],
            "ts": [ts for _, _, ts in rows],
            "op": [op for _, op, _ in rows],
        },
        schema=SCHEMA.append(pa.field("op", pa.string())),
    )
    if b == 2:
        batch = batch.append_column("note", pa.array([f"n{i}" for i, _, _ in rows]))
    return batch


@pytest.mark.sample(2, family="a whole job as its user runs it")
def test_a_driver_killed_mid_micro_batch_is_rerun_once_after_restart(
    spark: Any, runtime: Runtime, tmp_path: Path
) -> None:
    """A change stream (Debezium's ``op``: creates, updates and deletes in each
    micro-batch) whose driver dies mid-commit: after a restart, which reads the source with
    its new field, each batch commits once, and the new field evolves the table."""
    incoming = tmp_path / "in"
    incoming.mkdir()
    for b in range(3):
        pq.write_table(_change_batch(b), incoming / f"b{b}.parquet")
        # A file stream takes files in the order of their times (one second apart here,
        # they could tie and come in any order).
        os.utime(incoming / f"b{b}.parquet", (1_700_000_000 + 60 * b,) * 2)
    t = _table(
        str(tmp_path / "t"),
        runtime,
        lock_lease_seconds=3.0,
        commit_lease_seconds=3.0,
        heartbeat_expiry_seconds=3.0,
        delete_field="op",
        delete_marker="d",
    )
    checkpoint, stuck = tmp_path / "ckpt", tmp_path / "stuck"
    script = tmp_path / "driver.py"
    script.write_text(CHILD)
    env, marker = marked_env()
    env.pop("RAY_ADDRESS", None)
    child = subprocess.Popen(
        [sys.executable, str(script), t.uri, str(incoming), str(checkpoint), str(stuck)],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 300
        while not stuck.exists():
            assert child.poll() is None, (
                child.stderr.read().decode()[-3000:] if child.stderr else ""
            )
            assert time.monotonic() < deadline, "the child never reached batch 1's commit"
            time.sleep(0.5)
        dead_instant = stuck.read_text()
    finally:
        _kill_everything(child, marker)
    assert wait_until_gone(marker) == []
    assert [h["state"] for h in t.history()] == ["completed", "inflight"]
    batch0 = _state_without_pending_check(t)
    # A restarted driver: the lease (and heartbeat) of the dead one expires, its instant is
    # rolled back, Spark runs micro-batch 1 again, and it commits once.
    time.sleep(3.5)
    done: list[int] = []
    source = spark.readStream.schema(CHANGE_DDL + ", note string")
    source = source.option("maxFilesPerTrigger", 1)
    results: list[Any] = []
    t.stream(
        source.parquet(str(incoming)),
        str(checkpoint),
        trigger={"availableNow": True},
        query_name="orders",
        on_batch=lambda i, r: (done.append(i), results.append(r)),
    ).awaitTermination()
    assert done == [1, 2]
    assert [(r.keys_deleted, r.keys_stale, r.keys_not_found) for r in results] == [
        (10, 0, 0),
        (10, 1, 1),
    ]
    history = t.history()
    assert [h["state"] for h in history] == ["completed"] * 3
    assert dead_instant not in {h["instant"] for h in history}
    after = _state(t)
    _same_buckets({k: v for k, v in batch0.items() if k in after}, after)
    deleted = {*range(10), *range(100, 110)}
    assert {k: v for k, (v, _) in after.items()} == {
        (f"d{i % 3}", f"k{i}"): min(i // 100, 2) for i in range(350) if i not in deleted
    }
    assert t.schema.names == [*SCHEMA.names, "note"]  # the marker field is not stored
    notes = {r["id"]: r["note"] for r in t.to_arrow().to_pylist()}
    assert notes["k300"] == "n300" and notes["k10"] is None  # batch 2's, and older rows


def _state_without_pending_check(t: Table) -> dict[tuple[str, str], tuple[int, int]]:
    """What readers see while a dead writer's instant is still pending."""
    return {(r["day"], r["id"]): (r["v"], r["_bucket"]) for r in t.to_arrow().to_pylist()}
