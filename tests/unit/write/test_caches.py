"""When a writer's assigner caches match the table (one rule for both writers), and a
scenario with exact bucket ids: the in-process writer empties its slot's caches after
another handle committed (the same slot object, reset, not replaced)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.actors import DynamicBucketOptions
from dynbucket.table import Table
from dynbucket.write.caches import CacheMatch


def test_a_match_holds_for_its_instant_and_carries_across_services() -> None:
    match = CacheMatch()
    assert match.holds(None) and not match.holds("1")
    match.committed("1")
    assert match.holds("1") and not match.holds("2")
    match.carry("1", "2")  # a compaction of this process on top of 1
    assert match.holds("2")
    match.carry("5", "6")  # on top of an instant the caches never saw: no match carried
    assert match.holds("2") and not match.holds("6")
    match.emptied("7")
    assert match.holds("7")


SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


def _rows(ids: list[str], v: int) -> pa.Table:
    return pa.table({"id": ids, "day": ["d"] * len(ids), "v": [v] * len(ids)}, schema=SCHEMA)


def _buckets(t: Table) -> dict[str, int]:
    rows = t.to_arrow()
    assert pc.count_distinct(rows.column("id")).as_py() == rows.num_rows  # one row per key
    return dict(zip(rows.column("id").to_pylist(), rows.column("_bucket").to_pylist(), strict=True))


def test_the_in_process_writer_resets_its_slot_after_another_commit(tmp_path: Path) -> None:
    mine = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day",
                        index=DynamicBucketOptions(max_keys_per_bucket=2))  # fmt: skip
    mine.upsert(_rows(["k1"], 1))  # bucket 0 holds 1 of 2
    slot = mine._writer()._slot
    other = Table.open(mine.uri)
    other.upsert(_rows(["k2", "k3"], 2))  # k2 fills bucket 0, k3 opens bucket 1
    assert _buckets(mine) == {"k1": 0, "k2": 0, "k3": 1}
    # A stale cache would take k3 for new and put it in bucket 0's last place.
    r = mine.upsert(_rows(["k3", "k4"], 3))
    assert (r.keys_updated, r.keys_inserted) == (1, 1)
    assert _buckets(mine) == {"k1": 0, "k2": 0, "k3": 1, "k4": 1}
    assert mine._writer()._slot is slot  # emptied, not replaced
