"""The ``record_index`` partition of Hudi's metadata table: where each live key is.

Hudi's two layouts (``HoodieTableMetadataUtil``), a key's record holding its data
partition, file id and the instant that inserted it (``records.Location``) in both:

* **global** (a table whose keys are unique in the table: a global index, or no
  partitions): a fixed number of file groups ``record-index-<i, 4 digits>-0``, a key in
  group ``|(|h| % n)|`` where ``h`` is Java's ``String.hashCode`` of the record key
  (``f:v,f:v`` for several key fields);
* **partitioned** (Hudi 1.1's partitioned record index, for a partition-scoped index, where
  one key may live in several partitions): each data partition its own file groups
  ``record-index-<partition, escaped>-<i, 4 digits>-0`` (Hudi's ``escapeFileName``:
  ``%XX`` for ``/``, ``=``, ``_``, ``-`` and the other characters a file name cannot hold;
  dots too, which Hudi's log file names cannot hold either), a key in the group the same
  hash names among its partition's. One group per partition (Hudi's
  ``hoodie.metadata.record.level.index.min.filegroup.count``), made by the first instant
  that inserts a key there. A global layout would keep one location of a key in two
  partitions, and lose the key when one of its rows is deleted.

A table's layout is what its groups' names say (``create`` picks it). Only inserts and
deletes change the index: an update stays where the key is.

What an instant changes is what it added to dynbucket's own index: its index files (named
in its commit, ``index-files``) hold an insert entry per new key and a tombstone per
deleted key, with the key fields, the file id and the instant, per data partition.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dynbucket.base.columns import DELETE, FILE_ID, HASH, INSTANT, OP
from dynbucket.base.errors import InvalidInputError, InvalidPartitionValueError
from dynbucket.format.hudi.commit import extra_of
from dynbucket.format.hudi.meta_fields import record_keys
from dynbucket.format.metadata import files
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.paths import RLI_DIR

#: Bytes a file name may have (NAME_MAX of Linux filesystems).
MAX_NAME_BYTES = 255
#: Bytes an HFile key may have (its length is a 16-bit signed integer).
MAX_KEY_BYTES = 32767
#: File groups of the global layout (Hudi's ``hoodie.metadata.record.index.min.filegroup.count``).
FILE_GROUPS = 10
#: File groups of a data partition in the partitioned layout.
PARTITION_GROUPS = 1
PREFIX = "record-index-"
_GROUP = re.compile(r"^record-index-(?:(?P<partition>.+)-)?(?P<index>\d{4})-0$")
#: What Hudi's ``PartitionPathEncodeUtils.escapeFileName`` escapes (and ``.``).
_ESCAPED = frozenset(map(chr, range(32))) | frozenset("\"#%'*/:=?\\\x7f{[]^_-.")


def group_name(index: int, partition: str | None = None) -> str:
    """The file id of group ``index``: of the global layout, or of data partition
    ``partition``'s groups in the partitioned layout."""
    if partition is None:
        return f"{PREFIX}{index:04d}-0"
    escaped = "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in partition)
    return f"{PREFIX}{escaped}-{index:04d}-0"


def check_fits(paths: pa.Array, keys: pa.Array | None, partitioned: bool) -> None:
    """Raises before anything is written when the record index could not hold what a write
    brings: a data partition whose group (partitioned layout) would name a file longer
    than a folder entry may be, or a record key (``keys``, as Hudi spells them) longer
    than an HFile key may be. Found after the commit point, either wedged the table.

    Raises:
        InvalidPartitionValueError, InvalidInputError: naming the value and the fix.
    """
    if partitioned and len(paths):
        for path in pc.unique(paths).to_pylist():
            size = files.longest_name(group_name(0, path))
            if size > MAX_NAME_BYTES:
                shown = path if len(path) <= 60 else f"{path[:60]}..."
                raise InvalidPartitionValueError(
                    f"partition path {shown!r} ({len(path.encode())} bytes): the record "
                    f"index of Hudi's metadata table names its files after it, and they would "
                    f"take {size} bytes, over the {MAX_NAME_BYTES} a file name may have; "
                    f"shorten the partition values to at most "
                    f"{len(path.encode()) - (size - MAX_NAME_BYTES)} bytes in all (e.g. "
                    "partition by a prefix or a hash of them), or use a version 6 table. "
                    "Nothing was written."
                )
    if keys is not None and len(keys):
        sizes = pc.binary_length(keys)
        longest = pc.max(sizes).as_py()
        if longest is not None and longest > MAX_KEY_BYTES:
            at = pc.index(pc.greater(sizes, MAX_KEY_BYTES), True).as_py()
            raise InvalidInputError(
                f"record key {keys[at].as_py()[:40]!r}... takes {longest} bytes: the record "
                f"index of Hudi's metadata table keeps keys as HFile keys, of at most "
                f"{MAX_KEY_BYTES} bytes; shorten the key (e.g. a hash of it), or use a "
                "version 6 table. Nothing was written."
            )


