"""Global-index tables against an in-memory model: a key is one row in the whole table.

Seeded sequences on merge-on-read and copy-on-write tables with
``DynamicBucketIndex(global_index=True)``: upserts whose keys' partition values move (with
larger and smaller ordering values than the live row: a move wins or loses; one key in
several partitions in one batch: the newest ends), deletes by key alone (any partition
value, or none), change batches (deletes marked in the records: move then delete, delete
then insert elsewhere), 1-3 assigner slots per write, compactions, index compactions,
commits failing at the commit point. After every step: the snapshot equals the model,
one row per key in the table, every read shape (no meta columns, a projection, time
travel to an earlier step, a lookup by key with a wrong partition value, read-optimized
where it must equal the snapshot), no bucket over capacity, and hudi-rs reads the same.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket import DynamicBucketIndex, Table, TableOptions
from dynbucket.base.columns import BUCKET
from dynbucket.base.errors import CommitFailedError
from dynbucket.format.timeline import outcome
from tests.hudi_readers import check_hudi_reads
from tests.seeds import seeds

SCHEMA = pa.schema(
    [("id", pa.string()), ("region", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
REGIONS = ["eu", "us", "ap"]
#: Sequences in the suite (~1.5 s each on 2 cores, each run new seeds:
#: ``tests/seeds.py``); ``make test-long`` runs 24.
SEQUENCES = int(os.environ.get("DYNBUCKET_GLOBAL_SEQUENCES", "8"))
STEPS = 8

Live = dict[str, tuple[str, int, int]]  # id -> (region, v, ts)


def _winners(batch: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """One record per key whatever its region: the largest ts, a later one on a tie."""
    won: dict[str, dict[str, Any]] = {}
    for r in batch:
        if r["id"] not in won or r["ts"] >= won[r["id"]]["ts"]:
            won[r["id"]] = r
    return won


def _apply(live: Live, batch: list[dict[str, Any]]) -> int:
    """An upsert (or change) batch: a winner replaces (or moves, or deletes) the live row
    unless that row's ts is larger; a key not live takes its record wherever it lands.
    Returns how many keys moved."""
    moved = 0
    for key, r in _winners(batch).items():
        old = live.get(key)
        if old is not None and r["ts"] < old[2]:
            continue  # loses: stays where it is, as it is
        if r.get("deleted"):
            live.pop(key, None)
        else:
            moved += old is not None and old[0] != r["region"]
            live[key] = (r["region"], r["v"], r["ts"])
    return moved


def _batch(rng: random.Random, keys: int, change: bool) -> list[dict[str, Any]]:
    batch = [
        {
            "id": f"k{rng.randrange(keys)}",
            "region": rng.choice(REGIONS),
            "v": rng.randrange(1000),
            "ts": rng.randrange(6),
        }
        for _ in range(rng.randrange(1, 12))
    ]
    for r in batch:
        r["deleted"] = change and rng.random() < 0.3
    return batch


def _records(batch: list[dict[str, Any]], change: bool) -> pa.Table:
    table = pa.Table.from_pylist(batch, SCHEMA)
    if not change:
        return table
    return table.append_column(
        "_hoodie_is_deleted", pa.array([r["deleted"] for r in batch], pa.bool_())
    )


def _rows(table: pa.Table) -> set[tuple[str, str, int, int]]:
    return {(r["id"], r["region"], r["v"], r["ts"]) for r in table.to_pylist()}


def _expected(live: Live) -> set[tuple[str, str, int, int]]:
    return {(k, region, v, ts) for k, (region, v, ts) in live.items()}


def _check(
    table: Table,
    live: Live,
    history: dict[str, set[Any]],
    rng: random.Random,
    before: str | None,
    compacted: bool,
) -> None:
    snap = table.to_arrow()
    ids = snap.column("id").to_pylist()
    assert len(ids) == len(set(ids))  # one row per key in the whole table
    assert _rows(snap) == _expected(live)
    plain = table.to_arrow(meta_columns=False)
    assert plain.column_names == table.schema.names and _rows(plain) == _expected(live)
    projected = table.to_arrow(columns=["id", "ts"])
    assert sorted(projected.column("id").to_pylist()) == sorted(live)
    if compacted or table._spec.options.table_type == "COPY_ON_WRITE":
        assert _rows(table.to_arrow(read_optimized=True)) == _expected(live)
    history[table.latest_instant() or ""] = _expected(live)
    then = rng.choice(sorted(history))
    if then:
        assert _rows(table.to_arrow(as_of=then)) == history[then]
    probe = [f"k{rng.randrange(12)}" for _ in range(4)]
    keys = pa.table({"id": probe, "region": [rng.choice(REGIONS) for _ in probe]})
    assert _rows(table.lookup(keys)) == {row for row in _expected(live) if row[0] in probe}
    cap = table._spec.dynamic_options.max_keys_per_bucket
    per_bucket = [r["keys"] for r in table.stats().to_pylist()]
    assert max(per_bucket, default=0) <= (cap or 0)
    check_hudi_reads(table, incremental_after=before, time_travel=False)


@pytest.mark.parametrize("seed", seeds(SEQUENCES))
def test_global_sequences_match_the_model(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    table = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "region",
        "ts",
        DynamicBucketIndex(max_keys_per_bucket=rng.choice([1, 2, 3, 5]), global_index=True),
        TableOptions(
            table_type=rng.choice(["MERGE_ON_READ", "COPY_ON_WRITE"]),
            compaction_async=False,
            clean_automatic=False,
            archive_automatic=False,
        ),
    )
    live: Live = {}
    history: dict[str, set[Any]] = {}
    stayed: dict[tuple[str, str], int] = {}  # (id, region) -> bucket, while it stays there
    keys = rng.choice([4, 8, 12])
    moved = 0
    for _ in range(STEPS):
        before = table.latest_instant()
        step = rng.choices(
            ["upsert", "change", "delete", "compact", "index", "fail"], [5, 3, 2, 1, 1, 1]
        )[0]
        compacted = False
        slots = rng.choice([1, 2, 3])
        if step in ("upsert", "change"):
            change = step == "change"
            batch = _batch(rng, keys, change)
            done = table.upsert(_records(batch, change), assigner_slots=slots)
            moves = _apply(live, batch)
            assert done.keys_moved == moves
            moved += moves
        elif step == "delete":  # by key; a partition value given is ignored, or none given
            gone = [f"k{rng.randrange(keys + 2)}" for _ in range(rng.randrange(1, 4))]
            regions = [rng.choice(REGIONS) for _ in gone]
            data = pa.table({"id": gone, "region": regions}) if rng.random() < 0.5 else None
            done = table.delete(data or pa.table({"id": gone}), assigner_slots=slots)
            assert done.keys_deleted == len(set(gone) & set(live))
            for key in gone:
                live.pop(key, None)
        elif step == "compact":
            table.compact()
            compacted = True
        elif step == "index":
            table.compact_index(min_files=2)
        elif step == "fail":

            def broken(*args: Any, **kwargs: Any) -> Any:
                raise OSError("disk full while committing")

            monkeypatch.setattr(outcome, "decide_commit", broken)
            # A new key besides: the batch writes something (all-stale records write nothing
            # and commit no instant).
            fresh = {"id": "k-fresh", "region": REGIONS[0], "v": 0, "ts": 9, "deleted": False}
            batch = [*_batch(rng, keys, False), fresh]
            with pytest.raises(CommitFailedError):
                table.upsert(_records(batch, False), assigner_slots=slots)
            monkeypatch.undo()
        _check(table, live, history, rng, before, compacted)
        # I1 restated: a key that stays in its partition keeps its bucket.
        now = {(r["id"], r["region"]): r[BUCKET] for r in table.to_arrow().to_pylist()}
        for at, bucket in now.items():
            assert stayed.setdefault(at, bucket) == bucket
        stayed = {at: b for at, b in stayed.items() if at in now}
    report = table.check()
    assert report.healthy, [str(f) for f in report.findings]
    MOVES.append(moved)


MOVES: list[int] = []


def test_the_sequences_moved_keys() -> None:
    """The sequences above moved keys (a model that never moves one tests nothing)."""
    if len(MOVES) == SEQUENCES:  # all ran in this session, in order
        assert sum(m > 0 for m in MOVES) >= SEQUENCES // 2, MOVES
