"""The five ``_hoodie_*`` meta fields Hudi writes first in every record.

``_hoodie_commit_time`` is the instant that last wrote the record (records a write carries
over keep theirs), ``_hoodie_commit_seqno`` orders records of one commit
(``<instant>_<writer>_<n>``, ``n`` zero-padded), ``_hoodie_record_key`` and
``_hoodie_partition_path`` name the record as the table's key generator does,
``_hoodie_file_name`` names its file (a base file's name; the file id in log blocks).
Readers merge log records by the record key, break ordering ties by the sequence number,
and answer incremental queries by the commit time.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

COMMIT_TIME = "_hoodie_commit_time"
COMMIT_SEQNO = "_hoodie_commit_seqno"
RECORD_KEY = "_hoodie_record_key"
PARTITION_PATH = "_hoodie_partition_path"
FILE_NAME = "_hoodie_file_name"
META_FIELDS = (COMMIT_TIME, COMMIT_SEQNO, RECORD_KEY, PARTITION_PATH, FILE_NAME)
#: Hudi's delete marker: a record whose ``_hoodie_is_deleted`` is true deletes its key.
IS_DELETED = "_hoodie_is_deleted"


def record_keys(rows: pa.Table, key_fields: Sequence[str]) -> pa.Array:
    """Record keys as Hudi's key generators spell them: the value of a single key field
    (``SimpleKeyGenerator``), ``field:value,field:value`` for several
    (``ComplexKeyGenerator``)."""
    texts = [key_text(rows.column(name)) for name in key_fields]
    if len(texts) == 1:
        return texts[0]
    parts = []
    for name, text in zip(key_fields, texts, strict=True):
        parts += [pa.scalar(f"{name}:"), text]
    pairs = [
        pc.binary_join_element_wise(parts[i], parts[i + 1], "") for i in range(0, len(parts), 2)
    ]
    return pc.binary_join_element_wise(*pairs, ",")


def parse_record_keys(
    keys: pa.Array | pa.ChunkedArray, fields: Sequence[pa.Field]
) -> pa.Table | None:
    """The key fields' values ``keys`` spell (:func:`record_keys` read back), or None when
    a key does not read back: text that does not cast to its field's type, a composite key
    whose separator ``,<field>:`` is not there exactly once (a value holding it could be
    split two ways), or values that spell the key otherwise. Every key read back is spelled
    again and compared, so what is returned is exactly what was spelled."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    keys = keys.cast(pa.string())
    if len(keys) == 0:  # nothing to read back (pc.all of nothing is null, not true)
        return pa.schema(fields).empty_table()
    if len(fields) == 1:
        texts = [keys]
    else:
        head = f"{fields[0].name}:"
        if not pc.all(pc.starts_with(keys, head)).as_py():
            return None
        for f in fields[1:]:
            if not pc.all(pc.equal(pc.count_substring(keys, f",{f.name}:"), 1)).as_py():
                return None
        pattern = "^" + ",".join(f"{re.escape(f.name)}:(?P<f{i}>.*)" for i, f in enumerate(fields))
        parts = pc.extract_regex(keys, pattern + "$")
        texts = [parts.field(f"f{i}") for i in range(len(fields))]
    try:
        values = pa.table(
            [pc.cast(t, f.type) for t, f in zip(texts, fields, strict=True)],
            schema=pa.schema(fields),
        )
        again = record_keys(values, [f.name for f in fields])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if again.null_count or not pc.all(pc.equal(again, keys)).as_py():
        return None
    return values


def key_text(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One key field as text, as Hudi's key generators spell its values."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    if pa.types.is_string(column.type):
        return column
    return pc.cast(column, pa.string())


def meta_columns(
    n: int, instant: str, seqno_prefix: str, keys: pa.Array, partition: str, file_name: str
) -> list[pa.Array]:
    """The five meta columns of ``n`` records a commit writes into one file."""
    return [
        pa.repeat(pa.scalar(instant), n),
        sequence_numbers(f"{instant}_{seqno_prefix}_", n),
        keys,
        pa.repeat(pa.scalar(partition), n),
        pa.repeat(pa.scalar(file_name), n),
    ]


def sequence_numbers(prefix: str, n: int) -> pa.Array:
    """``prefix`` followed by 0 .. n-1, zero-padded to one width (so that they sort as they
    count), built as one fixed-width byte buffer, a digit place at a time (each place is a
    repeating pattern: no division): a fifteenth of the time of formatting each number."""
    head = prefix.encode()
    width = len(str(max(n - 1, 0)))
    size = len(head) + width
    chars = np.empty((n, size), np.uint8)
    chars[:, : len(head)] = np.frombuffer(head, np.uint8)
    digits = np.arange(ord("0"), ord("9") + 1, dtype=np.uint8)
    for place in range(width):
        chars[:, size - 1 - place] = np.resize(np.repeat(digits, 10**place), n)
    offsets = np.arange(0, (n + 1) * size, size, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(chars))