def partition_of(file_id: str) -> str | None:
    """The data partition of a partitioned layout's group (None: a global layout's)."""
    m = _GROUP.match(file_id)
    if m is None or m["partition"] is None:
        return None
    return re.sub(r"%([0-9A-F]{2})", lambda e: chr(int(e[1], 16)), m["partition"])


def group_of(key: str, count: int = FILE_GROUPS) -> int:
    """The file group of ``key``: Hudi's ``Math.abs(Math.abs(h) % n)`` of Java's
    ``String.hashCode`` ``h`` (UTF-16 code units, 32-bit wrapping); whatever the sign
    Java gives the remainder, its absolute value is ``|h| mod n``."""
    h = 0
    data = key.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    signed = h - (1 << 32) if h >= 1 << 31 else h
    return abs(signed) % count


def group_indexes(keys: Sequence[str], count: int) -> npt.NDArray[np.int64]:
    """``group_of`` of each of ``keys``, vectorised: Java's ``String.hashCode`` by Horner's
    rule over the keys' UTF-16 code units, one position of every key at a time (a write
    routes each new key: a loop per character would cost more than the rest of the
    metadata table's step)."""
    if count == 1 or not keys:
        return np.zeros(len(keys), np.int64)
    units = [k.encode("utf-16-be") for k in keys]
    lengths = np.fromiter((len(u) // 2 for u in units), np.int64, len(units))
    codes = np.frombuffer(b"".join(units), ">u2").astype(np.uint32)
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    h = np.zeros(len(keys), np.uint32)
    for j in range(int(lengths.max())):
        live = lengths > j
        h[live] = h[live] * np.uint32(31) + codes[starts[live] + j]  # wraps, as Java's int
    return np.abs(h.view(np.int32).astype(np.int64)) % count


#: A key in a data partition: (partition, record key).
Placed = tuple[str, str]

#: What an instant changes (:func:`changes`): a row per key inserted (its location) or
#: deleted (no file id).
CHANGES_SCHEMA = pa.schema(
    [
        ("partition", pa.string()),
        ("key", pa.string()),
        ("file_id", pa.string()),
        ("instant", pa.string()),
    ]
)


def changes(
    store: TableStore, document: Mapping[str, Any], in_memory: Mapping[str, pa.Table] | None = None
) -> pa.Table:
    """The keys the instant of ``document`` inserted (with their file id and instant) and
    deleted (file id null), by the index files it wrote (``in_memory``: the entries of
    those its writer still holds, by full path; the others are read): deletes first, so
    that where a key is deleted and inserted at once (a key moving in the global layout)
    the insert, later, wins."""
    tables = []
    for path in extra_of(document).get("index-files", []) or []:
        partition = posixpath.dirname(posixpath.relpath(path, RLI_DIR))
        partition = "" if partition == "." else partition
        full = store.path(path)
        held = (in_memory or {}).get(full)
        entries = held if held is not None else pq.read_table(full, filesystem=store.fs)
        if entries.num_rows == 0:
            continue
        fields: Sequence[str] = entries.column_names[: entries.column_names.index(HASH)]
        gone = pc.equal(entries.column(OP), DELETE)
        tables.append(
            pa.table(
                [
                    pa.repeat(pa.scalar(partition), entries.num_rows),
                    record_keys(entries, fields),
                    pc.if_else(gone, pa.scalar(None, pa.string()), entries.column(FILE_ID)),
                    entries.column(INSTANT).cast(pa.string()),
                ],
                schema=CHANGES_SCHEMA,
            )
        )
    if not tables:
        return CHANGES_SCHEMA.empty_table()
    table = pa.concat_tables(tables)
    if not table.column("file_id").null_count:
        return table  # no delete: nothing to put first (a take of 500k keys: 0.03 s)
    return table.take(pc.sort_indices(pc.is_valid(table.column("file_id"))))
