"""The in-process writer's slots: one by default, ``assigner_slots`` of them when a write
asks, each row on the slot Spark routes it to (``pmod(key hash, slots)``); that a Spark write
with as many slots gives the same buckets is tests/integration/test_ingest_paths.py."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.base.errors import ConfigError
from dynbucket.options import DynamicBucketIndex
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("v", pa.int64())])


def _rows(ids: list[int], v: int) -> pa.Table:
    return pa.table({"id": [f"k{i}" for i in ids], "v": [v] * len(ids)}, schema=SCHEMA)


def _buckets(t: Table) -> dict[str, int]:
    rows = t.to_arrow().select(["id", "_bucket"]).to_pylist()
    return {r["id"]: r["_bucket"] for r in rows}


def test_two_slots_share_buckets_and_one_slot_fills_after_them(tmp_path: Path) -> None:
    # Key hashes mod 2: k0 k4 k5 k6 -> slot 0, k1 k2 k3 k7 -> slot 1 (keyhash.py).
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", index=DynamicBucketIndex(max_keys_per_bucket=2)
    )
    first = t.upsert(_rows(list(range(8)), 1), assigner_slots=2)
    assert first.buckets_created == 4
    # Each slot may add one key to each bucket (half of capacity 2), in row order.
    expected = {"k0": 0, "k1": 0, "k4": 1, "k2": 1, "k5": 2, "k3": 2, "k6": 3, "k7": 3}
    assert _buckets(t) == expected
    # One slot next (a new count: new slots, from the index): every bucket is full, so
    # the new keys open the smallest free id; known keys stay where they are.
    second = t.upsert(_rows([0, 8, 9], 2))
    assert (second.keys_updated, second.keys_inserted, second.buckets_created) == (1, 2, 1)
    assert _buckets(t) == {**expected, "k8": 4, "k9": 4}
    with pytest.raises(ConfigError, match="assigner_slots=0: must be an integer >= 1"):
        t.upsert(_rows([10], 3), assigner_slots=0)
    assert len(t.history()) == 2  # refused before anything was written
