"""HFile data blocks as Arrow arrays, read and written by compiled loops.

A record-index file group of the metadata table holds one entry per key of its data
partition, and the group is read whole when a slot bootstraps from it, when ``check``
compares it with the rows and when a write rewrites it as a base: Python's loop over the
entries (``struct`` per entry, a ``bytes`` per key and value) took about 28 us a key, 5.7 s
for a partition of 200,000 keys, paid inside the commit by the rewrite. The loops here walk
a block's entries (``hfile.py`` gives the layout) and return where each row key and value
are, or lay entries out from Arrow arrays of keys and values; the keys and values are then
one gather into Arrow binary arrays.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from dynbucket.base.errors import FormatError
from dynbucket.format.hudi.delete_scan import gather

#: Error codes of the scan (0: none).
_ENDS, _ROW = 1, 2


@njit(cache=True, inline="always")
def _int(data: npt.NDArray[np.uint8], pos: int, size: int) -> int:
    """The big-endian signed int of ``size`` bytes at ``pos``."""
    n = 0
    for i in range(size):
        n = (n << 8) | int(data[pos + i])
    if n >= 1 << (8 * size - 1):
        n -= 1 << (8 * size)
    return n


@njit(cache=True, nogil=True)
def _scan(
    data: npt.NDArray[np.uint8],
) -> tuple[
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    npt.NDArray[np.int64],
    int,
    int,
]:
    """Start and length of each entry's row key and value in a data block's payload, an
    error code and the position where it arose.

    1. The entry's key and value lengths (two big-endian ints).
    2. The key's row: a big-endian short length, then the row (the rest of the key, family,
       qualifier, timestamp and type, is HBase's and skipped).
    3. The value, then the MVCC timestamp, a Hadoop vint skipped by its first byte.
    """
    cap = 1024
    rows = np.empty((4, cap), np.int64)
    n, pos, end = 0, 0, len(data)
    while pos < end:
        if n == cap:
            cap *= 2
            grown = np.empty((4, cap), np.int64)
            grown[:, :n] = rows[:, :n]
            rows = grown
        if pos + 8 > end:  # 1.
            return rows[0, :n], rows[1, :n], rows[2, :n], rows[3, :n], _ENDS, pos
        key_len, value_len = _int(data, pos, 4), _int(data, pos + 4, 4)
        at = pos + 8
        if key_len < 2 or value_len < 0 or at + key_len + value_len >= end:
            return rows[0, :n], rows[1, :n], rows[2, :n], rows[3, :n], _ENDS, pos
        row_len = _int(data, at, 2)  # 2.
        if row_len < 0 or row_len > key_len - 2:
            return rows[0, :n], rows[1, :n], rows[2, :n], rows[3, :n], _ROW, pos
        rows[0, n], rows[1, n] = at + 2, row_len
        rows[2, n], rows[3, n] = at + key_len, value_len  # 3.
        pos = at + key_len + value_len
        first = _int(data, pos, 1)
        pos += 1 if first >= -112 else (-119 - first if first < -120 else -111 - first)
        n += 1
    if pos > end:
        return rows[0, :n], rows[1, :n], rows[2, :n], rows[3, :n], _ENDS, end
    return rows[0, :n], rows[1, :n], rows[2, :n], rows[3, :n], 0, pos


def entries(payload: bytes | memoryview) -> tuple[pa.BinaryArray, pa.BinaryArray]:
    """The row keys and values of a data block's (uncompressed) payload, in order.

    Raises:
        FormatError: the payload ends inside an entry, or a row longer than its key.
    """
    data = np.frombuffer(payload, np.uint8)
    key_at, key_len, value_at, value_len, error, where = _scan(data)
    if error == _ENDS:
        raise FormatError(f"HFile data block ends inside entry {len(key_at) + 1} (byte {where})")
    if error == _ROW:
        raise FormatError(f"HFile entry at byte {where} has a row longer than its key")
    return _binary(data, key_at, key_len), _binary(data, value_at, value_len)


def _binary(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> pa.BinaryArray:
    offsets, out = gather(data, starts, lengths)
    return pa.BinaryArray.from_buffers(
        pa.binary(), len(starts), [None, pa.py_buffer(offsets), pa.py_buffer(out)]
    )


@njit(cache=True, inline="always")
def _put(out: npt.NDArray[np.uint8], pos: int, value: int, size: int) -> None:
    """``value`` as a big-endian int of ``size`` bytes at ``pos``."""
    for b in range(size):
        out[pos + b] = (value >> (8 * (size - 1 - b))) & 0xFF


@njit(cache=True, nogil=True)
def _pack(
    key_offsets: npt.NDArray[np.int64],
    key_data: npt.NDArray[np.uint8],
    value_offsets: npt.NDArray[np.int64],
    value_data: npt.NDArray[np.uint8],
    value_of: npt.NDArray[np.int64],
    suffix: npt.NDArray[np.uint8],
    block_size: int,
) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Every entry laid out (``hfile.py``), entry ``i`` with value ``value_of[i]``, and
    where each block begins: its first entry and its first byte (a block ends after the
    entry that takes it to ``block_size``).

    1. Each entry's size: the two lengths, the key (row length, row, ``suffix``: family
       length, timestamp and type), the value, and the MVCC timestamp's one byte.
    2. Write them, cutting a block once it reaches ``block_size``.
    """
    n = len(key_offsets) - 1
    total = 0
    for i in range(n):  # 1.
        rows = key_offsets[i + 1] - key_offsets[i]
        v = value_of[i]
        total += 8 + 2 + rows + len(suffix) + (value_offsets[v + 1] - value_offsets[v]) + 1
    out = np.empty(total, np.uint8)
    firsts = np.empty(n + 1, np.int64)
    starts = np.empty(n + 1, np.int64)
    blocks, pos, pending = 0, 0, 0
    for i in range(n):  # 2.
        if pending == 0:
            firsts[blocks], starts[blocks] = i, pos
            blocks += 1
        row_len = key_offsets[i + 1] - key_offsets[i]
        v = value_of[i]
        value_len = value_offsets[v + 1] - value_offsets[v]
        begin = pos
        _put(out, pos, 2 + row_len + len(suffix), 4)
        _put(out, pos + 4, value_len, 4)
        _put(out, pos + 8, row_len, 2)
        pos += 10
        out[pos : pos + row_len] = key_data[key_offsets[i] : key_offsets[i + 1]]
        pos += row_len
        out[pos : pos + len(suffix)] = suffix
        pos += len(suffix)
        out[pos : pos + value_len] = value_data[value_offsets[v] : value_offsets[v + 1]]
        pos += value_len
        out[pos] = 0
        pos += 1
        pending += pos - begin
        if pending >= block_size:
            pending = 0
    return out, firsts[:blocks], starts[:blocks]


