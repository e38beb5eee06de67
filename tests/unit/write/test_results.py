"""A write's result reads as one line (``str``), its fields all in ``repr``."""

from __future__ import annotations

from dynbucket.write.results import WriteResult


def test_a_result_prints_as_one_line_of_what_changed() -> None:
    r = WriteResult(
        instant="20261126093000123",
        operation="upsert",
        rows_written=12_000,
        keys_inserted=10_000,
        keys_updated=1_999,
        keys_moved=3,
        keys_stale=1,
        buckets_created=2,
        files_written=7,
        seconds={"total": 1.234},
        services=("compaction 20261126093001000",),
    )
    assert str(r) == (
        "upsert 20261126093000123: 10,000 inserted, 1,999 updated, 3 moved, 1 stale "
        "(12,000 rows in 7 file(s), 2 new bucket(s)); 1.23 s; then compaction "
        "20261126093001000"
    )
    assert "keys_inserted=10000" in repr(r)
    gone = WriteResult("20261126093000124", "delete", 0, keys_not_found=2, files_written=0)
    assert str(gone) == "delete 20261126093000124: 2 not found (0 rows in 0 file(s))"
    again = WriteResult("", "micro-batch 7 of 'orders' already committed", 0)
    assert str(again) == "micro-batch 7 of 'orders' already committed"
