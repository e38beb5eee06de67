"""HFile v3: what we write reads back key by key (across many blocks, either codec), and
the HFiles Apache Hudi wrote into its metadata tables read whole and by key."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dynbucket.base.errors import FormatError
from dynbucket.format.hudi import hfile, hfile_scan
from dynbucket.format.hudi.hfile import HFile
from dynbucket.format.hudi.hfile_scan import key_order
from tests.hudi_tables import unzipped


def _items(n: int, seed: int = 7) -> list[tuple[bytes, bytes]]:
    rng = random.Random(seed)
    keys = sorted({f"key-{rng.randrange(10**9):09d}".encode() for _ in range(n)})
    return [(k, bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40)))) for k in keys]


@pytest.mark.parametrize("codec", [hfile.GZ, hfile.NONE])
def test_what_is_written_reads_back_whole_and_by_key(codec: int) -> None:
    items = _items(3000)
    data = hfile.write(
        items, {"schema": b"{}"}, {"bloomFilter": b"\x01" * 100}, block_size=1024, codec=codec
    )
    f = HFile.read(data)
    assert len(f.blocks) > 20  # many blocks: the index, not one scan, finds a key
    assert f.entry_count == 3000 and f.codec == codec
    assert list(f.items()) == items
    keys, values = f.arrays()  # the compiled scan: the same entries
    assert list(zip(keys.to_pylist(), values.to_pylist(), strict=True)) == items
    assert all(f.get(k) == v for k, v in items)
    assert f.schema == "{}"
    assert f.meta_block("bloomFilter") == b"\x01" * 100 and f.meta_block("other") is None
    # Misses: before the first key, between two keys (in a block and at a block's edge),
    # after the last.
    assert f.get(b"a") is None and f.get(b"key-999999999z") is None
    assert f.get(items[10][0] + b"\x00") is None
    assert f.get(f.blocks[5].first_key[:-1]) is None


def test_dictionary_coded_values_write_the_hfile_their_decoded_values_write(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A record-index log's values are coded (a write's keys share a few locations):
    each entry holds its own value's bytes, and the file equals the decoded one's."""
    monkeypatch.setattr(hfile.time, "time", lambda: 1.0)  # the file info's create time
    keys = pa.array([k for k, _ in _items(2000)], pa.binary())
    locations = pa.array([b"", b"here", b"there" * 20], pa.binary())
    codes = pa.array(np.random.default_rng(3).integers(0, 3, len(keys)).astype(np.int32))
    coded = pa.DictionaryArray.from_arrays(codes, locations)
    data = hfile.write_arrays(keys, coded, {"schema": b"{}"}, block_size=512)
    decoded = coded.dictionary_decode()
    assert data == hfile.write_arrays(keys, decoded, {"schema": b"{}"}, block_size=512)
    read_keys, read_values = HFile.read(data).arrays()
    assert read_keys.equals(keys)
    assert read_values.to_pylist() == decoded.to_pylist()


def test_a_large_hfile_read_in_runs_of_blocks_reads_every_entry_in_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whole-file reads split the data blocks into one run per core (a bootstrap reads a
    partition's record index whole); the runs together are the file."""
    items = _items(3000)
    f = HFile.read(hfile.write(items, block_size=512))
    monkeypatch.setattr(hfile, "_BLOCKS_PER_RUN", 3)
    monkeypatch.setattr(hfile.os, "cpu_count", lambda: 7)
    assert len(f.blocks) > 7 * 3
    keys, values = f.arrays()
    assert list(zip(keys.to_pylist(), values.to_pylist(), strict=True)) == items


def test_an_empty_hfile_reads_as_empty() -> None:
    f = HFile.read(hfile.write([]))
    assert f.entry_count == 0 and list(f.items()) == [] and f.get(b"k") is None


def test_keys_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="strictly ascending: b'a' after b'b'"):
        hfile.write([(b"b", b""), (b"a", b"")])
    with pytest.raises(ValueError, match="strictly ascending"):
        hfile.write([(b"a", b""), (b"a", b"")])


def test_a_data_block_cut_short_is_a_format_error() -> None:
    f = HFile.read(hfile.write(_items(50), codec=hfile.NONE))
    payload = bytes(f.data[f.blocks[0].offset + hfile.HEADER_SIZE : f.blocks[0].offset + 200])
    with pytest.raises(FormatError, match="ends inside entry"):
        hfile_scan.entries(payload)


def test_what_is_not_an_hfile_is_a_format_error_naming_the_file() -> None:
    data = hfile.write(_items(50))
    with pytest.raises(FormatError, match="f.hfile: .*trailer"):
        HFile.read(data[:-1], "f.hfile")
    with pytest.raises(FormatError, match="f.hfile"):
        HFile.read(data[:100] + bytes(len(data) - 100), "f.hfile")


#: Tables Apache Hudi 1.x wrote with a metadata table (files, record index, column stats).
WITH_MDT = [
    "quickstart_trips_table/mor/avro/v8_trips_8i3u1d",
    "sample_table/cow/v9_txns_simple_meta",
    "sample_table/mor/avro/v9_txns_complex_meta",
]


@pytest.mark.parametrize("name", WITH_MDT)
def test_the_hfiles_hudi_wrote_read_whole_and_by_key(tmp_path: Path, name: str) -> None:
    root = unzipped(name, tmp_path)
    found = sorted((root / ".hoodie" / "metadata").rglob("*.hfile"))
    assert found
    for path in found:
        f = HFile.read(path.read_bytes(), path.name)
        items = list(f.items())
        assert len(items) == f.entry_count
        keys, values = f.arrays()
        assert list(zip(keys.to_pylist(), values.to_pylist(), strict=True)) == items
        assert [k for k, _ in items] == sorted({k for k, _ in items})
        assert all(f.get(k) == v for k, v in items)
        assert f.schema is not None and "HoodieMetadataRecord" in f.schema
        # Written again by our writer, the entries read back the same.
        again = HFile.read(hfile.write(items, {"schema": f.schema.encode()}, block_size=256))
        assert list(again.items()) == items


def test_keys_are_ordered_as_arrow_orders_their_bytes() -> None:
    """``key_order`` sorts keys of up to 64 bytes as machine words: the order Arrow's sort
    gives (HFile's byte order), prefixes, zero bytes, empty keys, ties and slices alike,
    and longer keys through Arrow."""
    rng = np.random.default_rng(5)
    tricky = [b"", b"\x00", b"a", b"ab", b"ab\x00", b"ab\x00\x00", b"b", b"\xff", b"a\x00b"]
    for _ in range(200):
        n = int(rng.integers(0, 200))
        values = [_key(rng, tricky) for _ in range(n)]
        keys = pa.array(values, pa.binary())
        assert key_order(keys).tolist() == pc.sort_indices(keys).to_numpy().tolist()
        if n > 4:
            cut = keys.slice(2, n - 3)
            assert key_order(cut).tolist() == pc.sort_indices(cut).to_numpy().tolist()


def _key(rng: np.random.Generator, tricky: list[bytes]) -> bytes:
    """A short key around the tricky ones (prefixes, zero bytes), or a long random one."""
    if rng.random() < 0.7:
        tail = rng.integers(0, 3, rng.integers(0, 12)).astype(np.uint8)
        return tricky[rng.integers(len(tricky))] + bytes(tail)
    return bytes(rng.integers(0, 256, rng.integers(0, 90)).astype(np.uint8))