def pack(
    keys: pa.BinaryArray, values: pa.Array, suffix: bytes, block_size: int
) -> tuple[bytes, list[int], list[int]]:
    """The entries of ``keys`` and ``values`` (binary, or dictionary-coded binary) laid
    out, each block's first entry and first byte (:func:`_pack`)."""
    if pa.types.is_dictionary(values.type):
        value_of = values.indices.to_numpy(zero_copy_only=False).astype(np.int64)
        values = values.dictionary
    else:
        value_of = np.arange(len(values), dtype=np.int64)
    out, firsts, starts = _pack(
        *_offsets_and_data(keys),
        *_offsets_and_data(values),
        value_of,
        np.frombuffer(suffix, np.uint8),
        block_size,
    )
    return out.tobytes(), firsts.tolist(), starts.tolist()


def decoded(values: pa.Array) -> pa.Array:
    """``values`` as plain binary (or string) when dictionary-coded."""
    return values.dictionary_decode() if pa.types.is_dictionary(values.type) else values


def lengths(values: pa.Array) -> npt.NDArray[np.int64]:
    """Bytes of each of ``values`` (binary, or dictionary-coded binary)."""
    if pa.types.is_dictionary(values.type):
        of_entry = np.diff(_offsets_and_data(values.dictionary)[0])
        return of_entry[values.indices.to_numpy(zero_copy_only=False)]
    return np.diff(_offsets_and_data(values)[0])


def _offsets_and_data(
    array: pa.BinaryArray,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """An Arrow binary array's offsets (from 0) and value bytes."""
    array = array.cast(pa.large_binary()) if array.type != pa.large_binary() else array
    _, offsets, data = array.buffers()
    raw = np.frombuffer(offsets, np.int64)[array.offset : array.offset + len(array) + 1]
    values = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return raw - raw[0], values[raw[0] :]


#: Longest key :func:`key_order` sorts as machine words; longer keys are sorted by Arrow.
_WORD_KEY_BYTES = 64


@njit(cache=True, nogil=True)
def _padded(
    offsets: npt.NDArray[np.int64], data: npt.NDArray[np.uint8], width: int
) -> npt.NDArray[np.uint8]:
    """Each value's bytes in a row of ``width`` bytes, zeros after them."""
    n = len(offsets) - 1
    out = np.zeros((n, width), np.uint8)
    for i in range(n):
        start, stop = offsets[i], offsets[i + 1]
        out[i, : stop - start] = data[start:stop]
    return out


def key_order(keys: pa.BinaryArray) -> npt.NDArray[np.int64]:
    """The positions of ``keys`` in ascending byte order (HFile's, Hudi's
    ``HoodieHBaseKVComparator``), equal keys in their order: what ``pc.sort_indices``
    gives, about four times faster for keys of up to 64 bytes, which are sorted as
    big-endian 64-bit words, then by length (a key before the same key and more bytes,
    zeros too). A commit of a version 9 table sorts each record-index group's new keys
    (500k keys of four partitions: 0.15 s by Arrow)."""
    offsets, data = _offsets_and_data(keys)
    lengths = np.diff(offsets)
    longest = int(lengths.max()) if len(lengths) else 0
    if longest > _WORD_KEY_BYTES or keys.null_count:
        return pc.sort_indices(keys).to_numpy()
    width = max(8, -(-longest // 8) * 8)
    words = _padded(offsets, data, width).view(">u8").astype(np.uint64)
    # lexsort's last key is the first compared: the first word, then the next, the length.
    return np.lexsort([lengths, *(words[:, j] for j in reversed(range(width // 8)))])
