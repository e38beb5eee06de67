"""The meta fields a commit writes: record keys as Hudi's key generators spell them, and
sequence numbers that sort as they count."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest

from dynbucket.base.keyhash import key_hashes
from dynbucket.format.hudi.meta_fields import (
    meta_columns,
    parse_record_keys,
    record_keys,
    sequence_numbers,
)


def test_sequence_numbers_count_and_sort_as_they_count() -> None:
    seq = sequence_numbers("20261123041208123_3_", 1001).to_pylist()
    assert seq[0] == "20261123041208123_3_0000" and seq[1000] == "20261123041208123_3_1000"
    assert seq == sorted(seq) and len(set(seq)) == 1001
    assert sequence_numbers("p_", 1).to_pylist() == ["p_0"]
    assert sequence_numbers("p_", 0).to_pylist() == []


def test_record_keys_single_and_composite() -> None:
    rows = pa.table({"id": [7, 8], "region": ["eu", "us"]})
    assert record_keys(rows, ["id"]).to_pylist() == ["7", "8"]
    assert record_keys(rows, ["id", "region"]).to_pylist() == ["id:7,region:eu", "id:8,region:us"]


def test_record_keys_read_back_into_their_fields_or_not_at_all() -> None:
    rows = pa.table(
        {
            "id": pa.array(["a", "b:c", "d"]),
            "n": pa.array([1, -2, 3], pa.int32()),
            "day": pa.array([dt.date(2026, 1, i) for i in (1, 2, 3)]),
            "at": pa.array(
                [dt.datetime(2026, 1, 1, 0, 0, i, 5) for i in (1, 2, 3)], pa.timestamp("us")
            ),
        }
    )
    for names in (["id"], ["n"], ["day", "id"], ["n", "at"], ["id", "n", "day", "at"]):
        fields = [rows.schema.field(n) for n in names]
        back = parse_record_keys(record_keys(rows, names), fields)
        assert back is not None and back.equals(rows.select(names)), names
        assert (key_hashes(back, names) == key_hashes(rows, names)).all()
    fields = [rows.schema.field(n) for n in ("id", "n")]
    # Two ways to split (``id`` = "x,n:1" and n = 2, or "x" and "1,n:2"), a value that is
    # not its type's, a key of another generator: none reads back.
    assert parse_record_keys(pa.array(["id:x,n:1,n:2"]), fields) is None
    assert parse_record_keys(pa.array(["id:x,n:one"]), fields) is None
    assert parse_record_keys(pa.array(["x"]), fields) is None
    assert parse_record_keys(pa.array(["01"]), [rows.schema.field("n")]) is None  # spelt "1"


def test_meta_columns_of_one_file() -> None:
    keys = pa.array(["a", "b"])
    commit, seq, key, partition, name = meta_columns(2, "i1", "0", keys, "day=1", "f.parquet")
    assert commit.to_pylist() == ["i1", "i1"] and seq.to_pylist() == ["i1_0_0", "i1_0_1"]
    assert key.to_pylist() == ["a", "b"] and partition.to_pylist() == ["day=1", "day=1"]
    assert name.to_pylist() == ["f.parquet"] * 2


@pytest.mark.parametrize("names", [["id"], ["id", "n"]])
def test_no_keys_read_back_as_no_rows(names: list[str]) -> None:
    fields = [pa.field("id", pa.string()), pa.field("n", pa.int64())][: len(names)]
    back = parse_record_keys(pa.array([], pa.string()), fields)
    assert back is not None and back.num_rows == 0 and back.schema == pa.schema(fields)


def test_a_version_9_write_into_a_partition_whose_keys_were_all_deleted_warns_nothing(
    tmp_path, caplog
) -> None:  # type: ignore[no-untyped-def]
    import logging

    from dynbucket.options import TableOptions
    from dynbucket.table import Table

    schema = pa.schema([("id", pa.string()), ("p", pa.string())])
    options = TableOptions(table_version=9)
    with Table.create(str(tmp_path / "t"), schema, "id", "p", options=options) as t:
        t.upsert(pa.table({"id": ["a", "b"], "p": ["x", "x"]}))
        t.delete(pa.table({"id": ["a", "b"], "p": ["x", "x"]}))
        with caplog.at_level(logging.WARNING, logger="dynbucket"):
            t.upsert(pa.table({"id": ["c"], "p": ["x"]}))
        assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert t.to_arrow().column("id").to_pylist() == ["c"]
