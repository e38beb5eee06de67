"""Record-key hashes in Python, equal to Spark's ``xxhash64(key fields...)``.

The Spark stages hash keys with Spark's built-in ``xxhash64`` (seed 42); pyarrow-side writes,
lookups and tests must produce the same 64-bit values, so this is XXH64 over the same bytes
Spark hashes: 4-byte little-endian ints (booleans, bytes, shorts, ints, dates), 8-byte longs
(longs, timestamps in microseconds), and the UTF-8 bytes of strings (and binary). Fields chain:
each field's hash is the seed of the next; nulls are skipped, as Spark does.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from dynbucket.base.errors import InvalidInputError

SPARK_SEED = 42

_P1 = np.uint64(11400714785074694791)
_P2 = np.uint64(14029467366897019727)
_P3 = np.uint64(1609587929392839161)
_P4 = np.uint64(9650029242287828579)
_P5 = np.uint64(2870177450012600261)


@njit(cache=True, inline="always")
def _rotl(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _round(acc, lane):
    acc = acc + lane * _P2
    return _rotl(acc, 31) * _P1


@njit(cache=True, inline="always")
def _merge(acc, v):
    acc = acc ^ _round(np.uint64(0), v)
    return acc * _P1 + _P4


@njit(cache=True, inline="always")
def _avalanche(h):
    h = h ^ (h >> np.uint64(33))
    h = h * _P2
    h = h ^ (h >> np.uint64(29))
    h = h * _P3
    return h ^ (h >> np.uint64(32))


@njit(cache=True, inline="always")
def _read64(data, p):
    v = np.uint64(0)
    for i in range(8):
        v |= np.uint64(data[p + i]) << np.uint64(8 * i)
    return v


@njit(cache=True, inline="always")
def _read32(data, p):
    v = np.uint64(0)
    for i in range(4):
        v |= np.uint64(data[p + i]) << np.uint64(8 * i)
    return v


@njit(cache=True, nogil=True)
def _hash_bytes(offsets, data, valid, seeds):
    out = seeds.copy()
    for row in range(offsets.shape[0] - 1):
        if not valid[row]:
            continue
        seed = seeds[row]
        p = offsets[row]
        end = offsets[row + 1]
        length = end - p
        if length >= 32:
            v1 = seed + _P1 + _P2
            v2 = seed + _P2
            v3 = seed
            v4 = seed - _P1
            limit = end - 32
            while p <= limit:
                v1 = _round(v1, _read64(data, p))
                v2 = _round(v2, _read64(data, p + 8))
                v3 = _round(v3, _read64(data, p + 16))
                v4 = _round(v4, _read64(data, p + 24))
                p += 32
            h = _rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)
            h = _merge(h, v1)
            h = _merge(h, v2)
            h = _merge(h, v3)
            h = _merge(h, v4)
        else:
            h = seed + _P5
        h = h + np.uint64(length)
        while p + 8 <= end:
            h = h ^ _round(np.uint64(0), _read64(data, p))
            h = _rotl(h, 27) * _P1 + _P4
            p += 8
        if p + 4 <= end:
            h = h ^ (_read32(data, p) * _P1)
            h = _rotl(h, 23) * _P2 + _P3
            p += 4
        while p < end:
            h = h ^ (np.uint64(data[p]) * _P5)
            h = _rotl(h, 11) * _P1
            p += 1
        out[row] = _avalanche(h)
    return out


@njit(cache=True, nogil=True)
def _hash_int(values, valid, seeds):
    out = seeds.copy()
    for row in range(values.shape[0]):
        if valid[row]:
            h = seeds[row] + _P5 + np.uint64(4)
            h = h ^ ((np.uint64(values[row]) & np.uint64(0xFFFFFFFF)) * _P1)
            out[row] = _avalanche(_rotl(h, 23) * _P2 + _P3)
    return out


@njit(cache=True, nogil=True)
def _hash_long(values, valid, seeds):
    out = seeds.copy()
    for row in range(values.shape[0]):
        if valid[row]:
            h = seeds[row] + _P5 + np.uint64(8)
            h = h ^ _round(np.uint64(0), np.uint64(values[row]))
            out[row] = _avalanche(_rotl(h, 27) * _P1 + _P4)
    return out


def hash_columns(
    columns: Sequence[pa.Array | pa.ChunkedArray], names: Sequence[str] = ()
) -> npt.NDArray[np.int64]:
    """Spark's ``xxhash64(c1, c2, ...)`` of each row, as int64.

    Raises:
        InvalidInputError: a column type Spark hashes differently than supported here.
    """
    if not columns:
        raise InvalidInputError("hash_columns needs at least one key column")
    n = len(columns[0])
    seeds = np.full(n, SPARK_SEED, dtype=np.uint64)
    for i, column in enumerate(columns):
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        name = names[i] if i < len(names) else f"#{i}"
        seeds = _hash_array(array, seeds, name)
    return seeds.view(np.int64)


def key_hashes(rows: pa.Table, key_fields: Sequence[str]) -> npt.NDArray[np.int64]:
    """Spark's ``xxhash64`` of each row's record key (the ``_hash`` every write carries)."""
    return hash_columns([rows.column(k) for k in key_fields], key_fields)


def _valid(array: pa.Array) -> npt.NDArray[np.bool_]:
    if array.null_count == 0:
        return np.ones(len(array), dtype=np.bool_)
    return pc.is_valid(array).to_numpy(zero_copy_only=False)


def _bits(array: pa.Array, dtype: type) -> np.ndarray:
    """The values' two's-complement bits as unsigned ints (nulls as 0)."""
    return np.ascontiguousarray(array.fill_null(0).to_numpy()).view(dtype)


def _hash_array(
    array: pa.Array, seeds: npt.NDArray[np.uint64], name: str
) -> npt.NDArray[np.uint64]:
    t = array.type
    if pa.types.is_dictionary(t):
        array = array.dictionary_decode()
        t = array.type
    valid = _valid(array)
    if (
        pa.types.is_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_string(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_string_view(t)
    ):
        if pa.types.is_string_view(t):
            array = array.cast(pa.large_string())
        buffers = array.buffers()
        off_type = (
            np.int64
            if pa.types.is_large_string(array.type) or pa.types.is_large_binary(array.type)
            else np.int32
        )
        offsets = np.frombuffer(buffers[1], dtype=off_type)[
            array.offset : array.offset + len(array) + 1
        ]
        data = (
            np.frombuffer(buffers[2], dtype=np.uint8)
            if buffers[2] is not None
            else np.zeros(0, np.uint8)
        )
        return _hash_bytes(offsets.astype(np.int64), data, valid, seeds)
    if pa.types.is_boolean(t):
        return _hash_int(_bits(pc.cast(array, pa.int32()), np.uint32), valid, seeds)
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_date32(t):
        ints = pc.cast(array.view(pa.int32()) if pa.types.is_date32(t) else array, pa.int32())
        return _hash_int(_bits(ints, np.uint32), valid, seeds)
    if pa.types.is_int64(t):
        return _hash_long(_bits(array, np.uint64), valid, seeds)
    if pa.types.is_timestamp(t):
        micros = pc.cast(array, pa.timestamp("us", tz=t.tz)).view(pa.int64())
        return _hash_long(_bits(micros, np.uint64), valid, seeds)
    raise InvalidInputError(
        f"record key field {name!r} has type {t}, which dynbucket cannot hash like Spark; "
        "use a string, integer, boolean, date or timestamp key field"
    )


def slot_of(hashes: npt.NDArray[np.int64], num_slots: int) -> npt.NDArray[np.int64]:
    """The assigner slot of each key hash: ``pmod(hash, num_slots)``, as Spark computes it."""
    return np.remainder(hashes, np.int64(num_slots))
