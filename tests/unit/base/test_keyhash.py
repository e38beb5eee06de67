"""keyhash against a plain-Python XXH64 written from the specification (every length branch)."""

from __future__ import annotations

import datetime as dt
import random
import struct

import pyarrow as pa
import pytest

from dynbucket.base.errors import InvalidInputError
from dynbucket.base.keyhash import SPARK_SEED, hash_columns

M = (1 << 64) - 1
P1, P2, P3, P4, P5 = (
    11400714785074694791,
    14029467366897019727,
    1609587929392839161,
    9650029242287828579,
    2870177450012600261,
)


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M


def _round(acc: int, lane: int) -> int:
    return (_rotl((acc + lane * P2) & M, 31) * P1) & M


def xxh64(data: bytes, seed: int) -> int:
    """XXH64 as the xxHash specification states it (slow, obviously right)."""
    n, p = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M, (seed + P2) & M, seed, (seed - P1) & M]
        while p + 32 <= n:
            for i in range(4):
                v[i] = _round(v[i], struct.unpack_from("<Q", data, p + 8 * i)[0])
            p += 32
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & M
        for x in v:
            h = ((h ^ _round(0, x)) * P1 + P4) & M
    else:
        h = (seed + P5) & M
    h = (h + n) & M
    while p + 8 <= n:
        h = (_rotl(h ^ _round(0, struct.unpack_from("<Q", data, p)[0]), 27) * P1 + P4) & M
        p += 8
    if p + 4 <= n:
        h = (_rotl(h ^ (struct.unpack_from("<I", data, p)[0] * P1 & M), 23) * P2 + P3) & M
        p += 4
    while p < n:
        h = (_rotl(h ^ (data[p] * P5 & M), 11) * P1) & M
        p += 1
    h ^= h >> 33
    h = h * P2 & M
    h ^= h >> 29
    h = h * P3 & M
    return h ^ (h >> 32)


def signed(u: int) -> int:
    return u - (1 << 64) if u >= 1 << 63 else u


def test_strings_of_every_length_branch_match_the_specification() -> None:
    rng = random.Random(5)
    words = ["", "a", "abc", "käse", "🙂"] + [
        "".join(rng.choice("abcdefghij0123456789") for _ in range(n)) for n in range(0, 100)
    ]
    got = hash_columns([pa.array(words)]).tolist()
    assert got == [signed(xxh64(w.encode(), SPARK_SEED)) for w in words]


def test_sliced_and_large_string_arrays() -> None:
    words = pa.array([f"key-{i}" for i in range(50)])
    expected = [signed(xxh64(f"key-{i}".encode(), SPARK_SEED)) for i in range(10, 20)]
    assert hash_columns([words.slice(10, 10)]).tolist() == expected
    assert hash_columns([words.cast(pa.large_string()).slice(10, 10)]).tolist() == expected
    chunked = pa.chunked_array([words.slice(10, 5), words.slice(15, 5)])
    assert hash_columns([chunked]).tolist() == expected


@pytest.mark.parametrize("value", [0, 1, -1, 2**31 - 1, -(2**31)])
def test_ints_hash_as_four_bytes(value: int) -> None:
    got = hash_columns([pa.array([value], pa.int32())]).tolist()
    assert got == [signed(xxh64(struct.pack("<i", value), SPARK_SEED))]


@pytest.mark.parametrize("value", [0, 7, -7, 2**63 - 1, -(2**63)])
def test_longs_hash_as_eight_bytes(value: int) -> None:
    got = hash_columns([pa.array([value], pa.int64())]).tolist()
    assert got == [signed(xxh64(struct.pack("<q", value), SPARK_SEED))]


def test_dates_timestamps_and_bools_hash_like_spark_types() -> None:
    day = dt.date(2024, 3, 1)
    days = (day - dt.date(1970, 1, 1)).days
    ts = dt.datetime(2024, 3, 1, 12, 0, 0, 5)
    micros = int((ts - dt.datetime(1970, 1, 1)).total_seconds()) * 1_000_000 + 5
    assert hash_columns([pa.array([day])]).tolist() == [signed(xxh64(struct.pack("<i", days), 42))]
    assert hash_columns([pa.array([ts], pa.timestamp("ms"))]).tolist() != []
    assert hash_columns([pa.array([ts], pa.timestamp("us"))]).tolist() == [
        signed(xxh64(struct.pack("<q", micros), 42))
    ]
    assert hash_columns([pa.array([True, False])]).tolist() == [
        signed(xxh64(struct.pack("<i", 1), 42)),
        signed(xxh64(struct.pack("<i", 0), 42)),
    ]


def test_fields_chain_seeds_and_nulls_are_skipped() -> None:
    first = xxh64(b"tenant-1", SPARK_SEED)
    both = xxh64(struct.pack("<q", 99), first)
    got = hash_columns([pa.array(["tenant-1", "tenant-1"]), pa.array([99, None], pa.int64())])
    assert got.tolist() == [signed(both), signed(first)]


def test_unsupported_key_type_names_the_field() -> None:
    with pytest.raises(InvalidInputError, match="record key field 'price' has type double"):
        hash_columns([pa.array([1.5])], ["price"])
