"""The record keys of a delete block, decoded by a compiled loop.

A merge needs only the keys of a delete block (``log_file.delete_keys``), and it needs them
every time a read or a lookup merges the slice: a block of 300,000 deletes (a churn of a
tenth of a table) took about 1.7 s per slice in Python's loop over its varints, which a
point lookup paid in full. The loop here walks the same Avro (an array of records: key,
partition path, ordering value, each a union) in numba and returns where each key's bytes
are; the keys are then one gather into an Arrow string array.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa
from numba import njit

from dynbucket.base.errors import FormatError

#: How an ordering value of each union branch is laid out (``log_file.ORDERING_UNION``):
#: nothing (null), a varint (the integer, date and time types), 4 or 8 bytes (float,
#: double), or a length and bytes (bytes, string, decimal).
NOTHING, VARINT, FOUR, EIGHT, SIZED = 0, 1, 2, 3, 4
LAYOUTS = np.array([NOTHING, VARINT, VARINT, FOUR, EIGHT, SIZED, SIZED, SIZED,
                    VARINT, VARINT, VARINT, VARINT, VARINT], np.int8)  # fmt: skip

#: Error codes of the scan (0: none).
_ENDS, _BRANCH = 1, 2


@njit(cache=True)
def _varint(data: npt.NDArray[np.uint8], pos: int) -> tuple[int, int]:
    """The zig-zag varint at ``pos`` and the position after it; position -1 when the
    bytes end first."""
    n, shift = 0, 0
    while pos < len(data):
        b = int(data[pos])
        pos += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return (n >> 1) ^ -(n & 1), pos
    return 0, -1


@njit(cache=True, nogil=True)
def _scan(
    data: npt.NDArray[np.uint8], layouts: npt.NDArray[np.int8]
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], int, int]:
    """Start and length of each record's key in ``data`` (length 0 for a null key), an
    error code and the position where it arose.

    1. Per Avro array block: its count (negative: a byte size follows), 0 ends the array.
    2. Per record: the key's union branch and, when a string, its length and bytes.
    3. The partition path the same way, skipped.
    4. The ordering value: its branch, then skipped by the branch's layout.
    """
    cap = 1024
    starts = np.empty(cap, np.int64)
    lengths = np.empty(cap, np.int64)
    n, pos = 0, 0
    while True:
        count, pos = _varint(data, pos)  # 1.
        if pos < 0:
            return starts[:n], lengths[:n], _ENDS, len(data)
        if count == 0:
            return starts[:n], lengths[:n], 0, pos
        if count < 0:
            count = -count
            _, pos = _varint(data, pos)
            if pos < 0:
                return starts[:n], lengths[:n], _ENDS, len(data)
        for _ in range(count):
            if n == cap:
                cap *= 2
                grown_starts = np.empty(cap, np.int64)
                grown_lengths = np.empty(cap, np.int64)
                grown_starts[:n] = starts[:n]
                grown_lengths[:n] = lengths[:n]
                starts, lengths = grown_starts, grown_lengths
            starts[n], lengths[n] = pos, 0
            for field in range(2):  # 2. and 3.
                branch, pos = _varint(data, pos)
                if pos < 0:
                    return starts[:n], lengths[:n], _ENDS, len(data)
                if branch:
                    size, pos = _varint(data, pos)
                    if pos < 0 or pos + size > len(data):
                        return starts[:n], lengths[:n], _ENDS, len(data)
                    if field == 0:
                        starts[n], lengths[n] = pos, size
                    pos += size
            branch, pos = _varint(data, pos)  # 4.
            if pos < 0:
                return starts[:n], lengths[:n], _ENDS, len(data)
            if branch < 0 or branch >= len(layouts):
                return starts[:n], lengths[:n], _BRANCH, branch
            layout = layouts[branch]
            if layout == VARINT:
                _, pos = _varint(data, pos)
            elif layout == FOUR:
                pos += 4
            elif layout == EIGHT:
                pos += 8
            elif layout == SIZED:
                size, pos = _varint(data, pos)
                if pos >= 0:
                    pos += size
            if pos < 0 or pos > len(data):
                return starts[:n], lengths[:n], _ENDS, len(data)
            n += 1


@njit(cache=True, nogil=True)
def gather(
    data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> tuple[npt.NDArray[np.int32], npt.NDArray[np.uint8]]:
    """Arrow string offsets and bytes of ``data[starts[i] : starts[i] + lengths[i]]`` for
    each ``i`` (also the HFile scan's: ``hfile_scan.py``)."""
    offsets = np.zeros(len(starts) + 1, np.int32)
    for i in range(len(starts)):
        offsets[i + 1] = offsets[i] + lengths[i]
    out = np.empty(offsets[-1], np.uint8)
    for i in range(len(starts)):
        out[offsets[i] : offsets[i + 1]] = data[starts[i] : starts[i] + lengths[i]]
    return offsets, out


def delete_keys(records: bytes | memoryview) -> pa.StringArray:
    """The record keys of a delete block's Avro records, in order ("" for a null key).

    Raises:
        FormatError: the bytes end inside a record, an ordering value of an unknown union
            branch, or a key not in UTF-8.
    """
    data = np.frombuffer(records, np.uint8)
    starts, lengths, error, where = _scan(data, LAYOUTS)
    if error == _ENDS:
        raise FormatError(f"Avro data ends at byte {len(data)}, inside record {len(starts) + 1}")
    if error == _BRANCH:
        raise FormatError(f"delete record ordering value of union branch {where}")
    offsets, chars = gather(data, starts, lengths)
    keys = pa.StringArray.from_buffers(len(starts), pa.py_buffer(offsets), pa.py_buffer(chars))
    try:
        keys.validate(full=True)
    except pa.ArrowInvalid as e:
        raise FormatError(f"a delete block's record key is not UTF-8: {e}") from e
    return keys
