"""Hudi's bucket hash: ``BucketIdentifier.getBucketId`` of the simple bucket index.

Hudi takes the key field values as Java strings, hashes the list of them with Java's
``List<String>.hashCode()`` (``h = 31 * h + s.hashCode()``, from 1; ``String.hashCode`` runs
over UTF-16 code units), clears the sign bit and takes it mod the bucket count. The values
are the record key's parts: a single key field's text, or, for several, the values of
``field:value,field:value``. Hudi finds them by splitting the record key text at ``,`` and
``:`` whenever it holds a ``:``; a value that holds ``:`` or ``,`` is split too. Such keys
go through :func:`_hudi_parts` (Hudi's rule, in Python), the others through one compiled
pass over the UTF-8 bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from dynbucket.base.errors import InvalidInputError
from dynbucket.format.hudi.meta_fields import key_text


@njit(cache=True, nogil=True)
def _string_hashes(offsets, data, out):
    """Java's ``String.hashCode`` of each UTF-8 string (as uint32: Java's int, wrapped).
    All arithmetic in int64, masked to 32 bits (numba would widen mixed types to float)."""
    mask = np.int64(0xFFFFFFFF)
    for i in range(len(offsets) - 1):
        h = np.int64(0)
        p = offsets[i]
        end = offsets[i + 1]
        while p < end:
            b = np.int64(data[p])
            if b < 0x80:
                cp = b
                p += 1
            elif b < 0xE0:
                cp = ((b & 0x1F) << 6) | (np.int64(data[p + 1]) & 0x3F)
                p += 2
            elif b < 0xF0:
                cp = (
                    ((b & 0x0F) << 12)
                    | ((np.int64(data[p + 1]) & 0x3F) << 6)
                    | (np.int64(data[p + 2]) & 0x3F)
                )
                p += 3
            else:
                cp = (
                    ((b & 0x07) << 18)
                    | ((np.int64(data[p + 1]) & 0x3F) << 12)
                    | ((np.int64(data[p + 2]) & 0x3F) << 6)
                    | (np.int64(data[p + 3]) & 0x3F)
                )
                p += 4
            if cp >= 0x10000:  # a surrogate pair in UTF-16
                cp -= 0x10000
                h = (h * 31 + 0xD800 + (cp >> 10)) & mask
                h = (h * 31 + 0xDC00 + (cp & 0x3FF)) & mask
            else:
                h = (h * 31 + cp) & mask
        out[i] = np.uint32(h)


def string_hashes(values: pa.Array) -> npt.NDArray[np.uint32]:
    """Java's ``String.hashCode`` of each value of a string array (no nulls)."""
    values = pc.cast(values, pa.large_string())
    if values.offset:
        values = pa.concat_arrays([values])  # offsets from 0
    _, offsets, data = values.buffers()
    n = len(values)
    out = np.empty(n, np.uint32)
    if n:
        offs = np.frombuffer(offsets, np.int64, n + 1)
        raw = np.frombuffer(data, np.uint8) if data is not None else np.zeros(1, np.uint8)
        _string_hashes(offs, raw, out)
    return out


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` of one string, as a signed int."""
    return _signed(int(string_hashes(pa.array([text]))[0]))


def _signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


def list_hashes(rows: pa.Table, key_fields: Sequence[str]) -> npt.NDArray[np.uint32]:
    """Java's ``List<String>.hashCode()`` of each row's key parts, as Hudi finds them."""
    texts = [key_text(rows.column(name)) for name in key_fields]
    h = np.ones(rows.num_rows, np.uint32)
    for text in texts:
        h = h * np.uint32(31) + string_hashes(text)
    # Keys Hudi splits otherwise than into their values: its rule, row by row.
    marks = [":", ","] if len(key_fields) > 1 else [":"]
    odd = None
    for text in texts:
        for mark in marks:
            hit = pc.match_substring(text, mark)
            odd = hit if odd is None else pc.or_(odd, hit)
    if odd is not None and pc.any(odd).as_py():
        for i in np.flatnonzero(odd.to_numpy(zero_copy_only=False)).tolist():
            values = [t[i].as_py() for t in texts]
            h[i] = _list_hash(_hudi_parts(values, key_fields)) & 0xFFFFFFFF
    return h


def _list_hash(parts: Sequence[str | None]) -> int:
    h = 1
    for p in parts:
        h = (31 * h + (java_string_hash(p) if p is not None else 0)) & 0xFFFFFFFF
    return h


def _hudi_parts(values: Sequence[str], key_fields: Sequence[str]) -> list[str | None]:
    """The hash keys Hudi's ``BucketIdentifier.getHashKeys`` takes from a record key whose
    text holds ``:``: split at ``,`` into ``name:value`` pairs, each at ``:``; the value of
    each key field (a field no pair names: null). Where Hudi's Java fails (a piece without
    ``:``, a name twice), so does this."""
    record_key = (
        values[0]
        if len(values) == 1
        else ",".join(f"{name}:{value}" for name, value in zip(key_fields, values, strict=True))
    )
    pairs: dict[str, str] = {}
    for piece in record_key.split(","):
        bits = piece.split(":")
        while len(bits) > 1 and bits[-1] == "":  # Java's split drops trailing empties
            bits.pop()
        if len(bits) < 2 or bits[0] in pairs:
            raise InvalidInputError(
                f"record key {record_key!r}: Hudi's bucket hash splits a key holding ':' "
                "into name:value pairs at ',' and cannot split this one (its writer fails on "
                "it too); use key values without ':' and ',' in a simple-bucket table"
            )
        pairs[bits[0]] = bits[1]
    return [pairs.get(name) for name in key_fields]


def bucket_ids(hashes: npt.NDArray[np.uint32], num_buckets: npt.ArrayLike) -> npt.NDArray[np.int32]:
    """``(hash & Integer.MAX_VALUE) % num_buckets`` (Hudi's ``getBucketId``)."""
    positive = (hashes & np.uint32(0x7FFFFFFF)).astype(np.int64)
    return (positive % np.asarray(num_buckets, np.int64)).astype(np.int32)
