"""Rescale and rebalance on real files, in process: exact buckets, one instant, old and new
layouts readable, bad multiples refused with nothing written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dynbucket.base.errors import ConfigError
from dynbucket.base.options import ConsistentHashingIndex, SimpleBucketIndex
from dynbucket.format.buckets.hudi_hash import bucket_ids, list_hashes
from dynbucket.format.table.options import TableOptions
from dynbucket.table import Table
from tests.hudi_readers import hudi_read

SCHEMA = pa.schema([("id", pa.string()), ("region", pa.string()), ("v", pa.int64())])
KEYS = ["hello", "user-42", "", "k0000001", "order_9999"]  # pinned in test_hudi_hash


def _rows(keys: list[str], region: str = "eu", v: int = 1) -> pa.Table:
    return pa.table(
        {"id": keys, "region": [region] * len(keys), "v": [v] * len(keys)}, schema=SCHEMA
    )


def _buckets(t: Table, as_of: str | None = None) -> dict[str, int]:
    """Bucket of each key of partition ``region=eu``."""
    rows = t.to_arrow(as_of=as_of)
    rows = rows.filter(pc.equal(rows.column("region"), "eu"))
    return dict(zip(rows.column("id").to_pylist(), rows.column("_bucket").to_pylist(), strict=True))


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_rescale_moves_each_key_to_its_hash_mod_kn(tmp_path: Path, table_type: str) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "region",
        "v",
        SimpleBucketIndex(num_buckets=4, partition_buckets={"region=us": 13}),
        TableOptions(table_type=table_type),
    )
    first = t.upsert(_rows(KEYS)).instant
    t.upsert(_rows(KEYS, "us"))
    t.upsert(_rows(KEYS[:2], v=2))  # a log (merge-on-read) the rescale folds in
    # Java: hashCode & MAX_VALUE mod 8 is 1 7 7 5 0, mod 13 is 4 6 5 10 7; mod 4 follows.
    assert _buckets(t) == {"hello": 1, "user-42": 3, "": 3, "k0000001": 1, "order_9999": 0}
    before = t.to_arrow()
    done = t.rescale(2, partitions=["region=eu"])
    assert done.partitions == {"region=eu": (4, 8)} and done.groups_read == 3
    assert _buckets(t) == {"hello": 1, "user-42": 7, "": 7, "k0000001": 5, "order_9999": 0}
    us = t.to_arrow().filter(pc.equal(t.to_arrow().column("region"), "us"))
    assert us.column("_bucket").to_pylist() == bucket_ids(list_hashes(us, ["id"]), 13).tolist()
    after = t.to_arrow()
    assert sorted(after.select(["id", "region", "v", "_instant"]).to_pylist(), key=str) == sorted(
        before.select(["id", "region", "v", "_instant"]).to_pylist(), key=str
    )
    # Time travel reads the old layout; writes and lookups route by the new one.
    assert _buckets(t, as_of=first) == {
        "hello": 1,
        "user-42": 3,
        "": 3,
        "k0000001": 1,
        "order_9999": 0,
    }
    r = t.upsert(_rows(["user-42", "new"], v=3))
    assert (r.keys_updated, r.keys_inserted) == (1, 1)
    found = t.lookup(pa.table({"id": ["user-42"], "region": ["eu"]}))
    assert found.column("_bucket").to_pylist() == [7] and found.column("v").to_pylist() == [3]
    assert t.check().healthy, t.check().summary()


def test_a_multiple_that_is_not_whole_is_refused_unless_shuffling(tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "region", "v", SimpleBucketIndex(num_buckets=4)
    )
    t.upsert(_rows(KEYS))
    latest = t.latest_instant()
    with pytest.raises(ConfigError, match="allow_shuffle=True"):
        t.rescale(1.5)
    with pytest.raises(ConfigError, match="not a whole bucket count"):
        t.rescale(1.3, allow_shuffle=True)
    with pytest.raises(
        ConfigError,
        match=r"partitions=\['nope'\]: the table has no such "
        r"partition \(it has \['region=eu'\]\)",
    ):
        t.rescale(2, partitions=["region=eu", "nope"])
    assert t.latest_instant() == latest and not t._timeline.pending()
    # A name given twice is one partition, multiplied once.
    assert t.rescale(2, partitions=["region=eu", "region=eu"]).partitions == {"region=eu": (4, 8)}
    done = t.rescale(0.75, allow_shuffle=True)  # 8 -> 6: every group rewritten
    assert done.partitions == {"region=eu": (8, 6)}
    rows = t.to_arrow()
    assert rows.column("_bucket").to_pylist() == bucket_ids(list_hashes(rows, ["id"]), 6).tolist()
    t.rescale(0.5, allow_shuffle=True)  # 6 -> 3: buckets 3..5 retired (empty base files)
    assert sorted(t.stats().column("bucket").to_pylist()) == [0, 1, 2]
    assert t.to_arrow().num_rows == len(KEYS)
    with pytest.raises(ConfigError, match="rebalance is for consistent-hashing"):
        t.rebalance()


def test_rebalance_splits_and_merges_by_the_ring(tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        SCHEMA,
        "id",
        "region",
        "v",
        ConsistentHashingIndex(initial_buckets=2, max_keys_per_bucket=35, min_keys_per_bucket=15),
    )
    t.upsert(_rows([f"k{i}" for i in range(100)]))
    t.upsert(_rows([f"k{i}" for i in range(20)], "us"))
    start = {(r["partition"], r["bucket"]): r["keys"] for r in t.stats().to_pylist()}
    assert sum(start.values()) == 120 and len(start) == 4
    done = t.rebalance()
    stats = t.stats().to_pylist()
    # eu: the halves of the ring hold 39 and 61 keys (24 + 15 and 31 + 30 by quarter):
    # both split, the upper first (new bucket 2), then the lower (3); us: 20 keys, merged.
    eu = [
        (r["bucket"], r["range_start"], r["range_end"])
        for r in stats
        if r["partition"] == "region=eu"
    ]
    q = 1 << 30
    assert sorted(eu, key=lambda x: x[1]) == [
        (0, 0, q),
        (3, q, 2 * q),
        (1, 2 * q, 3 * q),
        (2, 3 * q, 4 * q),
    ]
    us = [
        (r["bucket"], r["range_start"], r["range_end"], r["keys"])
        for r in stats
        if r["partition"] == "region=us"
    ]
    assert us == [(0, 0, 4 * q, 20)]
    assert done.partitions == {"region=eu": (2, 4), "region=us": (2, 1)}
    assert max(r["keys"] for r in stats) <= 35 and t.to_arrow().num_rows == 120
    assert t.rebalance().instant is None  # nothing left to do
    with pytest.raises(ConfigError, match="rescale is for simple-bucket"):
        t.rescale(2)


def test_stateless_tables_keep_their_index_definition(tmp_path: Path) -> None:
    index = SimpleBucketIndex(num_buckets=5, partition_buckets={"region=e.*": 7, "x": 2})
    Table.create(str(tmp_path / "t"), SCHEMA, "id", "region", index=index)
    opened = Table.open(str(tmp_path / "t"))._spec.bucket_options
    assert opened == index and opened.buckets_of("region=eu") == 7
    assert opened.buckets_of("region=us") == 5
    with pytest.raises(ConfigError, match="partition-buckets"):
        SimpleBucketIndex(num_buckets=2, partition_buckets={"(": 3})
    with pytest.raises(ConfigError, match="more than half"):
        ConsistentHashingIndex(max_keys_per_bucket=10, min_keys_per_bucket=6)


@pytest.mark.parametrize("grow", [2, 3, 1.5])
def test_a_shrink_then_a_growth_keeps_every_row(tmp_path: Path, grow: float) -> None:
    """The groups a shrink retired hold empty base files; a growth after it must not make
    them sources (their job wrote an empty file over the moved rows of a live group)."""
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "region", "v", SimpleBucketIndex(num_buckets=4)
    )
    keys = [f"k{i}" for i in range(2000)]
    t.upsert(_rows(keys))
    assert t.rescale(0.5, allow_shuffle=True).partitions == {"region=eu": (4, 2)}
    done = t.rescale(grow, allow_shuffle=True)
    assert done.partitions == {"region=eu": (2, int(2 * grow))} and done.rows == 2000
    rows = t.to_arrow()
    assert sorted(rows.column("id").to_pylist()) == sorted(keys)
    assert (
        rows.column("_bucket").to_pylist()
        == bucket_ids(list_hashes(rows, ["id"]), int(2 * grow)).tolist()
    )
    assert sorted(hudi_read(t.uri).column("id").to_pylist()) == sorted(keys)
    assert t.check().healthy


def test_deletes_of_unknown_keys_in_a_new_partition_leave_no_folder(tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "region", "v", SimpleBucketIndex(num_buckets=2)
    )
    t.upsert(_rows(KEYS))
    r = t.delete(pa.table({"id": ["nobody", "none"], "region": ["mars", "eu"]}))
    assert r.keys_not_found == 2 and r.files_written == 0
    assert not (tmp_path / "t" / "region=mars").exists()
    assert t.check().healthy
