"""Checks of a table's bucket layout shared by the write-path suites (tables keyed by ``id``,
partitioned by ``day``)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from dynbucket.table import Table


def checked_live_rows(t: Table) -> list[dict[str, Any]]:
    """The table's live rows, after checking that no two file groups of a partition share a
    bucket (I4), that the index holds one live entry per live key naming its bucket and none
    for a deleted key (I6), and that no
    bucket holds more keys than its capacity (I3: whatever slots filled it, killed or
    retried on the way)."""
    live = t.to_arrow().to_pylist()
    snapshot = t.snapshot()
    options = t._spec.dynamic_options if t._spec.scheme.index_entries else None
    cap = options.max_keys_per_bucket if options and options.max_buckets is None else None
    for partition in snapshot.partitions():
        buckets = [r.slice.bucket for r in snapshot.slices([partition])]
        assert len(buckets) == len(set(buckets)), f"two file groups share a bucket: {buckets}"
        entries = t.record_index_locations(partition, ["id", "_bucket"]).to_pylist()
        indexed = {e["id"]: e["_bucket"] for e in entries}
        assert len(indexed) == len(entries)  # one entry per key
        if cap is not None:
            fullest = max(Counter(indexed.values()).values(), default=0)
            assert fullest <= cap, f"a bucket of {partition} holds {fullest} keys > {cap}"
        day = partition.split("=")[1]
        mine = [r for r in live if r["day"] == day]
        # Exactly the live keys: a deleted key's tombstone retired its entry.
        assert set(indexed) == {r["id"] for r in mine}, set(indexed) ^ {r["id"] for r in mine}
        for r in mine:
            assert indexed[r["id"]] == r["_bucket"], (r["id"], indexed[r["id"]], r["_bucket"])
    return live
