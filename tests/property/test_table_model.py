"""The table layer against an in-memory reference model: seeded random operation sequences.

Every sequence (on a merge-on-read or copy-on-write table, with or without Hudi's meta
fields) mixes upserts (with duplicate keys in a batch and out-of-order ordering
values), deletes (of known and unknown keys), compactions, index compactions, commits that
fail at the last moment, and writers that die mid-instant. After each step the snapshot must
equal the model (dict per partition), no two file groups may share a bucket id in a
partition (I4), and every live key must sit in the bucket it first got (I1).
"""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.actors import DynamicBucketOptions
from dynbucket.actors.errors import CommitFailedError
from dynbucket.pipeline.format.columns import BUCKET, IS_NEW
from dynbucket.pipeline.format.file_groups import write_file_groups
from dynbucket.pipeline.format.options import TableOptions
from dynbucket.pipeline.format.records import prepare
from dynbucket.pipeline.format.timeline import Timeline
from dynbucket.pipeline.format.transaction import Transaction
from dynbucket.pipeline.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("region", pa.string()), ("v", pa.int64()),
                    ("ts", pa.int64())])  # fmt: skip
SEQUENCES = 200
STEPS = 7


class Model:
    """What the table must hold: partition -> key -> (v, ts); plus each key's first bucket."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, tuple[int, int]]] = {}
        self.first_bucket: dict[tuple[str, str], int] = {}

    def upsert(self, batch: list[dict[str, Any]]) -> None:
        for r in batch:  # in input order: a later row with an equal ts wins, as in a batch
            part = self.rows.setdefault(r["region"], {})
            old = part.get(r["id"])
            if old is None or r["ts"] >= old[1]:
                part[r["id"]] = (r["v"], r["ts"])

    def delete(self, keys: list[dict[str, Any]]) -> None:
        for k in keys:
            self.rows.get(k["region"], {}).pop(k["id"], None)

    def expected(self) -> set[tuple[str, str, int, int]]:
        return {(k, p, v, ts) for p, part in self.rows.items() for k, (v, ts) in part.items()}


def _batch(rng: random.Random, keys: int) -> list[dict[str, Any]]:
    return [
        {"id": f"k{rng.randrange(keys)}", "region": rng.choice(["eu", "us", "ap"]),
         "v": rng.randrange(1000), "ts": rng.randrange(5)}
        for _ in range(rng.randrange(1, 12))
    ]  # fmt: skip


def _check(table: Table, model: Model) -> None:
    snap = table.to_arrow()
    got = {(r["id"], r["region"], r["v"], r["ts"]) for r in snap.to_pylist()}
    assert got == model.expected()
    assert snap.num_rows == len(got)  # I2: one live row per (partition, key)
    for partition in table.snapshot().partitions():
        buckets = [s.bucket for s in table.snapshot().bucket_files(partition).values()]
        ids = [r.slice.bucket for r in table.snapshot().slices([partition])]
        assert len(ids) == len(set(ids)) == len(buckets)  # I4
    for r in snap.to_pylist():
        first = model.first_bucket.setdefault((r["region"], r["id"]), r[BUCKET])
        assert r[BUCKET] == first  # I1


def _die_mid_instant(table: Table, rows: list[dict[str, Any]]) -> str:
    """A writer that wrote data and index files and then vanished (its lease expires at
    once); returns its instant."""
    txn = Transaction.begin(table.store, table.spec, "commit", "upsert", lease_seconds=0.05)
    prepared = prepare(table.spec, pa.Table.from_pylist(rows, SCHEMA))
    n = prepared.num_rows
    prepared = prepared.append_column(BUCKET, pa.repeat(pa.scalar(0, pa.int32()), n))
    prepared = prepared.append_column(IS_NEW, pa.repeat(pa.scalar(True), n))
    visible = {i.id for i in txn.timeline.completed()}
    write_file_groups(table.store, table.spec, txn.id, prepared, visible, deletes=False)
    txn.lock._stop.set()  # the heartbeat dies with the writer
    time.sleep(0.1)  # and its lease runs out
    return txn.id


@pytest.mark.parametrize("seed", range(SEQUENCES))
def test_random_sequences_match_the_model(
    tmp_path: Path, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    table = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "region", "ts",
        DynamicBucketOptions(max_keys_per_bucket=rng.choice([1, 2, 3, 5])),
        TableOptions(lock_lease_seconds=30,
                     table_type=rng.choice(["MERGE_ON_READ", "COPY_ON_WRITE"]),
                     populate_meta_fields=rng.random() < 0.8),
    )  # fmt: skip
    model = Model()
    dead: list[str] = []
    keys = rng.choice([4, 10, 25])
    for _ in range(STEPS):
        step = rng.choices(
            ["upsert", "delete", "compact", "index", "fail", "die"], [6, 2, 1, 1, 1, 1]
        )[0]
        if step == "upsert":
            batch = _batch(rng, keys)
            table.upsert(pa.Table.from_pylist(batch, SCHEMA))
            model.upsert(batch)
        elif step == "delete":
            gone = [{"id": f"k{rng.randrange(keys + 3)}", "region": rng.choice(["eu", "us"])}
                    for _ in range(rng.randrange(1, 5))]  # fmt: skip
            table.delete(
                pa.Table.from_pylist(gone, pa.schema(SCHEMA.field(n) for n in ("id", "region")))
            )
            model.delete(gone)
        elif step == "compact":
            table.compact()
        elif step == "index":
            table.compact_index(min_files=2)
        elif step == "fail":
            # Files are written, then publishing the commit fails: nothing may show.
            def broken(*args: Any, **kwargs: Any) -> Any:
                raise OSError("disk full while publishing the commit")

            monkeypatch.setattr(Timeline, "complete", broken)
            with pytest.raises(CommitFailedError):
                table.upsert(pa.Table.from_pylist(_batch(rng, keys), SCHEMA))
            monkeypatch.undo()
        elif step == "die":
            dead.append(_die_mid_instant(table, _batch(rng, keys)))
            assert Timeline(table.store).pending()  # readers must not see it
        _check(table, model)
    # An explicit rollback takes whatever a dead writer left, and no file of it remains.
    table.rollback()
    assert not Timeline(table.store).pending()
    assert not [p for p in (tmp_path / "t").rglob("*") if any(i in p.name for i in dead)]
    _check(table, model)
