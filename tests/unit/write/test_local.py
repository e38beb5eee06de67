"""The in-process writer's slots: one by default, ``assigner_slots`` of them when a write
asks, each row on the slot Spark routes it to (``pmod(key hash, slots)``); that a Spark write
with as many slots gives the same buckets is tests/integration/test_ingest_paths.py."""

from __future__ import annotations

import os
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


@pytest.mark.parametrize("failures", [1, 2])
def test_a_file_gone_mid_write_makes_it_run_again_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failures: int
) -> None:
    """A clean of another process removed a file the write read (a raw FileNotFoundError
    ended the write, and a stream with it): the write runs again on a fresh view; a second
    loss is a CommitFailedError saying what to do, and nothing is written."""
    from dynbucket.base.errors import CommitFailedError
    from dynbucket.write import local

    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
    t = Table.create(str(tmp_path / "t"), schema, "id", "day")
    t.upsert(pa.table({"id": ["a"], "day": ["d"], "v": [1]}, schema=schema))
    real, calls = local.write_file_groups, []

    def losing(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        if len(calls) <= failures:
            raise FileNotFoundError("a merged log a clean beside the write removed")
        return real(*args, **kwargs)

    monkeypatch.setattr(local, "write_file_groups", losing)
    batch = pa.table({"id": ["a", "b"], "day": ["d", "d"], "v": [2, 2]}, schema=schema)
    if failures == 1:
        assert t.upsert(batch).keys_inserted == 1
        assert sorted(t.to_arrow(meta_columns=False).to_pylist(), key=str) == batch.to_pylist()
    else:
        with pytest.raises(CommitFailedError, match="went missing on every attempt"):
            t.upsert(batch)
        assert t.to_arrow(meta_columns=False).to_pylist() == [{"id": "a", "day": "d", "v": 1}]
    assert t._timeline.pending() == []


CHANGES = pa.schema([("id", pa.string()), ("v", pa.int64()), ("ts", pa.int64())])
COW = {"hoodie.table.type": "COPY_ON_WRITE"}


def test_a_base_gone_between_listing_and_reading_makes_the_write_run_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Between listing the group's slice and reading its base, another writer rewrote the
    copy-on-write group and the old base went (a writer of the S3 model test, resumed
    after a SIGSTOP, found a base a clean had removed): the write runs again on a fresh
    view, rather than calling the table corrupted. (A write that stalled past its
    heartbeat and was rolled back is a conflict, and runs again too; a clean keeps what a
    live write reads, so this clean is made not to count the write.)"""
    from dynbucket.format.file_group import merge
    from dynbucket.format.services import clean

    path = str(tmp_path / "t")
    t = Table.create(path, CHANGES, "id", ordering_field="ts", options=COW)
    t.upsert(pa.table({"id": ["a"], "v": [1], "ts": [1]}, CHANGES))
    beside = Table.open(path)
    real, paused = merge._read_parquet, []

    def pausing(store, path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if not paused:  # the first base read is this write's
            paused.append(path)
            beside.upsert(pa.table({"id": ["a"], "v": [2], "ts": [2]}, CHANGES))
            with monkeypatch.context() as m:  # a clean that does not count this write
                m.setattr(clean, "_horizon", lambda _t, _c, retained, _p: retained)
                assert beside.clean(retain=1).files_removed == 1
            assert not os.path.exists(path)
        return real(store, path, *args, **kwargs)

    monkeypatch.setattr(merge, "_read_parquet", pausing)
    r = t.upsert(pa.table({"id": ["a", "b"], "v": [3, 3], "ts": [3, 3]}, CHANGES))
    assert (r.keys_updated, r.keys_inserted) == (1, 1)
    rows = t.to_arrow(meta_columns=False).to_pylist()
    assert sorted(rows, key=str) == [{"id": "a", "v": 3, "ts": 3}, {"id": "b", "v": 3, "ts": 3}]
    assert len(t.history()) == 4 and t.check().healthy  # two upserts, the clean, this


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_change_batch_settles_each_key_and_frees_exactly_the_deleted_room(
    tmp_path: Path, table_type: str
) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        CHANGES,
        "id",
        ordering_field="ts",
        index=DynamicBucketIndex(max_keys_per_bucket=2),
        options={"hoodie.table.type": table_type},
    )
    t.upsert(pa.table({"id": ["a", "b", "c", "d"], "v": [1] * 4, "ts": [5] * 4}, CHANGES))
    assert _buckets(t) == {"a": 0, "b": 0, "c": 1, "d": 1}
    # a: a newer delete; b: an older one (stale); c: deleted, then written again newer;
    # d: written, then deleted newer; e: a delete of a key the table never had; f: new.
    change = pa.table(
        {
            "id": ["a", "b", "c", "c", "d", "d", "e", "f"],
            "v": [None, None, None, 2, 2, None, None, 2],
            "ts": [6, 4, 6, 7, 6, 7, 1, 1],
            "_hoodie_is_deleted": [True, True, True, False, False, True, True, False],
        }
    )
    r = t.upsert(change)
    counts = (r.keys_inserted, r.keys_updated, r.keys_deleted, r.keys_stale, r.keys_not_found)
    assert counts == (1, 1, 2, 1, 1)
    # e took bucket 2 in the instant (as a new key) and left it at the commit: f is alone.
    assert _buckets(t) == {"b": 0, "c": 1, "f": 2}
    assert {r["id"]: r["v"] for r in t.to_arrow().to_pylist()} == {"b": 1, "c": 2, "f": 2}
    # The room a and d left is free: each bucket takes one more key, in id order.
    t.upsert(pa.table({"id": ["g", "h", "i"], "v": [3] * 3, "ts": [1] * 3}, CHANGES))
    assert _buckets(t) == {"b": 0, "g": 0, "c": 1, "h": 1, "f": 2, "i": 2}
    # The keys deleted, and the one never written, left the slot's cache: new keys again.
    back = t.upsert(pa.table({"id": ["a", "e"], "v": [4] * 2, "ts": [9] * 2}, CHANGES))
    assert (back.keys_inserted, back.keys_updated) == (2, 0)
    assert _buckets(t)["a"] == _buckets(t)["e"] == 3
    assert t.check().healthy


WIDE = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("a", pa.string()), ("b", pa.int64())])


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_a_partial_upsert_keeps_the_fields_its_records_lack(
    tmp_path: Path, table_type: str
) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        WIDE,
        "id",
        ordering_field="ts",
        options={"hoodie.table.type": table_type},
    )
    t.upsert(pa.table({"id": ["x", "y"], "ts": [1, 1], "a": ["x1", "y1"], "b": [1, 2]}, WIDE))
    t.upsert(pa.table({"id": ["x", "y"], "ts": [2, 2], "a": ["x2", "y2"], "b": [3, 4]}, WIDE))

    def rows() -> dict[str, tuple[object, ...]]:
        return {r["id"]: (r["ts"], r["a"], r["b"]) for r in t.to_arrow().to_pylist()}

    # x keeps its a (written by the newest instant: a log on merge-on-read); z is new.
    r = t.upsert(pa.table({"id": ["x", "z"], "ts": [3, 3], "b": [5, 6]}), partial=True)
    assert (r.keys_updated, r.keys_inserted) == (1, 1)
    assert rows() == {"x": (3, "x2", 5), "y": (2, "y2", 4), "z": (3, None, 6)}
    # An older partial record loses, as an older whole row would.
    stale = t.upsert(pa.table({"id": ["y"], "ts": [1], "a": ["late"]}), partial=True)
    assert stale.keys_stale == 1 and rows()["y"] == (2, "y2", 4)
    # Deletes marked in a partial upsert's records delete.
    change = pa.table({"id": ["x", "y"], "ts": [4, 4], "b": [7, 8]})
    change = change.append_column("_hoodie_is_deleted", pa.array([True, False]))
    t.upsert(change, partial=True)
    assert rows() == {"y": (4, "y2", 8), "z": (3, None, 6)}
    assert t.check().healthy
