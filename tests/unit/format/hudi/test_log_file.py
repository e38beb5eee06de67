"""Log files: blocks written the way Hudi lays them out, read back; damage is detected."""

from __future__ import annotations

import io
import struct
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dynbucket.format.hudi import log_file
from dynbucket.format.hudi.avro import Writer


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


@pytest.mark.parametrize(
    "ordering",
    [("long", 0), ("int", 0), ("double", 0.0), ("string", "20260101000000001"), ("date", 0)],
)
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


def _delete_block_of(records: list[tuple[int, str, int, str, Any]], negated: bool) -> bytes:
    """A delete block written by hand: (key branch, key, partition branch, partition,
    (ordering branch name, value)), in one Avro array block (its count negated and its
    byte size given, as Java writers may, when ``negated``)."""
    body = Writer()
    for key_branch, key, part_branch, part, (name, value) in records:
        body.long(key_branch)
        if key_branch:
            body.string(key)
        body.long(part_branch)
        if part_branch:
            body.string(part)
        body.long(log_file.ORDERING_UNION[name])
        log_file._write_value(body, name, value)
    items = body.getvalue()
    w = Writer()
    if records:
        w.long(-len(records) if negated else len(records))
        if negated:
            w.long(len(items))
        w.out.write(items)
    w.long(0)
    content = struct.pack(">ii", log_file.DELETE_BLOCK_VERSION, len(w.getvalue())) + w.getvalue()
    return log_file._block(log_file.DELETE, {log_file.INSTANT_TIME: "20260101000000001"}, content)


def test_delete_keys_are_the_keys_read_deletes_reads() -> None:
    """The fast keys-only walk against the full decoder, on seeded random records with every
    ordering branch, keys past one varint byte, empty and null keys and partitions."""
    rng = np.random.default_rng(5)
    values = {
        "null": None,
        "int": -7,
        "long": 1 << 40,
        "float": 1.5,
        "double": -2.25,
        "bytes": b"\x00\xff",
        "string": "ü" * 70,
        "decimal": b"\x01",
        "date": 19000,
        "time-millis": 1,
        "time-micros": 2,
        "timestamp-millis": 3,
        "timestamp-micros": -4,
    }
    for negated in (False, True):
        records = []
        for i in range(300):
            name = list(values)[i % len(values)]
            key = "k" * int(rng.integers(0, 200)) + str(i)
            records.append(
                (int(rng.integers(0, 2)), key, int(rng.integers(0, 2)), "p=ä", (name, values[name]))
            )
        block = log_file.read_blocks(_delete_block_of(records, negated))[0]
        assert log_file.delete_keys(block).to_pylist() == [
            k for k, _, _ in log_file.read_deletes(block)
        ]
        assert log_file.delete_keys(block).to_pylist() == [k if b else "" for b, k, *_ in records]
    assert (
        log_file.delete_keys(log_file.read_blocks(_delete_block_of([], False))[0]).to_pylist() == []
    )


def test_delete_keys_of_a_cut_block_is_an_error() -> None:
    whole = _delete_block_of([(1, "key", 1, "p", ("long", 5))], negated=False)
    block = log_file.read_blocks(whole)[0]
    cut = log_file.Block(block.type, block.header, bytes(block.content)[:-4])
    version, size = struct.unpack_from(">ii", cut.content, 0)
    cut = log_file.Block(
        cut.type, cut.header, struct.pack(">ii", version, size - 4) + bytes(cut.content)[8:]
    )
    with pytest.raises(ValueError, match="Avro data ends at byte"):
        log_file.delete_keys(cut)


def test_delete_keys_name_an_unknown_ordering_branch_and_a_key_not_in_utf8() -> None:
    block = log_file.read_blocks(_delete_block_of([(1, "a", 1, "p", ("long", 5))], False))[0]
    raw = bytes(block.content)
    branch = raw.index(b"\x04", 8 + 6)  # the ordering branch (long: 2, zig-zag 4) after "a", "p"
    unknown = raw[:branch] + b"\x1a" + raw[branch + 1 :]  # branch 13: no such type
    with pytest.raises(ValueError, match="union branch 13"):
        log_file.delete_keys(log_file.Block(block.type, block.header, unknown))
    latin = raw.replace(b"a", b"\xe4", 1)
    with pytest.raises(ValueError, match="not UTF-8"):
        log_file.delete_keys(log_file.Block(block.type, block.header, latin))
