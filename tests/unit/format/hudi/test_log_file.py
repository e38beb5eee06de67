"""Log files: blocks written the way Hudi lays them out, read back; damage is detected."""

from __future__ import annotations

import io
import struct

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.format.hudi import log_file


def _parquet(table: pa.Table) -> bytes:
    out = io.BytesIO()
    pq.write_table(table, out)
    return out.getvalue()


def test_a_data_block_and_a_delete_block_round_trip() -> None:
    rows = pa.table({"_hoodie_record_key": ["a", "b"], "v": [1, 2]})
    data = log_file.data_block(_parquet(rows), "20260101000000001", '{"type":"record"}')
    deletes = log_file.delete_block(
        ["c", "d"], ["day=1", "day=2"], ("long", 0), "20260101000000001"
    )
    blocks = log_file.read_blocks(data + deletes)
    assert [b.type for b in blocks] == [log_file.PARQUET_DATA, log_file.DELETE]
    assert blocks[0].header == {0: "20260101000000001", 2: '{"type":"record"}'}
    assert pq.read_table(io.BytesIO(blocks[0].content)).equals(rows)
    assert log_file.read_deletes(blocks[1]) == [("c", "day=1", 0), ("d", "day=2", 0)]


@pytest.mark.parametrize("ordering", [("long", 0), ("int", 0), ("double", 0.0),
                                      ("string", "20260101000000001"), ("date", 0)])  # fmt: skip
def test_delete_ordering_values_of_every_kind(ordering: tuple[str, object]) -> None:
    block = log_file.delete_block(["k"], [""], ordering, "20260101000000001")
    [(key, partition, value)] = log_file.read_deletes(log_file.read_blocks(block)[0])
    assert (key, partition, value) == ("k", "", ordering[1])


def test_lengths_are_exact() -> None:
    """A reader skipping a block of another instant jumps by its length: it must count every
    byte after itself, and the trailing total every byte before it."""
    block = log_file.delete_block(["k"], ["p"], ("long", 0), "20260101000000001")
    (length,) = struct.unpack_from(">q", block, 6)
    assert length == len(block) - 6 - 8
    (total,) = struct.unpack_from(">q", block, len(block) - 8)
    assert total == len(block) - 8


@pytest.mark.parametrize("cut", [3, 20, -1])
def test_a_cut_or_damaged_file_is_an_error_not_fewer_blocks(cut: int) -> None:
    block = log_file.data_block(_parquet(pa.table({"v": [1]})), "20260101000000001", "{}")
    with pytest.raises(ValueError):
        log_file.read_blocks((block + block)[: len(block) + cut] if cut > 0 else block[:cut])
    with pytest.raises(ValueError, match="magic"):
        log_file.read_blocks(b"#HUDX#" + block[6:])
